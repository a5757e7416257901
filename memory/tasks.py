"""Celery tasks: take primary keys, re-fetch, call one service, idempotent."""

from __future__ import annotations

from celery import shared_task

from memory.services import embedding as embedding_services


@shared_task(bind=True, acks_late=True, max_retries=5, default_retry_delay=5)
def embed_fact(self, fact_id: int) -> bool:  # type: ignore[no-untyped-def]
    """Embed one fact if it still lacks a vector. Safe to run twice."""
    return embedding_services.embed_fact(fact_id=fact_id)


@shared_task(acks_late=True)
def embed_missing(limit: int = 10_000) -> int:
    """Backfill vectors for facts written while no worker was running."""
    return embedding_services.embed_missing(limit=limit)


@shared_task(acks_late=True)
def consolidate_memory(agent_id: int, session_id: str | None = None) -> dict[str, int]:
    """Consolidate an agent's hot-tier entries; returns the report."""
    from dataclasses import asdict

    from agents.models import Agent
    from memory.services.hot import consolidate

    return asdict(consolidate(agent=Agent.objects.get(pk=agent_id), session_id=session_id))


@shared_task(acks_late=True)
def harmonize_memory(agent_id: int, domain_id: int | None = None) -> dict[str, int]:
    """Harmonise diverging facts visible to an agent; returns the report."""
    from dataclasses import asdict

    from agents.models import Agent
    from memory.models import MemoryDomain
    from memory.services.hot import harmonize

    domain = MemoryDomain.objects.get(pk=domain_id) if domain_id else None
    return asdict(harmonize(agent=Agent.objects.get(pk=agent_id), domain=domain))


@shared_task(acks_late=True)
def detect_stale_facts() -> dict[str, int]:
    """Daily (beat): challenge active facts not validated within their memory type's window.
    Idempotent: a second run finds nothing new to challenge."""
    from memory.services.lifecycle import detect_stale

    return detect_stale()
