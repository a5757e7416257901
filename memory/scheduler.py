"""The daily jobs, and a small in-process scheduler that runs them in the embedded mode.

`DAILY_JOBS` is the one definition of the periodic work: config/celery.py turns it into the
`celery beat` schedule (production, CELERY_BROKER_URL set), and in the embedded mode (`make run`:
no broker, no beat) `start()` runs it from a daemon thread of the web process when
ENGRAM_SCHEDULER is on. The thread ticks shortly after start and then every TICK_SECONDS; a tick
runs each job that has not run in the last day (so a site that was down at 03:17 catches up at
its next start, and a long-running one runs each job about daily).

Two processes never run a job at once: a tick takes a PostgreSQL session advisory lock per job
(pg_try_advisory_lock; a busy lock means another process is on it and the tick skips it), then
reads the last run again before running. Each run is recorded as an audit event
(`scheduler.job_ran`, or `scheduler.job_failed` with the error; no workspace, target
`scheduled_job`) — the last run is read from there, so no table of its own is needed. A failed
run is tried again after RETRY_AFTER.

`FREQUENT_JOBS` are idempotent sweeps (due webhook deliveries): beat runs them every
`seconds`, the in-process scheduler at each tick, without a lock or an audit event.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

log = logging.getLogger(__name__)

FIRST_DELAY_SECONDS = 30  # after start: let the web process finish booting first
TICK_SECONDS = 600
INTERVAL = timedelta(days=1)
RETRY_AFTER = timedelta(hours=1)
RAN, FAILED = "scheduler.job_ran", "scheduler.job_failed"
TARGET_TYPE = "scheduled_job"


@dataclass(frozen=True)
class DailyJob:
    """A job run once a day: `task` is the Celery task's dotted name; beat runs it at hour:minute
    (UTC), the in-process scheduler once a day from the first tick after start."""

    name: str
    task: str
    hour: int
    minute: int


DAILY_JOBS: tuple[DailyJob, ...] = (
    # Stale detection challenges lifecycle-managed facts not validated or mentioned within their
    # memory type's window (SPEC §7); daily is ample for windows counted in days.
    DailyJob("detect-stale-facts", "memory.tasks.detect_stale_facts", hour=3, minute=17),
    # The exposure trail is kept ENGRAM_EXPOSURE_RETENTION_DAYS (issue 21).
    DailyJob("prune-exposures", "memory.tasks.prune_exposures", hour=3, minute=41),
    # Memory-agent runs idle for ENGRAM_RUN_ABANDON_HOURS are closed as abandoned (issue 39).
    DailyJob("close-abandoned-runs", "memory.tasks.close_abandoned_runs", hour=4, minute=5),
)


@dataclass(frozen=True)
class FrequentJob:
    """An idempotent sweep: every `seconds` under beat, at each tick (TICK_SECONDS) in-process."""

    name: str
    task: str
    seconds: float


FREQUENT_JOBS: tuple[FrequentJob, ...] = (
    # Webhook deliveries that are due: retries (the inline mode only records them) and first
    # attempts whose task was lost (memory.services.webhooks).
    FrequentJob("deliver-due-webhooks", "memory.tasks.deliver_due_webhooks", seconds=60.0),
)


def _lock_key(job: DailyJob) -> str:
    return f"engram-daily-job:{job.name}"


def last_run(job: DailyJob) -> tuple[datetime, bool] | None:
    """When the job last ran and whether it succeeded, from its latest audit event."""
    from memory.models import AuditEvent

    event = (
        AuditEvent.objects.filter(target_type=TARGET_TYPE, verb__in=[RAN, FAILED], detail__job=job.name)
        .order_by("-created_at", "-id")
        .values_list("created_at", "verb")
        .first()
    )
    return (event[0], event[1] == RAN) if event else None


def is_due(job: DailyJob, now: datetime) -> bool:
    """Never run, last ran successfully a day or more ago, or last failed RETRY_AFTER ago."""
    last = last_run(job)
    if last is None:
        return True
    at, succeeded = last
    return now - at >= (INTERVAL if succeeded else RETRY_AFTER)


def _run_task(job: DailyJob | FrequentJob) -> Any:
    from django.utils.module_loading import import_string

    return import_string(job.task)()  # a Celery task called directly runs here, synchronously


def _record(job: DailyJob, *, verb: str, at: datetime, detail: dict[str, Any]) -> None:
    from memory.actors import Actor
    from memory.models import AuditEvent

    actor = Actor.system("scheduler")
    AuditEvent.objects.create(
        workspace=None,
        actor_label=actor.label,
        verb=verb,
        target_type=TARGET_TYPE,
        detail={"job": job.name, "task": job.task, **detail},
        created_at=at,
    )


def run_if_due(job: DailyJob, now: datetime, *, runner: Callable[[DailyJob], Any] = _run_task) -> bool:
    """Run `job` if it is due and no other process is running it; True if it ran (or failed)."""
    from django.db import connection

    if not is_due(job, now):
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [_lock_key(job)])
        if not cursor.fetchone()[0]:
            return False  # another process is running it
        try:
            if not is_due(job, now):  # it finished in another process while we looked
                return False
            started = time.monotonic()
            try:
                result = runner(job)
            except Exception as exc:
                log.exception("Daily job %s failed", job.name)
                _record(job, verb=FAILED, at=now, detail={"error": f"{type(exc).__name__}: {exc}"[:500]})
                return True
            seconds = round(time.monotonic() - started, 3)
            _record(job, verb=RAN, at=now, detail={"result": _jsonable(result), "seconds": seconds})
            log.info("Daily job %s ran in %.1f s: %s", job.name, seconds, result)
            return True
        finally:
            cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [_lock_key(job)])


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, (dict, list, str, int, float, bool, type(None))) else repr(value)


def tick(
    now: datetime | None = None,
    *,
    jobs: Iterable[DailyJob] = DAILY_JOBS,
    runner: Callable[[DailyJob], Any] = _run_task,
) -> list[str]:
    """Run every due job once; returns the names of those that ran. `now` and `runner` are
    there for tests (a fake clock, a fake task)."""
    from django.utils import timezone

    now = now or timezone.now()
    return [job.name for job in jobs if run_if_due(job, now, runner=runner)]


def run_frequent_jobs() -> None:
    """Each FREQUENT_JOBS task once (no lock: they are idempotent sweeps); a failure is logged
    and the others still run."""
    for job in FREQUENT_JOBS:
        try:
            _run_task(job)
        except Exception:
            log.exception("Frequent job %s failed", job.name)


def _loop(stop: threading.Event) -> None:
    from django.db import close_old_connections, connection

    if stop.wait(FIRST_DELAY_SECONDS):
        return
    while True:
        close_old_connections()
        try:
            tick()
            run_frequent_jobs()
        except Exception:  # the database may be down for a moment: try again at the next tick
            log.exception("The daily-job scheduler's tick failed")
        finally:
            connection.close()  # hold no connection (nor session lock) between ticks
        if stop.wait(TICK_SECONDS):
            return


_started: threading.Thread | None = None
_stop = threading.Event()


def should_start() -> bool:
    """Only in the embedded mode (no broker: `celery beat` runs the jobs otherwise), only when
    ENGRAM_SCHEDULER is on (`make run` turns it on; the test settings turn it off)."""
    from django.conf import settings

    return bool(settings.ENGRAM_SCHEDULER) and not settings.CELERY_BROKER_URL


def start() -> threading.Thread | None:
    """Start the scheduler thread once per process, when `should_start()`; returns it."""
    global _started
    if _started is not None or not should_start():
        return _started
    _started = threading.Thread(target=_loop, args=(_stop,), name="engram-daily-jobs", daemon=True)
    _started.start()
    log.info("Daily jobs run in-process: %s", ", ".join(j.name for j in DAILY_JOBS))
    return _started
