"""The review queue's size for Prometheus, computed when /metrics is scraped (config.metrics).

A collector, not a gauge kept up to date: every write path would have to move it, and several
processes would each hold a different value. One label, `kind`; no workspace label, so the series
stay five whatever the number of workspaces and name none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from django.db import DatabaseError
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from review.selectors_queue import KINDS, queue_sizes

logger = logging.getLogger(__name__)


class QueueSizeCollector(Collector):
    """engram_queue_size{kind}: items waiting for a person (review.selectors_queue.queue_sizes)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            sizes = queue_sizes()
        except DatabaseError:
            # The rest of the scrape still answers; the gauge is absent, which alerts can see.
            logger.warning("metrics: the review queue could not be counted", exc_info=True)
            return
        family = GaugeMetricFamily(
            "engram_queue_size", "Items waiting for a person in the review queue, by kind.", labels=["kind"]
        )
        for kind in KINDS:
            family.add_metric([kind], sizes[kind])
        yield family

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Registering must not query the database (prometheus_client calls describe() on register).
        return iter(())
