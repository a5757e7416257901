"""Candidates that wait on a person or a replay (issue 18): held on a gate a person can complete,
approved but still held, or not yet evidenced. A candidate whose gates all pass and that needs no
person is its agent's to promote and stays out of the queue."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, F, FloatField, Func, Prefetch, Q, QuerySet, Window

from memory.models import Candidate, PromotionStatus, Replay
from memory.services.promotion import Scorecard, compute_gates, failing

# Gates no person satisfies from the queue: the promote call's own flags.
NOT_A_PERSONS = ("write_flag", "auto_promotion")
WAITING_LABELS = {
    "failure_class": "its failure class",
    "provenance": "its provenance",
    "scope": "scope / anti-scope",
    "traceability": "evidence refs",
    "evidence": "a replay or a person's approval",
    "human_review": "a person's approval",
}


def waiting_on(gates: Scorecard) -> list[str]:
    """The gates that hold the candidate back and that a person or a replay can satisfy."""
    return [name for name in failing(gates) if name not in NOT_A_PERSONS]


def waiting_label(candidate: Candidate, gates: Scorecard) -> str:
    """What the queue says the candidate waits on, e.g. `approved, waiting on scope / anti-scope`."""
    names = waiting_on(gates)
    if "human_review" in names:  # the approval it waits for is evidence too: one thing to ask for
        names = [name for name in names if name not in ("evidence", "human_review")] + ["human_review"]
    waits = [WAITING_LABELS.get(name, name) for name in names]
    approved = "approved, " if candidate.human_approved_at is not None else ""
    if not waits:
        return "approved, ready to promote" if approved else "ready: approve to promote"
    said = waits[0] if len(waits) == 1 else f"{', '.join(waits[:-1])} and {waits[-1]}"
    return f"{approved}waiting on {said}"


def waiting_candidates(
    workspaces: Any,
    domain_ids: set[int] | None,
    *,
    since: datetime | None = None,
    limit: int = 200,
    oldest: bool = False,
    agent: str | None = None,
    pk: int | None = None,
    pks: list[int] | None = None,
) -> list[Candidate]:
    """Open candidates of these domains that need a person or a replay, newest first (`oldest`:
    oldest first), each with `gates`, `waiting_on` and `waiting_label` set. Candidates requiring
    human review are always listed (approved ones too, until promoted or denied); others while a
    gate a person or a replay can satisfy still blocks them. `domain_ids` None: every domain of the
    workspaces; `agent`: only those its submitter's name (an agent's, else the submitter's label)
    is; `pk`: only that one; `pks`: only those. A bounded number of queries per `limit` rows."""
    candidates = open_candidates(workspaces, domain_ids, since=since, agent=agent, pk=pk, pks=pks).order_by(
        *(("created_at", "id") if oldest else ("-created_at", "-id"))
    )
    found: list[Candidate] = []
    # A few named ones are read at once; a list read in chunks stops once `limit` wait.
    for candidate in candidates if pks is not None else candidates.iterator(chunk_size=limit):
        gates = compute_gates(candidate)
        waits = waiting_on(gates)
        if not candidate.requires_human_review and not waits:
            continue
        candidate.gates, candidate.waiting_on = gates, waits  # type: ignore[attr-defined]
        candidate.waiting_label = waiting_label(candidate, gates)  # type: ignore[attr-defined]
        found.append(candidate)
        if len(found) >= limit:
            break
    return found


def open_candidates(
    workspaces: Any,
    domain_ids: set[int] | None,
    *,
    since: datetime | None,
    agent: str | None,
    pk: int | None,
    pks: list[int] | None = None,
) -> QuerySet[Candidate]:
    """The open candidates waiting_candidates reads (its filters, before the gates)."""
    candidates = (
        Candidate.objects.open()
        .filter(workspace__in=workspaces)
        .exclude(promotion_status__in=[PromotionStatus.BLOCKED, PromotionStatus.HARNESS_FIX])
        .select_related("workspace", "domain__repo", "human_approved_by", "submitted_by_agent")
        .prefetch_related(Prefetch("replays", queryset=Replay.objects.select_related("recorded_by_agent")))
    )
    if domain_ids is not None:
        candidates = candidates.filter(domain_id__in=domain_ids)
    if since:
        candidates = candidates.filter(created_at__lt=since)
    if agent:
        candidates = candidates.filter(
            Q(submitted_by_agent__name=agent) | Q(submitted_by_agent__isnull=True, submitted_by_label=agent)
        )
    if pk is not None:
        candidates = candidates.filter(pk=pk)
    if pks is not None:
        candidates = candidates.filter(pk__in=pks)
    return candidates


def epoch(field: str) -> Func:
    """A timestamp column as epoch seconds (float8 keeps its microseconds, in the same order):
    the review list's keys sort hundreds of moments and show none, and parsing each as a datetime
    was a tenth of an item page's Python (issue 38)."""
    return Func(F(field), template="date_part('epoch', %(expressions)s)", output_field=FloatField())


