"""Memory-agent runs cut off mid-way (SPEC §9, issue 39): the daily job `close-abandoned-runs`
closes a run with no activity for ENGRAM_RUN_ABANDON_HOURS as finished, with its reason.

A run's activity is what its agent writes through `agents.runs` (its start, bank writes, logged
decisions), each stamping `MemoryRun.last_activity_at` under the run's row lock; reads are not
activity. Closing an abandoned run offers nothing for promotion: SPEC §9 offers bank items when
the run finishes and its agent asks (`offer_candidates`), and nobody asked. The bank stays, for
the run page and for a person to act on.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory import selectors_runs
from memory.actors import Actor
from memory.audit import record_events
from memory.models import END_ABANDONED, MemoryRun, RunStatus

ABANDON_BATCH = 200  # runs closed per transaction


def abandoned_reason(hours: int) -> str:
    return f"{END_ABANDONED}: no activity for {hours} hour{'' if hours == 1 else 's'}"


def close_abandoned_runs(
    *, now: datetime | None = None, batch: int = ABANDON_BATCH, by: Actor | None = None
) -> dict[str, int]:
    """Close every running run idle for ENGRAM_RUN_ABANDON_HOURS (0: none) as finished, its
    `end_reason` saying so, with a `run.abandoned` audit event each; returns how many. One
    transaction per batch, whose rows are locked (a run being written is skipped) and re-checked,
    so a run that showed activity since it was read stays open. Idempotent."""
    hours = settings.ENGRAM_RUN_ABANDON_HOURS
    if hours <= 0:
        return {"closed": 0}
    by = by or Actor.system("close_abandoned_runs")
    now = now or timezone.now()
    before = now - timedelta(hours=hours)
    closed, after_pk = 0, 0
    while True:
        ids = selectors_runs.idle_run_ids(before=before, after_pk=after_pk, limit=batch)
        if ids:
            closed += _close(ids, before=before, now=now, hours=hours, by=by)
        if len(ids) < batch:
            return {"closed": closed}
        after_pk = ids[-1]


@transaction.atomic
def _close(ids: list[int], *, before: datetime, now: datetime, hours: int, by: Actor) -> int:
    locked = list(
        MemoryRun.objects.select_for_update(skip_locked=True)
        .filter(pk__in=ids, status=RunStatus.RUNNING, last_activity_at__lt=before)  # re-checked under the lock
        .order_by("pk")
        .values_list("pk", "workspace_id", "last_activity_at")
    )
    if not locked:
        return 0
    reason = abandoned_reason(hours)
    MemoryRun.objects.filter(pk__in=[pk for pk, *_ in locked]).update(
        status=RunStatus.FINISHED, finished_at=now, end_reason=reason
    )
    record_events(
        actor=by,
        verb="run.abandoned",
        target_type="memoryrun",
        at=now,
        events=(
            (workspace_id, pk, {"reason": reason, "hours": hours, "last_activity_at": last.isoformat()})
            for pk, workspace_id, last in locked
        ),
    )
    return len(locked)
