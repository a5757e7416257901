"""The embedded PostgreSQL (pgserver + pgvector) used when DATABASE_URL is not set.

Every process that loads the settings attaches to one server under $ENGRAM_HOME/pg,
starting it when it is not running. The server outlives the process on purpose: a second
`make run` or any `manage.py` command reuses it within milliseconds.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

# Settings that make pgvector's HNSW build and the 50-agent load test comfortable on a
# small machine; applied once, after initdb, followed by one restart.
_TUNING = {
    "shared_buffers": "'512MB'",
    "maintenance_work_mem": "'1GB'",
    "work_mem": "'16MB'",
    "max_connections": "200",
    "effective_cache_size": "'4GB'",
}
_TUNED_MARKER = ".engram-tuned"


@dataclass(frozen=True)
class EmbeddedDatabase:
    socket_dir: str
    port: int
    pgdata: Path


class _HandleList:
    """pgserver's list of the processes attached to a server (`pg/.handle_pids.json`), made safe.

    pgserver rewrites that file in place when a process attaches and again when it exits, so a
    process killed in between leaves it empty or cut short, and pgserver's own reader then fails
    every later start with a JSON error. Engram never stops the server with its last handle
    (cleanup_mode=None): the list only counts. So an unreadable file reads as no handles, pids of
    processes that are gone are dropped, and the file is written whole (a temporary file renamed
    over it). Same interface as pgserver.utils.DiskList.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def get(self) -> list[int]:
        try:
            values = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            values = []
        if not isinstance(values, list):
            values = []
        return [v for v in values if type(v) is int and v > 0 and _alive(v)]

    def put(self, values: list[int]) -> None:
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(values))
        os.replace(temporary, self.path)

    def get_and_add(self, value: int) -> list[int]:
        old = self.get()
        self.put(old if value in old else [*old, value])
        return old

    def get_and_remove(self, value: int) -> list[int]:
        old = self.get()
        self.put([v for v in old if v != value])
        return old


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _fail(message: str) -> None:
    sys.stderr.write(f"\nEngram could not start its embedded PostgreSQL: {message}\n")
    raise SystemExit(2)


def ensure_embedded_postgres(home: Path, dbname: str) -> EmbeddedDatabase:
    """Start (or attach to) the embedded server and make sure `dbname` exists."""
    home.mkdir(parents=True, exist_ok=True)
    runtime = home / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    runtime.chmod(0o700)
    # pgserver keeps an inter-process lock under the user runtime dir; root has none by default.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
    try:
        import pgserver
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]
    except ImportError:
        _fail(
            "the 'pgserver' package is missing. Run `make run` (it installs everything) "
            "or set DATABASE_URL to a PostgreSQL server with the vector extension."
        )
        raise  # unreachable, for type checkers
    import pgserver.postgres_server

    # Its handle file must not decide whether the database can start (see _HandleList).
    pgserver.postgres_server.DiskList = _HandleList  # type: ignore[misc,assignment]

    pgdata = home / "pg"
    try:
        server = pgserver.get_server(pgdata, cleanup_mode=None)
    except Exception as exc:  # pgserver raises bare subprocess errors; say what to do
        _fail(
            f"{exc}. Its log is {pgdata / 'log'}. The database in {pgdata} is left as it was: keep it. "
            "`make stop` then `make run` restarts the server; if it still fails, the log says why."
        )
        raise
    info = server.get_postmaster_info()
    if not (pgdata / _TUNED_MARKER).exists():
        for name, value in _TUNING.items():
            server.psql(f"ALTER SYSTEM SET {name} = {value};")
        pg_ctl(["-w", "restart"], pgdata=pgdata, user=server.system_user, timeout=60)
        (pgdata / _TUNED_MARKER).write_text("tuned\n")
        server = pgserver.get_server(pgdata, cleanup_mode=None)
        server.ensure_postgres_running()
        info = server.get_postmaster_info()
    assert info.socket_dir is not None
    _ensure_database(str(info.socket_dir), int(info.port or 5432), dbname)
    return EmbeddedDatabase(socket_dir=str(info.socket_dir), port=int(info.port or 5432), pgdata=pgdata)


def _ensure_database(socket_dir: str, port: int, dbname: str) -> None:
    import psycopg

    with psycopg.connect(host=socket_dir, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [dbname]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{dbname}"')


def stop_embedded_postgres(home: Path) -> None:
    """Stop the server (used by fault tests and `make stop`)."""
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

    pgdata = home / "pg"
    if (pgdata / "postmaster.pid").exists():
        pg_ctl(["-w", "stop", "-m", "fast"], pgdata=pgdata, user="pgserver" if os.geteuid() == 0 else None)


if __name__ == "__main__":  # pragma: no cover - convenience for `python -m config.embedded stop`
    if sys.argv[1:] == ["stop"]:
        stop_embedded_postgres(Path(os.environ.get("ENGRAM_HOME", Path(__file__).resolve().parent.parent / ".engram")))
    else:
        print("usage: python -m config.embedded stop")
