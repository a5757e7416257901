"""The erasure page (issue 21): a workspace admin chooses a selection, sees exactly what will go,
and confirms with a reason; the result names the tombstone. Plain forms (GET for the preview,
POST with CSRF for the erasure): erasing is rare and deliberate, so the page does not hurry.
A refused selection or confirmation comes back with everything typed and each field's error
beside its field (issue 37)."""

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

TEMPLATE = "review/erase.html"
KINDS = [
    ("ids", "Fact ids"),
    ("domain", "A domain (and topic)"),
    ("search", "A full-text search"),
    ("agent", "An agent's writes"),
    ("review", "A remember review's stored items"),
]
# The selection's text inputs: name, label, placeholder.
INPUTS = [
    ("ids", "Fact ids", "12, 14, 15"),
    ("domain", "Domain", "architecture or repo:web/context"),
    ("topic", "Topic", ""),
    ("query", "Full-text query", ""),
    ("agent", "Agent", "agent name"),
    ("review", "Remember review", "review id"),
]
FIELDS = ("kind", *(name for name, _, _ in INPUTS))


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


def _selection_inputs(form: dict[str, str], errors: dict[str, Any]) -> list[dict[str, Any]]:
    """The selection's inputs as the template draws them: each with its value and its errors."""
    return [
        {
            "name": name,
            "label": label,
            "placeholder": placeholder,
            "value": form.get(name, ""),
            "errors": errors.get(name),
        }
        for name, label, placeholder in INPUTS
    ]


def _refused(request: HttpRequest, context: dict[str, Any], error: EngramError) -> HttpResponse:
    """The page again with the refusal's sentence on top and each field's error beside its field."""
    context.update(error=error.detail, errors=error.fields)
    context["inputs"] = _selection_inputs(context["form"], error.fields)
    return render(request, TEMPLATE, context, status=error.status)


def _with_plan(context: dict[str, Any], plan: erasure.ErasurePlan) -> None:
    context.update(plan=plan, counts=sorted(plan.counts().items()), previewed=",".join(str(pk) for pk in plan.fact_ids))


@login_required
@require_http_methods(["GET", "POST"])
def erase_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The selection (GET), its preview (GET with a kind) and the erasure (POST). Refused: 400
    (409 when the selection changed since the preview, shown again to confirm) with what was typed."""
    workspace = workspace_for(request.user, slug)
    if not is_workspace_admin(request.user, workspace):
        return HttpResponseForbidden("Only a workspace admin may erase.")
    params = request.POST if request.method == "POST" else request.GET
    form = {n: params.get(n, "") for n in FIELDS}
    context: dict[str, Any] = {
        "workspace": workspace,
        "kinds": KINDS,
        "form": form,
        "inputs": _selection_inputs(form, {}),
        "typed": {"reason": request.POST.get("reason", ""), "confirm": request.POST.get("confirm") == "yes"},
    }
    selection = selection_from(params)
    if selection is None:
        return render(request, TEMPLATE, context)
    try:
        plan = erasure.select_subject(workspace, erasure.parse_selection(selection))
        if plan.is_empty:
            raise erasure.NothingToErase()
    except EngramError as error:
        return _refused(request, context, error)
    _with_plan(context, plan)
    if request.method == "GET":
        return render(request, TEMPLATE, context)
    try:
        return _erase(request, workspace, plan, context)
    except erasure.SelectionChanged as changed:
        context["typed"]["confirm"] = False  # the new preview is confirmed afresh
        return _refused(request, context, changed)
    except EngramError as error:
        return _refused(request, context, error)


def _erase(request: HttpRequest, workspace: Workspace, plan: erasure.ErasurePlan, context: dict) -> HttpResponse:
    previewed = [int(p) for p in request.POST.get("previewed", "").split(",") if p.strip().isdigit()]
    erasure.check_previewed(plan, previewed)
    if request.POST.get("confirm") != "yes":
        raise erasure.InvalidSelection(
            "Tick the confirmation: erasure cannot be undone.",
            code="confirmation_required",
            fields={"confirm": ["Tick this to erase: it cannot be undone."]},
        )
    event = erasure.erase(plan=plan, reason=request.POST.get("reason", ""), by=Actor.of_user(request.user))
    context.update({"tombstone": event, "counts": sorted(event.detail["counts"].items()), "form": {}})
    return render(request, TEMPLATE, context)
