"""Completing a held candidate in the review queue (issue 18): the reviewer adds the scope,
anti-scope or evidence refs its gates miss, and the detail is redrawn with the gates computed
again, so the candidate can then be approved in place."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from memory.actors import Actor
from memory.errors import EngramError
from memory.services import promotion
from review import views_queue
from review.forms import CandidateCompletionForm
from review.selectors_queue import entry_for

COMPLETED_NAMES = {"applies_to": "scope", "does_not_apply_to": "anti-scope", "evidence_refs": "evidence refs"}


def _detail(request: HttpRequest, pk: int, extra: dict[str, Any], status: int = 200) -> HttpResponse:
    """The candidate as the queue shows it (fragment for htmx, else its page), with the completion's
    outcome; a candidate decided meanwhile is shown decided, as the queue shows it."""
    context = views_queue._detail_context(request, "candidate", pk)
    context.update(extra)
    return views_queue._render_item(request, context, status=status)


def _problems(exc: EngramError) -> str:
    return "; ".join(
        f"{COMPLETED_NAMES.get(name, name)}: {' '.join(map(str, messages))}"
        for name, messages in exc.fields.items()
        if name != "non_field_errors"
    )


@login_required
@require_POST
def candidate_complete(request: HttpRequest, pk: str) -> HttpResponse:
    """Add scope / anti-scope / evidence refs to a held candidate (promotion.complete_candidate).
    Answers the redrawn detail: 200 with the gates computed again (a plain form POST is redirected
    to the item's page), 422 with the reviewer's input kept when the additions are refused, 409
    once the candidate was decided, 404 outside the person's queue (as the queue answers)."""
    item_pk = int(pk)
    entry = entry_for(request.user, "candidate", item_pk)
    if entry is None:
        context = views_queue._detail_context(request, "candidate", item_pk)  # 404 unless theirs to see
        if context["entry"].obj.is_decided:
            context["conflict_message"] = "This candidate was already decided; nothing was added."
            return views_queue._render_item(request, context, status=409)
        context["error"] = "Nothing holds this candidate back for a person to complete; nothing was added."
        return views_queue._render_item(request, context, status=422)
    form = CandidateCompletionForm(request.POST)
    if not form.is_valid():
        return _detail(request, item_pk, {"completion_form": form, "completion_error": form.error_text()}, 422)
    data = form.cleaned_data
    try:
        promotion.complete_candidate(
            candidate=entry.obj,
            by=Actor.of_user(request.user),
            applies_to=data["applies_to"],
            does_not_apply_to=data["does_not_apply_to"],
            evidence_refs=data["evidence_refs"],
            note=data["note"],
        )
    except promotion.CandidateDecided as exc:
        return _detail(request, item_pk, {"conflict_message": f"{exc.detail} Nothing was added."}, 409)
    except EngramError as exc:
        error = f"{exc.detail} {_problems(exc)}".strip()
        return _detail(
            request, item_pk, {"completion_form": form, "completion_error": error}, 403 if exc.status == 403 else 422
        )
    added = ", ".join(name for field, name in COMPLETED_NAMES.items() if data[field])
    done = f"Added {added}; the gates were computed again."
    if not views_queue._is_htmx(request):
        messages.success(request, done)
        return redirect("review:queue-detail", kind="candidate", pk=item_pk)
    response = _detail(request, item_pk, {"completed": done})
    response["HX-Trigger"] = "queue-changed"  # the list's "waiting on" label changed
    return response
