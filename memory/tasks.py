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
