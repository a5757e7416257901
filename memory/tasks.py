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
