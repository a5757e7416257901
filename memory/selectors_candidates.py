"""Reads of promotion candidates (SPEC §7). They start from `Candidate.objects.visible_to(agent)`:
another workspace's or a `none` domain's candidate is not found, exactly like a missing one.
Replays and decisions are prefetched, so gates are computed without a query per row."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import Prefetch, QuerySet

from memory.errors import NotFound
from memory.models import Candidate, PromotionDecision, Replay
from memory.selectors import domain_for_agent

if TYPE_CHECKING:
    from memory.models import Agent


def _with_gate_inputs(qs: QuerySet[Candidate]) -> QuerySet[Candidate]:
    return qs.select_related("domain__repo", "human_approved_by").prefetch_related(
        Prefetch("replays", queryset=Replay.objects.select_related("recorded_by_agent").order_by("created_at", "id")),
        Prefetch("decisions", queryset=PromotionDecision.objects.order_by("created_at", "id")),
    )


def candidates_for_agent(agent: Agent, filters: dict[str, Any] | None = None) -> QuerySet[Candidate]:
    """Visible candidates, newest first, filtered by promotion_status, failure_class, domain/repo."""
    filters = filters or {}
    qs = Candidate.objects.visible_to(agent)
    if filters.get("promotion_status"):
        qs = qs.filter(promotion_status=filters["promotion_status"])
    if filters.get("failure_class"):
        qs = qs.filter(failure_class=filters["failure_class"])
    if filters.get("domain"):
        qs = qs.filter(domain=domain_for_agent(agent, domain=filters["domain"], repo=filters.get("repo")))
    elif filters.get("repo"):
        qs = qs.filter(domain__repo__slug=filters["repo"])
    return _with_gate_inputs(qs).order_by("-created_at", "-id")


def candidate_for_agent(agent: Agent, candidate_pk: int) -> Candidate:
    """One visible candidate with its replays and decisions. Raises NotFound
    (`candidate_not_found`) for another workspace's or a `none` domain's candidate."""
    candidate = _with_gate_inputs(Candidate.objects.visible_to(agent)).filter(pk=candidate_pk).first()
    if candidate is None:
        raise NotFound(f"No candidate {candidate_pk}.", code="candidate_not_found")
    return candidate
