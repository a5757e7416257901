"""The erasure page (issue 21): a workspace admin chooses a selection, sees exactly what will go,
and confirms with a reason; the result names the tombstone. Plain forms (GET for the preview,
POST with CSRF for the erasure): erasing is rare and deliberate, so the page does not hurry."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from memory.actors import Actor
from memory.errors import EngramError
from memory.models import Workspace
from memory.services import erasure
from review.access import is_workspace_admin, workspace_for

KINDS = [
    ("ids", "Fact ids"),
    ("domain", "A domain (and topic)"),
    ("search", "A full-text search"),
    ("agent", "An agent's writes"),
    ("review", "A remember review's stored items"),
]
FIELDS = ("kind", "ids", "domain", "topic", "query", "agent", "review")


def selection_from(params: QueryDict) -> dict[str, Any] | None:
    """The selection named by the form's fields, or None when no kind was chosen."""
    kind = params.get("kind", "")
    if not kind:
        return None
    data: dict[str, Any] = {"kind": kind}
    for name in FIELDS[1:]:
        if params.get(name):
            data[name] = params.get(name)
    return data


@login_required
@require_http_methods(["GET", "POST"])
def erase_page(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = workspace_for(request.user, slug)
    if not is_workspace_admin(request.user, workspace):
        return HttpResponseForbidden("Only a workspace admin may erase.")
    params = request.POST if request.method == "POST" else request.GET
    context: dict[str, Any] = {"workspace": workspace, "kinds": KINDS, "form": {n: params.get(n, "") for n in FIELDS}}
    selection = selection_from(params)
    if selection is None:
        return render(request, "review/erase.html", context)
    status = 200
    try:
        plan = erasure.select_subject(workspace, erasure.parse_selection(selection))
        if plan.is_empty:
            raise erasure.NothingToErase()
        if request.method == "POST":
            return _erase(request, workspace, plan, context)
    except erasure.SelectionChanged as changed:  # show the new preview to confirm again
        context["error"], status = changed.detail, changed.status
    except EngramError as error:
        context["error"] = error.detail
        return render(request, "review/erase.html", context, status=400)
    context["plan"] = plan
    context["counts"] = sorted(plan.counts().items())
    context["previewed"] = ",".join(str(pk) for pk in plan.fact_ids)
    return render(request, "review/erase.html", context, status=status)


def _erase(request: HttpRequest, workspace: Workspace, plan: erasure.ErasurePlan, context: dict) -> HttpResponse:
    previewed = [int(p) for p in request.POST.get("previewed", "").split(",") if p.strip().isdigit()]
    erasure.check_previewed(plan, previewed)
    if request.POST.get("confirm") != "yes":
        raise erasure.InvalidSelection("Tick the confirmation: erasure cannot be undone.", code="confirmation_required")
    event = erasure.erase(plan=plan, reason=request.POST.get("reason", ""), by=Actor.of_user(request.user))
    context.update({"tombstone": event, "counts": sorted(event.detail["counts"].items()), "form": {}})
    return render(request, "review/erase.html", context)
