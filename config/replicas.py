"""Read replicas at the edge: which requests read from a replica, read-your-writes pinning, and
a second attempt on the primary when a replica fails mid-request (memory.routing routes the
queries, memory.replicas checks the replicas' health).

- Replica reads: GET and HEAD requests (pages, lists, details) and the recall endpoints, which
  are POSTs that only read (search, preamble). Not the review long-poll (`GET reviews/{id}/?wait=`
  waits for a person's decision: it must see it the moment it is woken).
- Pinning: a request that wrote (any write but a recall's own records) pins its caller to the
  primary for ENGRAM_REPLICA_PIN_SECONDS — an agent by its key, in the cache (Redis in
  production, shared by every web process); a person (or anyone without a key) by a signed
  cookie. A pinned caller's reads all go to the primary, so it always reads its own writes.
- Failover: when a replica failed during a request that read from it, the replica is marked down
  and the request runs once more, on the primary only: its caller sees an answer, not an error.
  A recall queues its dispatch episode only once it has its answer: a retry leaves at most an unused id.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connections
from django.http import HttpRequest, HttpResponse
from prometheus_client import Counter

from memory.replicas import configured, monitor
from memory.routing import RequestRouting, current, request_routing

logger = logging.getLogger("engram.replicas")

# Recall endpoints: POSTs that only read. Their writes (dispatch episode, recall counters,
# exposures) record the recall and never pin the agent.
RECALL_VIEWS = frozenset({"api-search", "api-preamble"})
# GETs that must read the primary: the review long-poll is woken by a decision written there.
PRIMARY_VIEWS = frozenset({"api-review"})
PIN_COOKIE = "engram_primary"

REPLICA_READS = Counter(
    "engram_replica_reads",
    "Requests that could read from a replica, by who served them: `replica`, or the primary "
    "because the caller was `pinned`, because `no_replica` was healthy, or `after_error` (a "
    "replica failed mid-request and the request ran again on the primary).",
    ["served_by"],
)


def _agent_key_digest(request: HttpRequest) -> str | None:
    scheme, _, key = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return hashlib.sha256(key.strip().encode()).hexdigest()[:40]


def _pin_cache_key(digest: str) -> str:
    return f"engram:replica-pin:{digest}"


def is_pinned(request: HttpRequest) -> bool:
    """Whether the caller wrote within ENGRAM_REPLICA_PIN_SECONDS (its reads go to the primary)."""
    seconds = settings.ENGRAM_REPLICA_PIN_SECONDS
    if seconds <= 0:
        return False
    digest = _agent_key_digest(request)
    if digest is not None:
        try:
            return cache.get(_pin_cache_key(digest)) is not None
        except Exception:  # the cache is down: the primary is always right
            logger.warning("replica pin lookup failed; reading from the primary", exc_info=True)
            return True
    return request.get_signed_cookie(PIN_COOKIE, default=None, salt=PIN_COOKIE, max_age=seconds) is not None


def pin(request: HttpRequest, response: HttpResponse) -> None:
    """Send the caller's reads to the primary for the next ENGRAM_REPLICA_PIN_SECONDS."""
    seconds = settings.ENGRAM_REPLICA_PIN_SECONDS
    if seconds <= 0:
        return
    digest = _agent_key_digest(request)
    if digest is not None:
        try:
            cache.set(_pin_cache_key(digest), 1, timeout=seconds)
        except Exception:
            logger.warning("replica pin could not be stored; the agent may read from a replica", exc_info=True)
        return
    response.set_signed_cookie(
        PIN_COOKIE,
        "1",
        salt=PIN_COOKIE,
        max_age=seconds,
        httponly=True,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )


def _failed_replicas(state: RequestRouting) -> list[str]:
    return [alias for alias in sorted(state.used) if connections[alias].errors_occurred]


def _forget_connection(alias: str) -> bool:
    """Close this thread's connection to `alias`; True when it had been lost (not a query error)."""
    connection = connections[alias]
    raw = connection.connection
    lost = raw is None or bool(getattr(raw, "broken", False)) or bool(getattr(raw, "closed", False))
    try:
        connection.close()
    except Exception:  # closing a dead connection may fail; it is gone either way
        connection.connection = None
    return lost


class ReplicaMiddleware:
    """Route each request's reads (see the module docstring). Inert without replicas."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not configured():
            return self.get_response(request)
        state = RequestRouting()
        with request_routing(state):
            response = self.get_response(request)
        failed = _failed_replicas(state)
        if failed:
            for alias in failed:
                if _forget_connection(alias):
                    monitor.mark_down(alias, "connection lost during a request")
            logger.warning(
                "replica %s failed during %s %s; answering from the primary",
                ", ".join(failed),
                request.method,
                request.path,
                extra={"replica": failed[0], "replica_state": "failed"},
            )
            again = RequestRouting(primary_only=True, recall=state.recall)
            with request_routing(again):
                response = self.get_response(request)
            state.wrote = state.wrote or again.wrote
            REPLICA_READS.labels("after_error").inc()
        elif state.replica_reads or state.pinned:
            REPLICA_READS.labels("replica" if state.used else "pinned" if state.pinned else "no_replica").inc()
        if state.wrote:
            pin(request, response)
        return response

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        state = current()
        if state is None or state.primary_only:
            return
        name = request.resolver_match.view_name if request.resolver_match else ""
        recall = request.method == "POST" and name in RECALL_VIEWS
        if not (recall or (request.method in ("GET", "HEAD") and name not in PRIMARY_VIEWS)):
            return
        state.recall = recall
        if is_pinned(request):
            state.pinned = True
            return
        if recall:
            request.body  # noqa: B018 -- read now and kept, so a second attempt can parse it again
        state.replica_reads = True
