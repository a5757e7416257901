"""Celery tasks: take primary keys, re-fetch, call one service, idempotent."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from memory.services import embedding as embedding_services


@shared_task(acks_late=True)
def embed_fact(fact_id: int) -> bool:
    """Embed one fact if it still lacks a vector. Safe to run twice. Not retried: a fact left
    without a vector is backfilled by embed_missing (or `manage.py reindex_embeddings`)."""
    return embedding_services.embed_fact(fact_id=fact_id)


@shared_task(acks_late=True)
def embed_missing(limit: int = 10_000) -> int:
    """Backfill vectors for facts written while no worker was running."""
    return embedding_services.embed_missing(limit=limit)


@shared_task(acks_late=True)
def consolidate_memory(agent_id: int, session_id: str | None = None, job_id: int | None = None) -> dict[str, Any]:
    """Consolidate an agent's hot-tier entries; returns the report (counts, and `refused`)."""
    from dataclasses import asdict

    from memory.models import Agent
    from memory.services.hot import consolidate
    from memory.services.jobs import run_job

    # With `job_id` it runs as that job (memory.services.jobs): skipped if finished or being run.
    return run_job(job_id, lambda: asdict(consolidate(agent=Agent.objects.get(pk=agent_id), session_id=session_id)))


@shared_task(acks_late=True)
def harmonize_memory(agent_id: int, domain_id: int | None = None, job_id: int | None = None) -> dict[str, Any]:
    """Harmonise diverging facts visible to an agent; returns the report."""
    from dataclasses import asdict

    from memory.models import Agent, MemoryDomain
    from memory.services.hot import harmonize
    from memory.services.jobs import run_job

    def work() -> dict[str, Any]:
        domain = MemoryDomain.objects.get(pk=domain_id) if domain_id else None
        return asdict(harmonize(agent=Agent.objects.get(pk=agent_id), domain=domain))

    return run_job(job_id, work)  # as consolidate_memory


@shared_task(acks_late=True)
def detect_stale_facts() -> dict[str, int]:
    """Daily (beat, or memory.scheduler in the embedded mode): challenge active lifecycle-managed
    facts not validated or mentioned within their memory type's window. Idempotent: a second run
    finds nothing new to challenge."""
    from memory.services.lifecycle import detect_stale

    return detect_stale()


@shared_task(acks_late=True)
def prune_exposures() -> dict[str, int]:
    """Daily: delete exposure-trail rows older than ENGRAM_EXPOSURE_RETENTION_DAYS (0 keeps them).
    Idempotent: a second run finds nothing left to delete."""
    from memory.services.exposure import prune_exposures as prune

    return {"deleted": prune()}


@shared_task(acks_late=True)
def close_abandoned_runs() -> dict[str, int]:
    """Daily: close memory-agent runs with no activity for ENGRAM_RUN_ABANDON_HOURS (0: never) as
    abandoned. Idempotent: a second run finds nothing left to close."""
    from memory.services.runs import close_abandoned_runs as close

    return close()


@shared_task(bind=True, acks_late=True)
def deliver_webhook(self: Any, delivery_id: int) -> str:
    """One attempt at a webhook delivery (memory.services.webhooks). A failed attempt with
    attempts left is queued again with its backoff as countdown — with a broker only: inline
    (eager) it is just recorded as due, and the sweep sends it, so no request waits on it."""
    from django.conf import settings

    from memory.services.webhooks import attempt_delivery

    result = attempt_delivery(delivery_id=delivery_id)
    eager = bool(self.app.conf.task_always_eager)
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    # Past the broker's visibility timeout an ETA task would be redelivered early: leave those to the sweep.
    if result.state == "retry" and result.retry_in is not None and not eager and result.retry_in < visibility:
        deliver_webhook.apply_async((delivery_id,), countdown=result.retry_in)
    return result.state


@shared_task(bind=True, acks_late=True)
def deliver_due_webhooks(self: Any) -> int:
    """The sweep (every minute under beat; each tick of the embedded scheduler): queue an attempt
    for each pending delivery that is due — retries recorded in the inline mode, and deliveries
    whose task was lost (broker down at commit, crashed worker). With a broker only the overdue
    ones (a minute past due) are queued, so a queued retry is not doubled; a double is harmless
    anyway (the attempt claims its row)."""
    from datetime import timedelta

    from django.utils import timezone

    from memory.services.webhooks import due

    grace = 0 if self.app.conf.task_always_eager else 60
    ids = due(timezone.now() - timedelta(seconds=grace))
    for pk in ids:
        deliver_webhook.delay(pk)
    return len(ids)


@shared_task(acks_late=True)
def compact_after_erasure(tables: list[str], event_id: int | None = None, xid: int | None = None) -> dict[str, Any]:
    """Rewrite the tables an erasure touched and request a checkpoint (memory.services.erasure.compact)."""
    from memory.services.erasure import compact

    return compact(tables, event_id=event_id, xid=xid)
