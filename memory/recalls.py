"""Counting recalls, opening their episodes and recording exposures, without slowing recall.

The preamble and search paths hand (episode, fact ids, and for the preamble its policy ids) to a
per-process buffer; a background thread flushes it about once a second in one transaction: one
bulk insert for the dispatch/search episodes, one UPDATE … FROM (VALUES …) for the counters, one
bulk insert for the episode links and one for the exposure trail (issue 21). A crash can lose at
most the last second of episodes, counts and exposures; the facts themselves are never at risk.

An episode's id is reserved on the request path (`EPISODE_ID_SQL`, folded into a query the
request sends anyway: no round trip of its own, no commit to wait for) and answered at once; its
row is written by the next flush (issue 22). A write that names such an episode before the flush
(`POST facts/` right after the preamble) waits for it: `await_episode`.

The exposure trail (memory.models.Exposure) is not the episode links again: a link is a graph
edge (fact ↔ episode, deleted with the fact, no policies, no surface); an exposure is the record
of what was served, to whom, over which surface, in which memory run: ids only, kept after the
fact is erased, pruned after ENGRAM_EXPOSURE_RETENTION_DAYS. The MCP server marks its calls with
`served_over("mcp")`, so the same operations record `mcp_preamble` / `mcp_search`.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memory.models import Episode, EpisodeFact, Exposure, MemoryRun
from memory.routing import recall_write

if TYPE_CHECKING:
    from memory.models import Agent

logger = logging.getLogger("engram.recalls")
FLUSH_SECONDS = 1.0
# A write naming an episode reserved by another process waits at most this long for its flush,
# and only for an id reserved within RECENT_SECONDS (older ones were flushed long ago or lost).
AWAIT_EPISODE_SECONDS = 3 * FLUSH_SECONDS
RECENT_SECONDS = 10 * FLUSH_SECONDS

# The SQL expression that reserves the next episode id: a query of the recall path selects it as
# one of its columns, when that query runs on the primary (a standby refuses nextval; the id is
# then reserved by a query of its own, reserve_episode_id). Recall's own writes run inside
# memory.routing.recall_write(): they never pin the agent to the primary.
EPISODE_ID_SQL = "nextval(pg_get_serial_sequence('memory_episode', 'id'))"


# The channel a call came in on: "" over HTTP, "mcp" inside the MCP server (agents.mcp_server).
_channel: contextvars.ContextVar[str] = contextvars.ContextVar("engram_channel", default="")


@contextmanager
def served_over(channel: str) -> Iterator[None]:
    """Mark what is served inside the block as served over `channel` ("mcp")."""
    token = _channel.set(channel)
    try:
        yield
    finally:
        _channel.reset(token)


def surface_for(kind: str) -> str:
    """The Exposure surface of a `kind` ("preamble", "search") served on the current channel."""
    channel = _channel.get()
    return Exposure.Surface(f"{channel}_{kind}" if channel else kind).value


class Served(NamedTuple):
    """One exposure waiting in the buffer: ids only, the run resolved at flush."""

    workspace_id: int
    agent_id: int
    episode_id: int | None
    surface: str
    fact_id: int | None
    policy_id: int | None
    served_at: datetime


class Opened(NamedTuple):
    """A dispatch or search episode whose id is reserved and whose row the flush writes."""

    id: int
    workspace_id: int
    agent_id: int
    kind: str
    title: str
    at: datetime


class RecallBuffer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._written = threading.Condition(self._lock)  # notified after each flush commits
        self._episodes: list[Opened] = []
        self._unwritten: set[int] = set()  # ids of episodes queued or being written
        self._counts: Counter[int] = Counter()
        self._links: list[tuple[int, int]] = []
        self._served: list[Served] = []
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def add(
        self,
        episode_id: int | None,
        fact_ids: Iterable[int],
        served: Iterable[Served] = (),
        *,
        opened: Opened | None = None,
    ) -> None:
        ids = list(dict.fromkeys(fact_ids))
        exposures = list(served)
        if not ids and not exposures and opened is None:
            return
        sync = settings.ENGRAM_RECALL_MODE == "sync"  # tests: visible at once, inside the caller's transaction
        with self._lock:
            if opened is not None:
                self._episodes.append(opened)
                self._unwritten.add(opened.id)
            self._counts.update(ids)
            if episode_id is not None:
                self._links.extend((episode_id, pk) for pk in ids)
            self._served.extend(exposures)
            if not sync and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._run, name="engram-recalls", daemon=True)
                self._thread.start()
        if sync:
            self.flush()

    def holds(self, episode_id: int) -> bool:
        """Whether the episode is queued here and not written yet."""
        with self._lock:
            return episode_id in self._unwritten

    def await_written(self, episode_id: int, timeout: float) -> bool:
        """Wake the flusher and wait (at most `timeout` s) until the episode queued here is written
        by it (on its own connection: never inside the caller's transaction). False when the
        episode is not queued here, or still unwritten at the timeout."""
        with self._lock:
            if episode_id not in self._unwritten:
                return False
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="engram-recalls", daemon=True)
                self._thread.start()
            self._wake.set()
            return self._written.wait_for(lambda: episode_id not in self._unwritten, timeout)

    def forget(self, fact_ids: Iterable[int]) -> None:
        """Drop pending counts and episode links of erased facts (issue 21); exposures are ids
        only and stay."""
        gone = set(fact_ids)
        with self._lock:
            for pk in gone:
                self._counts.pop(pk, None)
            self._links = [(e, f) for e, f in self._links if f not in gone]

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
            episodes, counts, links, served = self._episodes, self._counts, self._links, self._served
            self._episodes, self._counts, self._links, self._served = [], Counter(), [], []
        if not episodes and not counts and not served:
            return 0
        try:
            with recall_write(), transaction.atomic():
                if episodes:  # first: the links and exposures below point at them
                    Episode.objects.bulk_create(
                        [
                            Episode(
                                pk=e.id,
                                workspace_id=e.workspace_id,
                                agent_id=e.agent_id,
                                kind=e.kind,
                                title=e.title,
                                started_at=e.at,
                                created_at=e.at,
                            )
                            for e in episodes
                        ]
                    )
                if counts:
                    values = ", ".join(["(%s::bigint, %s::integer)"] * len(counts))
                    params: list[Any] = [timezone.now()] + [x for item in sorted(counts.items()) for x in item]
                    with connection.cursor() as cursor:
                        # The rows locked first, in id order, as the write path locks the facts it
                        # compares (memory.services.nearby.live_rows): the UPDATE alone locks them in
                        # whatever order its join reads them, and a proposal locking two of the same
                        # facts the other way round deadlocked with it (a 503 to the agent).
                        cursor.execute(
                            "SELECT 1 FROM memory_fact WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE",
                            [sorted(counts)],
                        )
                        cursor.execute(
                            f"UPDATE memory_fact AS f SET recall_count = f.recall_count + v.n, last_recalled_at = %s "  # noqa: S608 -- only %s placeholders are interpolated; ids and counts are bound params
                            f"FROM (VALUES {values}) AS v(id, n) WHERE f.id = v.id",
                            params,
                        )
                if links:
                    EpisodeFact.objects.bulk_create(
                        [
                            EpisodeFact(episode_id=e, fact_id=f, relation=EpisodeFact.Relation.RECALLED)
                            for e, f in links
                        ],
                        ignore_conflicts=True,
                    )
                if served:
                    _write_exposures(served)
        except Exception:
            with self._lock:  # put them back for the next attempt
                self._episodes[:0] = episodes
                self._counts.update(counts)
                self._links.extend(links)
                self._served.extend(served)
            raise
        if episodes:
            with self._lock:
                self._unwritten.difference_update(e.id for e in episodes)
                self._written.notify_all()
        return len(counts)

    def pending(self) -> bool:
        return bool(self._episodes or self._counts or self._served)


def _runs_at(served: list[Served]) -> dict[tuple[int, datetime], int]:
    """(agent id, served at) → the memory run that agent had running then (the latest opened,
    if several): one query for the whole flush."""
    agent_ids = {s.agent_id for s in served}
    first, last = min(s.served_at for s in served), max(s.served_at for s in served)
    runs = (
        MemoryRun.objects.filter(agent_id__in=agent_ids, created_at__lte=last)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=first))
        .order_by("created_at", "pk")
        .values_list("pk", "agent_id", "created_at", "finished_at")
    )
    moments: dict[int, set[datetime]] = {}
    for s in served:
        moments.setdefault(s.agent_id, set()).add(s.served_at)
    found: dict[tuple[int, datetime], int] = {}
    for pk, agent_id, created_at, finished_at in runs:  # later runs overwrite earlier ones
        for at in moments.get(agent_id, ()):
            if created_at <= at and (finished_at is None or at <= finished_at):
                found[(agent_id, at)] = pk
    return found


def _write_exposures(served: list[Served]) -> None:
    runs = _runs_at(served)
    Exposure.objects.bulk_create(
        [
            Exposure(
                workspace_id=s.workspace_id,
                agent_id=s.agent_id,
                episode_id=s.episode_id,
                surface=s.surface,
                fact_id=s.fact_id,
                policy_id=s.policy_id,
                run_id=runs.get((s.agent_id, s.served_at)),
                served_at=s.served_at,
            )
            for s in served
        ]
    )


buffer = RecallBuffer()
atexit.register(lambda: buffer.flush() if buffer.pending() else None)


def reserve_episode_id() -> int:
    """A new episode id, for a recall path that has no query of its own to fold EPISODE_ID_SQL in."""
    with recall_write(), connection.cursor() as cursor:
        cursor.execute(f"SELECT {EPISODE_ID_SQL}")
        row = cursor.fetchone()
    return int(row[0])


def open_episode(*, agent: Agent, kind: str, title: str, episode_id: int | None = None) -> int:
    """The episode of one dispatch or search, under `episode_id` (reserved with EPISODE_ID_SQL) or
    a new one: its row is written by the buffer's next flush (at once in sync mode). Recall paths
    write no audit event: the episode and its links are the record."""
    if episode_id is None:
        episode_id = reserve_episode_id()
    opened = Opened(episode_id, agent.workspace_id, agent.pk, kind, title[:300], timezone.now())
    buffer.add(None, (), opened=opened)
    return episode_id


def await_episode(episode_id: int) -> bool:
    """Before a write links to `episode_id`: when that episode was reserved by a recall and its
    row is not written yet, wait (at most AWAIT_EPISODE_SECONDS) until it is — at once when this
    process holds it, else until the other process's flush. Only an id reserved within
    RECENT_SECONDS is waited for; any other missing id answers at once. True when it waited."""
    if buffer.holds(episode_id):
        buffer.await_written(episode_id, AWAIT_EPISODE_SECONDS)
        return True
    deadline = time.monotonic() + AWAIT_EPISODE_SECONDS
    waited = False
    while True:
        with connection.cursor() as cursor:
            # Exists? Reserved (not past the sequence)? When was the next written episode opened
            # (ids are reserved in order, so ours was reserved no later)?
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM memory_episode WHERE id = %s),"
                " %s <= coalesce(pg_sequence_last_value(pg_get_serial_sequence('memory_episode', 'id')), 0),"
                " (SELECT created_at FROM memory_episode WHERE id > %s ORDER BY id LIMIT 1)",
                [episode_id, episode_id, episode_id],
            )
            exists, reserved, next_opened = cursor.fetchone()
        recent = next_opened is None or next_opened > timezone.now() - timedelta(seconds=RECENT_SECONDS)
        if exists or not reserved or not recent or time.monotonic() >= deadline:
            return waited
        waited = True
        time.sleep(0.05)


def settle(timeout: float = AWAIT_EPISODE_SECONDS) -> None:
    """Have the flusher write every episode this process holds now (their titles quote tasks and
    queries), e.g. before an erasure scans episode titles; waits at most `timeout` s for each."""
    with buffer._lock:
        pending = sorted(buffer._unwritten)
    for episode_id in pending:
        buffer.await_written(episode_id, timeout)


def record_recall(
    episode_id: int | None,
    fact_ids: Iterable[int],
    *,
    agent: Agent | None = None,
    served_as: str | None = None,
    policy_ids: Iterable[int] = (),
) -> None:
    """Count `fact_ids` as recalled in `episode_id` (opened with open_episode before); with `agent`
    and `served_as` ("preamble", "search"), also record each fact and policy served to the agent
    in the exposure trail."""
    fact_ids = list(dict.fromkeys(fact_ids))
    served: list[Served] = []
    if agent is not None and served_as is not None:
        surface, now = surface_for(served_as), timezone.now()
        base = (agent.workspace_id, agent.pk, episode_id, surface)
        served = [Served(*base, None, pk, now) for pk in dict.fromkeys(policy_ids)]
        served += [Served(*base, pk, None, now) for pk in fact_ids]
    buffer.add(episode_id, fact_ids, served)
