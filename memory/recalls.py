"""Counting recalls without slowing recall.

The preamble and search paths hand (episode, fact ids) to a per-process buffer; a background
thread flushes it about once a second in one transaction: one UPDATE … FROM (VALUES …) for the
counters and one bulk insert for the episode links. A crash can lose at most the last second
of counts; the facts themselves are never at risk.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from memory.models import Episode, EpisodeFact

if TYPE_CHECKING:
    from memory.models import Agent

logger = logging.getLogger("engram.recalls")
FLUSH_SECONDS = 1.0


class RecallBuffer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[int] = Counter()
        self._links: list[tuple[int, int]] = []
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def add(self, episode_id: int | None, fact_ids: Iterable[int]) -> None:
        ids = list(dict.fromkeys(fact_ids))
        if not ids:
            return
        if settings.ENGRAM_RECALL_MODE == "sync":  # tests: visible at once, inside the caller's transaction
            with self._lock:
                self._counts.update(ids)
                if episode_id is not None:
                    self._links.extend((episode_id, pk) for pk in ids)
            self.flush()
            return
        with self._lock:
            self._counts.update(ids)
            if episode_id is not None:
                self._links.extend((episode_id, pk) for pk in ids)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="engram-recalls", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait(FLUSH_SECONDS)
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # a failed flush must not kill the flusher; counts are retried
                logger.exception("flushing recall counters failed; will retry")
            finally:
                connection.close()

    def flush(self) -> int:
        """Write what is pending now; returns the number of facts whose counter moved."""
        with self._lock:
            counts, links = self._counts, self._links
            self._counts, self._links = Counter(), []
        if not counts:
            return 0
        try:
            with transaction.atomic():
                values = ", ".join(["(%s::bigint, %s::integer)"] * len(counts))
                params: list[Any] = [timezone.now()] + [x for item in sorted(counts.items()) for x in item]
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"UPDATE memory_fact AS f SET recall_count = f.recall_count + v.n, last_recalled_at = %s "  # noqa: S608 -- only %s placeholders are interpolated; ids and counts are bound params
                        f"FROM (VALUES {values}) AS v(id, n) WHERE f.id = v.id",
                        params,
                    )
                EpisodeFact.objects.bulk_create(
                    [EpisodeFact(episode_id=e, fact_id=f, relation=EpisodeFact.Relation.RECALLED) for e, f in links],
                    ignore_conflicts=True,
                )
        except Exception:
            with self._lock:  # put them back for the next attempt
                self._counts.update(counts)
                self._links.extend(links)
            raise
        return len(counts)


buffer = RecallBuffer()
atexit.register(lambda: buffer.flush() if buffer._counts else None)


def open_episode(*, agent: Agent, kind: str, title: str) -> int:
    """The episode of one dispatch or search. Recall paths write no audit event: the episode
    and its links are the record."""
    return Episode.objects.create(workspace_id=agent.workspace_id, agent=agent, kind=kind, title=title[:300]).pk


def record_recall(episode_id: int | None, fact_ids: Iterable[int]) -> None:
    buffer.add(episode_id, fact_ids)