def waiting_candidate_keys(
    workspaces: Any,
    domain_ids: set[int] | None,
    *,
    limit: int,
    most: int,
    since: datetime | None = None,
    oldest: bool = False,
    agent: str | None = None,
) -> tuple[list[tuple[float, int]], int]:
    """(created_at as epoch seconds, pk) of waiting_candidates(..., limit=limit), in their order, and how many wait
    (count_waiting_candidates(..., most=most)), without reading in full the candidates that wait on
    a person whatever their gates (requires_human_review): only the others are read, to compute
    their gates. When every open candidate is of those, they are counted in the same statement."""
    candidates = open_candidates(workspaces, domain_ids, since=since, agent=agent, pk=None).order_by(
        *(("created_at", "id") if oldest else ("-created_at", "-id"))
    )
    rows = (
        candidates.prefetch_related(None)
        .annotate(open=Window(Count("*")), gated=Window(Count("pk", filter=Q(requires_human_review=False))))
        .annotate(at=epoch("created_at"))
        .values_list("at", "pk", "requires_human_review", "open", "gated")
    )
    found: list[tuple[float, int]] = []
    start, counted = 0, None
    while len(found) < limit:
        chunk = list(rows[start : start + limit])
        if chunk and not chunk[0][4]:  # every open candidate waits on a person
            counted = min(chunk[0][3], most)
        others = [pk for _, pk, reviewed, *_ in chunk if not reviewed]
        gated = candidates.filter(pk__in=others) if others else []
        waiting = {candidate.pk for candidate in gated if waiting_on(compute_gates(candidate))}
        found += [(at, pk) for at, pk, reviewed, *_ in chunk if reviewed or pk in waiting]
        if len(chunk) < limit:  # every open candidate was read
            counted = min(len(found), most)
            break
        start += limit
    found = found[:limit]
    if counted is None:
        counted = count_waiting_candidates(workspaces, domain_ids, most=most, since=since, agent=agent)
    return found, counted


def count_waiting_candidates(
    workspaces: Any,
    domain_ids: set[int] | None,
    *,
    most: int,
    since: datetime | None = None,
    agent: str | None = None,
    pk: int | None = None,
) -> int:
    """len(waiting_candidates(..., limit=most)) without reading the candidates that wait on a
    person whatever their gates (requires_human_review): those are counted in SQL, only the others
    are read to have their gates computed."""
    candidates = open_candidates(workspaces, domain_ids, since=since, agent=agent, pk=pk)
    reviewed = candidates.filter(requires_human_review=True).order_by().values("pk")[:most].count()
    if reviewed >= most:
        return most
    others = candidates.filter(requires_human_review=False).order_by("-created_at", "-id")
    waiting = 0
    for candidate in others.iterator(chunk_size=most - reviewed):
        if waiting_on(compute_gates(candidate)):
            waiting += 1
            if reviewed + waiting >= most:
                break
    return reviewed + waiting
