"""Engram's own Prometheus metrics (served at /metrics by config.metrics): what the services count.

Labels are closed sets — outcomes, kinds, modes — never ids, texts or names, so the output holds
no memory content and its size does not grow with the data. A counter moves when its transaction
commits (`transaction.on_commit`): a write undone by a rollback or a refused item's savepoint is
not counted. The review queue's size is a gauge computed at scrape time (review.metrics).

Under several processes (gunicorn workers, Celery) prometheus_client keeps these values in files
of PROMETHEUS_MULTIPROC_DIR, which bin/serve-prod sets; see README "Metrics".
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from prometheus_client import Counter, Histogram

FACT_WRITES = Counter(
    "engram_fact_writes",
    "Fact proposals written, by outcome (created, re_mentioned, conflict_won, conflict_lost, possible_conflict).",
    ["outcome"],
)
EMBEDDING_SECONDS = Histogram(
    "engram_embedding_seconds",
    "Time to embed texts with the local model: `single` for one text, `batch` for several.",
    ["mode"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
# Minutes to weeks: people decide at their own pace.
REVIEW_LATENCY_BUCKETS = (60.0, 300.0, 900.0, 3_600.0, 4 * 3_600.0, 86_400.0, 3 * 86_400.0, 7 * 86_400.0, 30 * 86_400.0)
REVIEW_LATENCY_SECONDS = Histogram(
    "engram_review_latency_seconds",
    "From submission to a person's decision, by kind of review item "
    "(remember, candidate, conflict, possible, challenged).",
    ["kind"],
    buckets=REVIEW_LATENCY_BUCKETS,
)
REVIEW_KINDS = ("remember", "candidate", "conflict", "possible", "challenged")


def count_fact_write(outcome: str, amount: int = 1) -> None:
    """Count `amount` proposals of `outcome` once the current transaction commits."""
    if amount:
        transaction.on_commit(lambda: FACT_WRITES.labels(outcome=outcome).inc(amount))


def observe_review_latency(kind: str, submitted_at: datetime, decided_at: datetime | None = None) -> None:
    """Record how long an item of the review queue waited for a person, once the decision commits."""
    assert kind in REVIEW_KINDS, kind
    seconds = max(((decided_at or timezone.now()) - submitted_at).total_seconds(), 0.0)
    transaction.on_commit(lambda: REVIEW_LATENCY_SECONDS.labels(kind=kind).observe(seconds))


@contextmanager
def embedding_timer(count: int) -> Iterator[None]:
    """Time one successful embedding call of `count` texts (observed at once: inference never runs
    inside a transaction)."""
    start = time.perf_counter()
    yield
    EMBEDDING_SECONDS.labels(mode="single" if count == 1 else "batch").observe(time.perf_counter() - start)
