"""The review queue (`/review/`): one list of everything waiting for a person, a detail with
diffs and the evidence, and decisions taken in place with htmx."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from memory.actors import Actor
from memory.errors import EngramError
from memory.models import PromotionDecision, Workspace
from memory.services import promotion
from memory.services.conflict_reviews import review_conflict
from memory.services.conflicts import decide_conflict
from memory.services.lifecycle import deprecate_fact, revalidate_fact
from review.diff import render_inline, render_side_by_side
from review.forms import QueueDecisionForm
from review.selectors_queue import KINDS, decided_possible_conflict, entry_for, live_rivals, queue

# The buttons of a possible conflict: the resolution, and which fact wins a contradiction.
POSSIBLE_ACTIONS = {
    "same": ("same", None),
    "existing_wins": ("contradicts", "existing"),
    "proposed_wins": ("contradicts", "proposed"),
    "both_true": ("both_true", None),
}


def _queue_context(request: HttpRequest) -> dict:
    params = request.GET.dict() if request.method == "GET" else request.POST.dict()
    entries, counts = queue(request.user, params)
    return {
        "entries": entries,
        "counts": counts,
        "params": params,
        "kinds": KINDS,
        "workspaces": Workspace.objects.for_user(request.user),
    }


@login_required
def queue_page(request: HttpRequest) -> HttpResponse:
    name = "review/queue.html#queue" if request.htmx and not request.htmx.boosted else "review/queue.html"  # type: ignore[attr-defined]
    return render(request, name, _queue_context(request))


def _detail_context(request: HttpRequest, kind: str, pk: int) -> dict:
    entry = entry_for(request.user, kind, pk)
    if entry is None:
        raise Http404("Not in your queue.")
    context: dict = {"entry": entry}
    if kind == "candidate":
        candidate = entry.obj
        context["gates"] = promotion.compute_gates(candidate)
        context["rivals"] = [
            (
                f,
                render_inline(f.content, candidate.proposed_memory),
                render_side_by_side(f.content, candidate.proposed_memory),
            )
            for f in live_rivals(candidate)
        ]
        latest = candidate.replays.select_related("recorded_by_agent").order_by("-created_at", "-id")[:5]
        context["replays"] = [(r, promotion.replay_standing(candidate, r)) for r in latest]
    elif kind == "conflict":
        conflict = entry.obj
        context["diff"] = render_inline(conflict.loser.content, conflict.winner.content)
        context["side"] = render_side_by_side(conflict.loser.content, conflict.winner.content)
    elif kind == "possible":
        conflict = entry.obj
        context["diff"] = render_inline(conflict.existing.content, conflict.proposed.content)
        context["side"] = render_side_by_side(conflict.existing.content, conflict.proposed.content)
    elif kind == "challenged":
        context["rivals"] = [(f, render_inline(entry.obj.content, f.content), None) for f in live_rivals(entry.obj)]
    return context


@login_required
def queue_detail(request: HttpRequest, kind: str, pk: str) -> HttpResponse:
    return render(request, "review/queue_detail.html", _detail_context(request, kind, int(pk)))


@login_required
@require_POST
def queue_decide(request: HttpRequest, kind: str, pk: str) -> HttpResponse:
    """approve / edit-and-approve / deny (candidates), keep / restore (conflicts), same /
    existing_wins / proposed_wins / both_true (possible conflicts), revalidate / deprecate
    (challenged facts). Answers the refreshed detail; the queue reloads on the trigger. A possible
    conflict decided already answers 409 (`conflict_decided`)."""
    entry = entry_for(request.user, kind, int(pk))
    if entry is None and kind == "possible" and (decided := decided_possible_conflict(request.user, int(pk))):
        detail = f"This possible conflict was already decided ({decided.get_resolution_display()})."
        response = render(request, "review/queue_detail.html", {"entry": None, "error": detail}, status=409)
        response["HX-Trigger"] = "queue-changed"
        return response
    if entry is None:
        raise Http404("Not in your queue (decided meanwhile, or not yours to decide).")
    form = QueueDecisionForm(request.POST, kind=kind)
    if not form.is_valid():
        return HttpResponse("Unknown action for this item.", status=400)
    by = Actor.of_user(request.user)
    action, reason = form.cleaned_data["action"], form.cleaned_data["reason"]
    message = ""
    try:
        if kind == "candidate":
            decision = promotion.decide_candidate(
                candidate=entry.obj,
                by=by,
                action=action,
                reason=reason,
                edited_text=form.cleaned_data["text"] if action == "edit_approve" else None,
            )
            if decision.decision == PromotionDecision.Kind.DENY:
                message = "Denied."
            elif decision.fact_id:
                message = f"Approved and promoted: fact #{decision.fact_id}."
            else:
                message = "Approved; promotion still waits on: " + ", ".join(promotion.failing(decision.scorecard))
        elif kind == "conflict":
            restored = review_conflict(conflict=entry.obj, by=by, restore_loser=action == "restore", reason=reason)
            message = f"Restored as fact #{restored.pk}." if restored else "Decision kept."
        elif kind == "possible":
            resolution, side = POSSIBLE_ACTIONS[action]
            winner_id = getattr(entry.obj, f"{side}_id") if side else None
            decide_conflict(conflict=entry.obj, by=by, resolution=resolution, winner_id=winner_id, note=reason)
            message = {
                "same": "Recorded as the same fact: the newer one is now a mention of the older.",
                "contradicts": f"Recorded as a contradiction: fact #{winner_id} stands, the other is superseded.",
                "both_true": "Recorded as both true: both stay, and this pair will not be asked again.",
            }[resolution]
        elif action == "revalidate":
            revalidate_fact(fact=entry.obj, by=by, validated_by="human", note=reason)
            message = "Revalidated: the fact is active again."
        else:
            deprecate_fact(fact=entry.obj, by=by, reason=reason)
            message = "Deprecated: it leaves recall."
    except EngramError as exc:
        response = render(
            request,
            "review/queue_detail.html",
            {"entry": entry, "error": exc.detail},
            status=409 if exc.status == 409 else 422,
        )
        return response
    response = render(request, "review/queue_detail.html", {"entry": None, "done": message})
    response["HX-Trigger"] = "queue-changed"
    return response
