"""Bulk decisions from the queue list (`/review/bulk/`): approve or deny the checked entries.

Each item is decided on its own — its own access check (memory.access), its own transaction,
through the same service as a single decision — and reported on its own: one item decided
meanwhile, or not the person's to decide, does not stop the others."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from memory import access
from memory.actors import Actor
from memory.errors import EngramError
from memory.models import Candidate, Fact, FactStatus, PromotionDecision
from memory.services.lifecycle import deprecate_fact, revalidate_fact
from memory.services.promotion import CandidateDecided, decide_candidate, failing
from review.forms import BulkDecisionForm


@dataclass
class BulkResult:
    """What happened to one checked entry: `done`, `decided` (already, by someone), `refused`
    (not the person's to decide, or gone) or `error` (the service said no)."""

    kind: str
    pk: int
    status: str
    message: str
    links: list[tuple[str, str]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.kind}-{self.pk}"


def _item_link(kind: str, pk: int) -> tuple[str, str]:
    return (f"{kind} #{pk}", reverse("review:queue-detail", args=[kind, pk]))


def _fact_link(fact: Fact | None, workspace_slug: str) -> list[tuple[str, str]]:
    if fact is None:
        return []
    return [(f"fact #{fact.pk}", reverse("review:fact", args=[workspace_slug, fact.pk]))]


def _final_decision(candidate: Candidate) -> PromotionDecision | None:
    return (
        candidate.decisions.filter(decision__in=[PromotionDecision.Kind.PROMOTE, PromotionDecision.Kind.DENY])
        .select_related("fact")
        .first()
    )


def _already_decided(candidate: Candidate) -> BulkResult:
    decision = _final_decision(candidate)
    links = [_item_link("candidate", candidate.pk)]
    if decision is None:
        return BulkResult("candidate", candidate.pk, "decided", f"Already {candidate.promotion_status}.", links)
    verb = "denied" if decision.decision == PromotionDecision.Kind.DENY else "promoted"
    when = decision.created_at.strftime("%Y-%m-%d %H:%M")
    links += _fact_link(decision.fact, candidate.workspace.slug)
    return BulkResult(
        "candidate", candidate.pk, "decided", f"Already {verb} by {decision.decided_by_label} at {when}.", links
    )


def _decide_candidate(user: Any, by: Actor, pk: int, action: str, reason: str) -> BulkResult:
    candidate = Candidate.objects.select_related("workspace").filter(pk=pk).first()
    if candidate is None or not access.may(user, "decide", candidate):
        # The same answer for missing and not-yours: nothing about other domains leaks.
        return BulkResult("candidate", pk, "refused", "Not in your queue: not found, or not yours to decide.")
    if candidate.is_decided:
        return _already_decided(candidate)
    try:
        # Its own transactions (the vector is computed outside them), as for a single decision.
        decision = decide_candidate(candidate=candidate, by=by, action=action, reason=reason)
    except CandidateDecided:  # decided by someone else between the check and the lock
        return _already_decided(candidate)
    except EngramError as exc:
        return BulkResult("candidate", pk, "error", exc.detail, [_item_link("candidate", pk)])
    links = [_item_link("candidate", pk)]
    if decision.decision == PromotionDecision.Kind.DENY:
        return BulkResult("candidate", pk, "done", "Denied.", links)
    if decision.decision == PromotionDecision.Kind.PROMOTE:
        links += _fact_link(decision.fact, candidate.workspace.slug)
        return BulkResult("candidate", pk, "done", decision.reason, links)
    waits = ", ".join(failing(decision.scorecard)) or "its gates"
    return BulkResult("candidate", pk, "done", f"Approved, not promoted: held on {waits}.", links)


def _decide_challenged(user: Any, by: Actor, pk: int, action: str, reason: str) -> BulkResult:
    fact = (
        Fact.objects.select_related("workspace")
        .defer("embedding", "content_embedding", "search_vector")
        .filter(pk=pk)
        .first()
    )
    if fact is None or not access.may(user, "decide", fact):
        return BulkResult("challenged", pk, "refused", "Not in your queue: not found, or not yours to decide.")
    links = _fact_link(fact, fact.workspace.slug)
    if fact.status != FactStatus.CHALLENGED or fact.superseded_by_id is not None:
        state = "superseded" if fact.superseded_by_id is not None else fact.status
        return BulkResult("challenged", pk, "decided", f"Already decided: the fact is {state}.", links)
    try:
        if action == "approve":  # each service is one transaction with its audit event
            revalidate_fact(fact=fact, by=by, validated_by="human", note=reason)
        else:
            deprecate_fact(fact=fact, by=by, reason=reason)
    except EngramError as exc:
        return BulkResult("challenged", pk, "error", exc.detail, links)
    message = "Revalidated: active again." if action == "approve" else "Deprecated: it leaves recall."
    return BulkResult("challenged", pk, "done", message, links)


DECIDERS = {"candidate": _decide_candidate, "challenged": _decide_challenged}


@login_required
@require_POST
def queue_bulk(request: HttpRequest) -> HttpResponse:
    """Approve or deny every checked entry (candidates: approve / deny; challenged facts:
    revalidate / deprecate). Answers the per-item report (for #detail) and `queue-changed`;
    422 with the form's errors (no reason to deny, nothing selected) and nothing decided."""
    form = BulkDecisionForm(request.POST)
    if not form.is_valid():
        return render(request, "review/_bulk_result.html", {"error": form.error_text()}, status=422)
    action, reason = form.cleaned_data["action"], form.cleaned_data["reason"]
    by = Actor.of_user(request.user)
    results = [DECIDERS[kind](request.user, by, pk, action, reason) for kind, pk in form.cleaned_data["items"]]
    response = render(request, "review/_bulk_result.html", {"results": results, "action": action})
    response["HX-Trigger"] = "queue-changed"
    return response
