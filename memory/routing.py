"""Where each query goes when read replicas are configured (settings.ENGRAM_DATABASE_REPLICAS).

Every write goes to the primary (`default`). A read goes to a healthy replica (memory.replicas)
only inside a request that opted in — config.replicas.ReplicaMiddleware opts in GET pages and
lists and the recall endpoints (search, preamble) — and only while:

- the request has not written: a write pins the rest of the request to the primary;
- the caller is not pinned: whoever wrote within ENGRAM_REPLICA_PIN_SECONDS reads its own writes
  from the primary (the middleware decides that before the view runs);
- no transaction is open on the primary: a read inside a write transaction (a row lock, a
  re-check) must see the primary;
- some replica is healthy: else the primary serves it.

Everything else — Celery tasks, management commands, the MCP server, write requests, background
threads — reads from the primary. Raw SQL on `django.db.connection` always runs on the primary;
a raw read that should follow the router takes `read_connection(Model)`. With no replicas
configured the router answers nothing and Django behaves as if it were absent.

A recall records what it served (a dispatch episode, counters, exposures) and an agent's key
notes its last use: writes that go to the primary like any other but must not pin the caller,
or every preamble would pin. They run inside `recall_write()` (the recall endpoints' requests
are marked as a whole by the middleware).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from memory.replicas import configured, monitor


@dataclass
class RequestRouting:
    """One request's routing: set up by the middleware, updated by the router."""

    replica_reads: bool = False  # the request opted in to replica reads
    primary_only: bool = False  # a second attempt, after a replica failed: it may not opt in
    recall: bool = False  # a recall endpoint: its writes record the recall and never pin
    pinned: bool = False  # its caller wrote recently: every read on the primary
    wrote: bool = False  # a pinning write happened: the rest of the request reads the primary
    replica: str | None = None  # the replica serving this request, chosen at its first read
    used: set[str] = field(default_factory=set)


_request: ContextVar[RequestRouting | None] = ContextVar("engram_request_routing", default=None)
_recall_write: ContextVar[bool] = ContextVar("engram_recall_write", default=False)


@contextmanager
def request_routing(state: RequestRouting) -> Iterator[RequestRouting]:
    """Route the queries of the block (one request) by `state`."""
    token = _request.set(state)
    try:
        yield state
    finally:
        _request.reset(token)


def current() -> RequestRouting | None:
    return _request.get()


@contextmanager
def recall_write() -> Iterator[None]:
    """Writes in the block record a read (episode, counters, exposures, a key's last use): they
    go to the primary and do not pin the caller to it."""
    token = _recall_write.set(True)
    try:
        yield
    finally:
        _recall_write.reset(token)


def read_connection(model: type[Any]) -> BaseDatabaseWrapper:
    """The connection for a raw read query about `model`: the replica serving this request's
    reads, else the primary. Raw SQL on `django.db.connection` always runs on the primary."""
    return connections[router.db_for_read(model)]


class ReplicaRouter:
    """settings.DATABASE_ROUTERS: replicas for opted-in reads, the primary for everything else."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        aliases = configured()
        if not aliases:
            return None
        state = _request.get()
        if state is None or not state.replica_reads or state.pinned or state.wrote:
            return DEFAULT_DB_ALIAS
        if connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return DEFAULT_DB_ALIAS
        # One replica per request, so its reads see one point in time; another only if it fails.
        if state.replica is None or not monitor.is_healthy(state.replica):
            healthy = monitor.healthy(aliases)
            state.replica = random.choice(healthy) if healthy else None
        if state.replica is None:
            return DEFAULT_DB_ALIAS
        state.used.add(state.replica)
        return state.replica

    def db_for_write(self, model: type[Any], **hints: Any) -> str | None:
        if not configured():
            return None
        state = _request.get()
        if state is not None and not state.recall and not _recall_write.get():
            state.wrote = True
        # Explicit: Django would otherwise write an instance back where it was read from.
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        aliases = configured()
        if aliases and {obj1._state.db, obj2._state.db} <= {DEFAULT_DB_ALIAS, *aliases}:
            return True  # the same database, whichever copy an object was read from
        return None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db in configured() else None
