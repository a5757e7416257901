"""Health of the read replicas: which may serve reads now.

A replica serves reads while it answers and its replay lag is at most
ENGRAM_REPLICA_MAX_LAG_SECONDS. One background thread per process checks every replica each
ENGRAM_REPLICA_CHECK_SECONDS over a connection of its own (connect timeout: the alias's
`connect_timeout`), so no request ever waits for a check. Until its first check a replica is
not used. A request whose replica fails mid-flight marks it down at once (`mark_down`); the next
check brings it back when it answers again.

Lag is measured on the replica. A caught-up replica of an idle primary must not look late, so
the lag is 0 while the WAL receiver runs and everything received has been replayed, and
otherwise the age of the last replayed transaction (a replica that lost its primary, or is
applying a backlog). A server that is not in recovery (a mirror in tests, a promoted replica)
has no lag.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.conf import settings
from django.db import connections

logger = logging.getLogger("engram.replicas")

LAG_SQL = """
SELECT CASE
    WHEN NOT pg_is_in_recovery() THEN 0.0
    WHEN (SELECT pid FROM pg_stat_wal_receiver) IS NOT NULL
         AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0.0
    ELSE EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8
END
"""


@dataclass
class ReplicaState:
    alias: str
    healthy: bool = False
    lag_seconds: float | None = None
    error: str = "not checked yet"
    checked_at: float = 0.0  # time.monotonic()

    def usable(self, bound: float) -> bool:
        return self.healthy and self.lag_seconds is not None and self.lag_seconds <= bound

    def report(self) -> dict[str, Any]:
        return {
            "alias": self.alias,
            "ok": self.usable(max_lag()),
            "lag_seconds": None if self.lag_seconds is None else round(self.lag_seconds, 3),
            "error": self.error or None,
            "checked_seconds_ago": round(time.monotonic() - self.checked_at, 1) if self.checked_at else None,
        }


def configured() -> list[str]:
    """The aliases of DATABASES that are read replicas (settings.ENGRAM_DATABASE_REPLICAS)."""
    return list(getattr(settings, "ENGRAM_DATABASE_REPLICAS", ()))


def max_lag() -> float:
    return float(getattr(settings, "ENGRAM_REPLICA_MAX_LAG_SECONDS", 5))


def measure_lag(conn: psycopg.Connection[Any]) -> float:
    """The replica's replay lag in seconds (see the module docstring); raises on any failure."""
    row = conn.execute(LAG_SQL).fetchone()
    if row is None or row[0] is None:
        raise LookupError("replay lag unknown: nothing replayed yet")
    return max(0.0, float(row[0]))


@dataclass
class ReplicaMonitor:
    """The per-process view of every replica's health, refreshed by one daemon thread."""

    _states: dict[str, ReplicaState] = field(default_factory=dict)
    _conns: dict[str, psycopg.Connection[Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _check_lock: threading.Lock = field(default_factory=threading.Lock)
    _wake: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _pid: int = field(default_factory=os.getpid)

    def healthy(self, aliases: list[str]) -> list[str]:
        """Those of `aliases` that may serve reads now (lag within the bound, last check passed)."""
        self._ensure_thread()
        bound = max_lag()
        with self._lock:
            states = [self._states.get(alias) for alias in aliases]
        return [s.alias for s in states if s is not None and s.usable(bound)]

    def is_healthy(self, alias: str) -> bool:
        return bool(self.healthy([alias]))

    def states(self) -> list[ReplicaState]:
        """Each configured replica's last check (for /healthz)."""
        self._ensure_thread()
        with self._lock:
            return [self._states.get(alias) or ReplicaState(alias) for alias in configured()]

    def mark_down(self, alias: str, reason: str) -> None:
        """Stop reading from `alias` until its next check passes (a request saw it fail)."""
        self._record(ReplicaState(alias, healthy=False, error=reason, checked_at=time.monotonic()))

    def wake(self) -> None:
        """Have the thread check at once (it then waits ENGRAM_REPLICA_CHECK_SECONDS again)."""
        self._wake.set()

    def reset(self) -> None:
        """Forget every replica's state and close the checker's connections (tests; a changed
        ENGRAM_DATABASE_REPLICAS)."""
        with self._check_lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()
            with self._lock:
                self._states.clear()

    def refresh(self) -> None:
        """Check every configured replica now (the thread does this every interval)."""
        with self._check_lock:
            aliases = configured()
            for alias in [alias for alias in self._conns if alias not in aliases]:
                self._conns.pop(alias).close()
            for alias in aliases:
                self._record(self._check(alias))

    def _check(self, alias: str) -> ReplicaState:
        try:
            conn = self._conns.get(alias)
            if conn is None or conn.closed:
                conn = self._conns[alias] = _connect(alias)
            lag = measure_lag(conn)
        except Exception as exc:  # any failure means: do not read from it
            stale = self._conns.pop(alias, None)
            if stale is not None:
                stale.close()
            reason = f"{exc.__class__.__name__}: {exc}".strip()[:300]
            return ReplicaState(alias, healthy=False, error=reason, checked_at=time.monotonic())
        bound = max_lag()
        error = "" if lag <= bound else f"replay lag {lag:.1f} s is over the bound of {bound:g} s"
        return ReplicaState(alias, healthy=True, lag_seconds=lag, error=error, checked_at=time.monotonic())

    def _record(self, state: ReplicaState) -> None:
        bound = max_lag()
        with self._lock:
            before = self._states.get(state.alias)
            self._states[state.alias] = state
        usable, was_usable = state.usable(bound), before is not None and before.usable(bound)
        if usable and not was_usable:
            logger.info(
                "replica %s is serving reads (lag %.2f s)",
                state.alias,
                state.lag_seconds,
                extra={"replica": state.alias, "replica_state": "up", "lag_seconds": state.lag_seconds},
            )
        elif was_usable and not usable:
            logger.warning(
                "replica %s is skipped: %s",
                state.alias,
                state.error,
                extra={"replica": state.alias, "replica_state": "down", "reason": state.error},
            )

    def _ensure_thread(self) -> None:
        if self._pid != os.getpid():  # a forked child: start afresh, its parent's connections are not its own
            with self._lock:
                if self._pid != os.getpid():
                    self._states, self._conns, self._thread, self._pid = {}, {}, None, os.getpid()
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="engram-replicas", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                self.refresh()
            except Exception:  # the checker must outlive any surprise; replicas stay as last seen
                logger.exception("checking the read replicas failed")
            self._wake.wait(float(getattr(settings, "ENGRAM_REPLICA_CHECK_SECONDS", 2)))
            self._wake.clear()


def _connect(alias: str) -> psycopg.Connection[Any]:
    params = connections[alias].get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.setdefault("connect_timeout", 2)
    return psycopg.connect(**params, autocommit=True)


monitor = ReplicaMonitor()
