"""gunicorn's configuration for the production shape: bin/serve-prod runs
`gunicorn -c config/gunicorn_conf.py config.wsgi`, and the tests start the same.

Threaded workers (gthread): a long-poll (`GET reviews/{id}/?wait=N`) holds one thread of a
worker, not the whole process, and a worker lets at most ENGRAM_MAX_WAITERS of its threads wait
(default half of them; review/waiting.py), so pages, /healthz and writes always find a free
thread. Each thread keeps at most one database connection: workers × threads per machine.

A gthread worker's thread reads the request it is handed, so a client that sends its headers or
body slowly holds one: bin/serve-prod puts nginx in front (config/nginx.conf.template), which reads
every request whole first, and binds gunicorn to a unix socket only nginx may open
(`--bind unix:…`, which overrides `bind` below).

Environment: PORT (8000; bound on 127.0.0.1 when gunicorn is started alone),
WEB_CONCURRENCY (workers, default 2 × cores), WEB_THREADS (threads per worker, default 8),
ENGRAM_MAX_WAITERS (default WEB_THREADS / 2).
"""

from __future__ import annotations

import os


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"{name}={raw!r} must be a whole number of at least 1.")
    return int(raw)


bind = f"127.0.0.1:{_int('PORT', 8000)}"
workers = _int("WEB_CONCURRENCY", 2 * len(os.sched_getaffinity(0)))
worker_class = "gthread"
threads = _int("WEB_THREADS", 8)
timeout = 60
graceful_timeout = 30
# Read by the settings in every worker (they are forked from this process).
os.environ.setdefault("ENGRAM_MAX_WAITERS", str(threads // 2))
# gunicornc's control socket is not used, and its default path would be shared by every server
# started from the same runtime directory.
control_socket_disable = True
accesslog = "-"
access_log_format = '{"ts":"%(t)s","method":"%(m)s","path":"%(U)s","status":%(s)s,"ms":%(M)s}'


def child_exit(server: object, worker: object) -> None:
    """A worker's files in PROMETHEUS_MULTIPROC_DIR (bin/serve-prod) stop counting as live."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]
