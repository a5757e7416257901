"""Reads of memory-agent runs: the agent's (its own runs only) and the run page's (a person's
workspaces). Another agent's run — even in the same workspace — is simply not found."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Prefetch, QuerySet

from memory import access
from memory.errors import NotFound
from memory.models import Agent, BankItem, BankKind, Intervention, MemoryRun, RunStatus


def _not_found(run_id: int) -> NotFound:
    return NotFound(f"No run {run_id}.", code="run_not_found")


def run_for_agent(agent: Agent, run_id: int) -> MemoryRun:
    """One run of this agent. Raises NotFound (`run_not_found`) for anyone else's run."""
    run = MemoryRun.objects.of_agent(agent).filter(pk=run_id).first()
    if run is None:
        raise _not_found(run_id)
    return run


def idle_run_ids(*, before: datetime, after_pk: int = 0, limit: int) -> list[int]:
    """Ids of running runs whose last activity is before `before`, above `after_pk`, in pk order,
    at most `limit`: the abandon sweep's read, from the run rows alone (never a bank). Unlocked:
    the sweep re-checks each run under its lock."""
    return list(
        MemoryRun.objects.filter(status=RunStatus.RUNNING, last_activity_at__lt=before, pk__gt=after_pk)
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )


@dataclass
class Bank:
    run: MemoryRun
    status: BankItem | None
    knowledge: list[BankItem] = field(default_factory=list)
    procedural: list[BankItem] = field(default_factory=list)

    @property
    def items(self) -> list[BankItem]:
        return [*self.knowledge, *self.procedural]


def bank_of(run: MemoryRun) -> Bank:
    """The run's memory bank as it stands, in one query: status, then knowledge and procedural
    items in the order they were first saved."""
    bank = Bank(run=run, status=None)
    items = BankItem.objects.filter(run=run).select_related("candidate").order_by("created_at", "id")
    for item in items:
        if item.kind == BankKind.STATUS:
            bank.status = item
        elif item.kind == BankKind.KNOWLEDGE:
            bank.knowledge.append(item)
        else:
            bank.procedural.append(item)
    return bank


def runs_for_user(user: Any) -> QuerySet[MemoryRun]:
    """Runs a person may see (access.restrict: those of their workspaces), newest first."""
    return (
        access.restrict(MemoryRun.objects.all(), user, "view")
        .select_related("agent__role", "workspace")
        .order_by("-created_at", "-id")
    )


def run_for_user(user: Any, run_id: int) -> MemoryRun:
    """One run for the run page, with its interventions; NotFound outside the person's workspaces."""
    run = (
        runs_for_user(user)
        .select_related("episode")
        .prefetch_related(Prefetch("interventions", queryset=Intervention.objects.order_by("step", "created_at", "id")))
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        raise _not_found(run_id)
    return run


@dataclass
class TimelineEntry:
    step: int
    kind: str  # "step" or "decision"
    step_data: dict[str, Any] | None = None
    intervention: Intervention | None = None


def timeline_of(run: MemoryRun) -> list[TimelineEntry]:
    """Steps (as reported in the windows the memory agent reviewed) and its decisions, in step
    order; a decision before step n comes right before step n. Uses prefetched interventions."""
    interventions = list(run.interventions.all())
    steps: dict[int, dict[str, Any]] = {}
    for intervention in interventions:
        for entry in intervention.window or []:
            steps[int(entry["step"])] = entry  # a later window's view of a step wins
    entries = [TimelineEntry(step=n, kind="step", step_data=data) for n, data in steps.items()]
    entries += [TimelineEntry(step=i.step, kind="decision", intervention=i) for i in interventions]
    # The decision logged at step n was taken before step n ran.
    return sorted(entries, key=lambda e: (e.step, 0 if e.kind == "decision" else 1))
