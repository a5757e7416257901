"""The long-poll of `GET reviews/{id}/?wait=N`: it holds a thread, never a database connection,
and never every thread of a web process.

- At most `ENGRAM_MAX_WAITERS` polls wait at once in one process (gunicorn serves with threaded
  workers, see config/gunicorn_conf.py: the other threads stay free for pages, /healthz, writes).
  Beyond it a poll answers at once with the review as it is, plus `Retry-After`
  (`RETRY_AFTER_SECONDS`): the clients wait that long before they ask again.
- A waiting request gives its database connection back before it sleeps; one watcher thread
  per process checks every review waited on in that process with one query per
  `POLL_INTERVAL_SECONDS`, and closes its own connection once nobody waits. So N waiters cost
  at most one connection per process, not N.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import DatabaseError, connection, connections

from review.models import RememberReview, ReviewStatus
from review.selectors import MAX_WAIT_SECONDS, POLL_INTERVAL_SECONDS, review_for_agent

if TYPE_CHECKING:
    from memory.models import Agent

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 2


@dataclass(frozen=True)
class WaitResult:
    review: RememberReview
    # Set when the poll was not allowed to wait (too many waiters in this process): seconds the
    # caller should let pass before polling again.
    retry_after: int | None = None


class _Watcher:
    """Waiters of one process: who waits on which review, and which of those left pending."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._waiting: Counter[int] = Counter()
        self._resolved: set[int] = set()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> int:
        with self._cond:
            return self._active

    def try_enter(self, limit: int) -> bool:
        with self._cond:
            if self._active >= limit:
                return False
            self._active += 1
            return True

    def leave(self) -> None:
        with self._cond:
            self._active -= 1

    def wait(self, review_id: int, timeout: float) -> bool:
        """Sleep until the watcher saw the review leave pending (True) or `timeout` passed."""
        with self._cond:
            self._waiting[review_id] += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="engram-review-watcher", daemon=True)
                self._thread.start()
            try:
                return self._cond.wait_for(lambda: review_id in self._resolved, timeout=timeout)
            finally:
                self._waiting[review_id] -= 1
                if self._waiting[review_id] <= 0:
                    del self._waiting[review_id]
                    self._resolved.discard(review_id)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    ids = [pk for pk in self._waiting if pk not in self._resolved]
                    if not self._waiting:
                        self._thread = None
                        return
                if ids:
                    changed = self._changed(ids)
                    if changed:
                        with self._cond:
                            self._resolved.update(changed)
                            self._cond.notify_all()
                time.sleep(POLL_INTERVAL_SECONDS)
        finally:
            connections.close_all()  # this thread's connection, held only while someone waits

    @staticmethod
    def _changed(ids: list[int]) -> set[int]:
        try:
            return set(
                RememberReview.objects.filter(pk__in=ids)
                .exclude(status=ReviewStatus.PENDING)
                .values_list("pk", flat=True)
            )
        except DatabaseError:
            # The database went away: the waiters time out and answer from their own query
            # (a 503 if it is still down); the next round reconnects.
            logger.warning("review watcher could not poll the database", exc_info=True)
            connections.close_all()
            return set()


_watcher = _Watcher()


def active_waiters() -> int:
    """Polls waiting in this process right now."""
    return _watcher.active


def wait_for_resolution(agent: Agent, review_id: int, *, wait: float) -> WaitResult:
    """The review once it left pending, or after `wait` seconds (at most 30) — or at once with
    a `retry_after` when this process already holds ENGRAM_MAX_WAITERS polls."""
    review = review_for_agent(agent, review_id)
    wait = min(max(wait, 0.0), MAX_WAIT_SECONDS)
    if review.status != ReviewStatus.PENDING or wait <= 0:
        return WaitResult(review)
    if not _watcher.try_enter(settings.ENGRAM_MAX_WAITERS):
        return WaitResult(review, retry_after=RETRY_AFTER_SECONDS)
    try:
        if connection.in_atomic_block:
            # Inside a transaction (tests wrap each one) the watcher's connection cannot see
            # this one's rows: poll here, as the watcher would.
            _poll_inline(review.pk, wait)
        else:
            connection.close()  # not held while sleeping; reopened for the answer below
            _watcher.wait(review.pk, wait)
    finally:
        _watcher.leave()
    return WaitResult(review_for_agent(agent, review_id))


def _poll_inline(review_id: int, wait: float) -> None:
    deadline = time.monotonic() + wait
    while (remaining := deadline - time.monotonic()) > 0:
        time.sleep(min(POLL_INTERVAL_SECONDS, remaining))
        status = RememberReview.objects.filter(pk=review_id).values_list("status", flat=True).first()
        if status != ReviewStatus.PENDING:
            return
