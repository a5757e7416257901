"""Reads of the exposure trail (issue 21): where a fact went, and who received it after it stopped
being believed.

Exposure rows hold ids only (memory.models.Exposure), so every read here works from a bare fact
id, also after the fact was erased. None of these checks who is asking: the callers do (the fact
page through review.access, the erasure page through its own workspace-admin check)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Count, Max, Min, QuerySet

from memory.models import Exposure, FactStatus, Workspace

if TYPE_CHECKING:
    from memory.models import Fact

LATEST_LIMIT = 20
RECIPIENTS_LIMIT = 200
# A fact in one of these states is no longer believed (out of recall), from `status_changed_at`.
NOT_BELIEVED = (FactStatus.CHALLENGED, FactStatus.DEPRECATED, FactStatus.ARCHIVED)


def _workspace_id(workspace: Workspace | int) -> int:
    return workspace.pk if isinstance(workspace, Workspace) else int(workspace)


def exposures_of_fact(workspace: Workspace | int, fact_id: int, since: datetime | None = None) -> QuerySet[Exposure]:
    """Every recorded serving of fact `fact_id` in `workspace` (from `since` on, if given), the
    latest first, with the agent loaded. Works after the fact is erased (ids only)."""
    return exposures_of_facts(workspace, [fact_id], since=since)


def exposures_of_facts(
    workspace: Workspace | int, fact_ids: list[int], *, since: datetime | None = None, until: datetime | None = None
) -> QuerySet[Exposure]:
    """Servings of any of `fact_ids` in `workspace`, served in [since, until), latest first."""
    qs = Exposure.objects.filter(workspace_id=_workspace_id(workspace), fact_id__in=list(fact_ids))
    if since is not None:
        qs = qs.filter(served_at__gte=since)
    if until is not None:
        qs = qs.filter(served_at__lt=until)
    return qs.select_related("agent").order_by("-served_at", "-id")


@dataclass
class Recipient:
    """One agent (and memory run, if any) that received some of the facts asked about."""

    agent_id: int | None
    agent_name: str
    run_id: int | None
    times: int
    first_at: datetime
    last_at: datetime
    fact_ids: list[int] = field(default_factory=list)
    surfaces: list[str] = field(default_factory=list)


def recipients_of(
    workspace: Workspace | int,
    fact_ids: list[int],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = RECIPIENTS_LIMIT,
) -> list[Recipient]:
    """The agents and runs that received any of `fact_ids` in [since, until): one row per (agent,
    run), with how often, when first and last, which facts and over which surfaces; the latest
    first. One query."""
    rows = (
        exposures_of_facts(workspace, fact_ids, since=since, until=until)
        .order_by()
        .values("agent_id", "agent__name", "run_id")
        .annotate(
            times=Count("id"),
            first_at=Min("served_at"),
            last_at=Max("served_at"),
            facts=ArrayAgg("fact_id", distinct=True, default=[]),
            via=ArrayAgg("surface", distinct=True, default=[]),
        )
        .order_by("-last_at", "agent_id", "run_id")[:limit]
    )
    return [
        Recipient(
            agent_id=r["agent_id"],
            agent_name=r["agent__name"] or "",
            run_id=r["run_id"],
            times=r["times"],
            first_at=r["first_at"],
            last_at=r["last_at"],
            fact_ids=sorted(r["facts"]),
            surfaces=sorted(r["via"]),
        )
        for r in rows
    ]


def counts_by_agent(workspace: Workspace | int, fact_id: int) -> list[dict[str, Any]]:
    """How often each agent received fact `fact_id`: [{agent_id, agent__name, times, last_at}],
    the most served first."""
    rows = (
        Exposure.objects.filter(workspace_id=_workspace_id(workspace), fact_id=fact_id)
        .values("agent_id", "agent__name")
        .annotate(times=Count("id"), last_at=Max("served_at"))
        .order_by("-times", "agent__name")
    )
    return [dict(row) for row in rows]


def stopped_believing_at(fact: Fact) -> datetime | None:
    """When `fact` stopped being believed: its supersession, or its move to challenged,
    deprecated or archived; None while it is believed."""
    if fact.superseded_by_id is not None and fact.superseded_at is not None:
        return fact.superseded_at
    if fact.status in NOT_BELIEVED:
        return fact.status_changed_at
    return None


@dataclass
class Trail:
    """The fact page's exposure sections."""

    latest: list[Exposure]
    total: int
    by_agent: list[dict[str, Any]]
    stopped_at: datetime | None
    chain_ids: list[int]
    since: list[Recipient]
    before: list[Recipient]
    retention_days: int = 0


def fact_trail(fact: Fact, history: list[Fact], *, limit: int = LATEST_LIMIT) -> Trail:
    """Where `fact` went (its latest servings, counts per agent) and, once it stopped being
    believed, who received it or any version of its chain (`history`) since, and before."""
    latest_qs = exposures_of_fact(fact.workspace_id, fact.pk).select_related("episode")
    latest = list(latest_qs[:limit])
    total = len(latest) if len(latest) < limit else latest_qs.count()
    stopped = stopped_believing_at(fact)
    chain = sorted({h.pk for h in history} | {fact.pk})
    since: list[Recipient] = []
    before: list[Recipient] = []
    if stopped is not None:
        since = recipients_of(fact.workspace_id, chain, since=stopped)
        before = recipients_of(fact.workspace_id, chain, until=stopped)
    return Trail(
        latest=latest,
        total=total,
        by_agent=counts_by_agent(fact.workspace_id, fact.pk),
        stopped_at=stopped,
        chain_ids=chain,
        since=since,
        before=before,
        retention_days=settings.ENGRAM_EXPOSURE_RETENTION_DAYS,
    )
