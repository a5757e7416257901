"""Bounded jobs: consolidate and harmonize run at most once at a time per scope (SPEC §4).

`claim_job` either creates the one unfinished job of a (kind, scope) or answers the job already
queued or running there. The partial unique index `job_one_unfinished_per_scope` makes that
race-safe across processes: of two simultaneous claims, PostgreSQL makes the second INSERT wait
for the first to commit and then refuses it, and the loser reads the winner's row. It works the
same whether the job then runs inline (embedded mode: the claim is committed before the work
starts, so a second request sees it) or on a Celery worker.

A job that is not finished by its `expires_at` (ENGRAM_JOB_TIMEOUT_SECONDS after it was queued,
renewed when it starts) is presumed lost — a crashed worker or web process — and the next claim
for its scope closes it as expired instead of waiting for it forever. A lost task delivered
again later finds its job finished and does nothing (`run_job`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.models import Job

if TYPE_CHECKING:
    from memory.models import Agent

CLAIM_ATTEMPTS = 3


@dataclass(frozen=True)
class Claim:
    job: Job
    created: bool  # False: the request joined a job already queued or running


def job_timeout() -> timedelta:
    return timedelta(seconds=int(settings.ENGRAM_JOB_TIMEOUT_SECONDS))


def harmonize_scope(workspace_id: int) -> str:
    """Harmonize reconciles a whole workspace: one at a time per workspace."""
    return f"workspace:{workspace_id}"


def consolidate_scope(agent_id: int, session_id: str | None) -> str:
    """Consolidate works on one agent's hot tier: one at a time per agent and session (`*`: all)."""
    return f"agent:{agent_id}:session:{session_id if session_id else '*'}"


def expire_lost_jobs(*, kind: str, scope: str) -> int:
    """Close the scope's unfinished jobs whose time ran out, so they stop blocking new ones."""
    now = timezone.now()
    return Job.objects.filter(kind=kind, scope=scope, finished_at__isnull=True, expires_at__lt=now).update(
        state=Job.State.EXPIRED, finished_at=now, error="Not finished in time; presumed lost."
    )


def claim_job(
    *, workspace_id: int, kind: str, scope: str, arguments: Mapping[str, Any], requested_by: Agent | None
) -> Claim:
    """The scope's unfinished job (created=False), or a new queued one (created=True), committed
    before it returns so that concurrent requests see it. Call it outside any transaction."""
    for _ in range(CLAIM_ATTEMPTS):
        expire_lost_jobs(kind=kind, scope=scope)
        try:
            with transaction.atomic():
                job = Job.objects.create(
                    workspace_id=workspace_id,
                    kind=kind,
                    scope=scope,
                    task_id=str(uuid.uuid4()),
                    arguments=dict(arguments),
                    requested_by_agent=requested_by,
                    expires_at=timezone.now() + job_timeout(),
                )
            return Claim(job=job, created=True)
        except IntegrityError:
            pass  # another request holds the scope: join its job
        running = Job.objects.filter(kind=kind, scope=scope, finished_at__isnull=True).first()
        if running is not None:
            return Claim(job=running, created=False)
        # It finished between our INSERT and this read: try again.
    raise RuntimeError(f"Could not claim a {kind} job for {scope} in {CLAIM_ATTEMPTS} attempts.")


def start_job(job_id: int) -> Job | None:
    """Mark the job running and renew its time; None when the work must not run: the job is
    finished (expired, or completed before a redelivery) or another delivery is running it."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        now = timezone.now()
        if job is None or job.is_finished:
            return None
        if job.state == Job.State.RUNNING and job.expires_at > now:
            return None  # delivered twice while the first delivery still works on it
        job.state, job.started_at, job.expires_at = Job.State.RUNNING, now, now + job_timeout()
        job.save(update_fields=["state", "started_at", "expires_at"])
        return job


def finish_job(job_id: int, *, report: Mapping[str, Any] | None = None, error: str = "") -> None:
    """Close the job as done (with its report) or failed (with the error). Idempotent."""
    Job.objects.filter(pk=job_id, finished_at__isnull=True).update(
        state=Job.State.FAILED if error else Job.State.DONE,
        finished_at=timezone.now(),
        report=dict(report) if report is not None else None,
        error=error[:500],
    )


def run_job(job_id: int | None, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `work` as job `job_id` (None: no bookkeeping): started, then done with its report or
    failed with the error (re-raised). A job already finished is not run again: its stored
    report (or {}) is returned."""
    if job_id is None:
        return work()
    job = start_job(job_id)
    if job is None:
        stored = Job.objects.filter(pk=job_id).values_list("report", flat=True).first()
        return dict(stored or {})
    try:
        report = work()
    except BaseException as exc:
        finish_job(job_id, error=f"{type(exc).__name__}: {exc}")
        raise
    finish_job(job_id, report=report)
    return report
