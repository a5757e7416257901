"""A real streaming read replica of the embedded PostgreSQL, for benchmarks and tests.

`pg_basebackup -R -X stream` copies the running cluster into a temporary directory, then the copy
starts as a hot standby on a socket directory of its own (no TCP), streaming from the primary:

    with start_standby() as standby:            # the primary of DATABASES["default"]
        os.environ["DATABASE_REPLICA_URLS"] = standby.url("engram_bench")
        ...                                     # or DATABASES[alias] = standby.database(name)

From a shell (the directory is printed; stop removes it):

    .venv/bin/python -m bench.replica start [DBNAME]   # prints DATABASE_REPLICA_URLS=...
    .venv/bin/python -m bench.replica stop DIR

The embedded server runs as the user `pgserver` when Engram runs as root (PostgreSQL refuses
root), so the standby's files belong to that user and its commands run through `su`.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

SERVER_USER = "pgserver"


def _bin(name: str) -> str:
    import pgserver

    return str(Path(pgserver.__file__).parent / "pginstall" / "bin" / name)


def _as_server_user(argv: list[str]) -> list[str]:
    """Run as the embedded server's user when we are root (pg_ctl and postgres refuse root)."""
    if os.geteuid() != 0:
        return argv
    return ["su", SERVER_USER, "-s", "/bin/sh", "-c", shlex.join(argv)]


def _run(argv: list[str], *, timeout: float) -> None:
    done = subprocess.run(_as_server_user(argv), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(
            f"{Path(argv[0]).name} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}"
        )


@dataclass
class Standby:
    """A hot standby in `root` (data in root/pgdata, socket in root/run), streaming from the primary."""

    root: Path
    port: int
    primary_host: str
    primary_port: int
    shared_buffers: str = "64MB"
    # A throwaway copy: without fsync it starts in 0.1 s instead of syncing every file first.
    durable: bool = False

    @property
    def pgdata(self) -> Path:
        return self.root / "pgdata"

    @property
    def socket_dir(self) -> str:
        return str(self.root / "run")

    @property
    def running(self) -> bool:
        return (self.pgdata / "postmaster.pid").exists()

    def database(self, name: str, **overrides: Any) -> dict[str, Any]:
        """A Django DATABASES entry reading `name` on the standby."""
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": "postgres",
            "PASSWORD": "",
            "HOST": self.socket_dir,
            "PORT": str(self.port),
            "OPTIONS": {"connect_timeout": 2},
            **overrides,
        }

    def url(self, name: str) -> str:
        """`postgres://…` for DATABASE_REPLICA_URLS (the socket directory as an encoded host)."""
        return f"postgres://postgres@{quote(self.socket_dir, safe='')}:{self.port}/{quote(name)}"

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=self.socket_dir, port=self.port, user="postgres", dbname=dbname, autocommit=True, connect_timeout=2
        )

    def start(self, *, timeout: float = 60) -> None:
        """Start (or restart after a stop, crash recovery included) and wait until it accepts reads."""
        options = " ".join(
            [
                f"-c port={self.port}",
                f"-c unix_socket_directories='{self.socket_dir}'",
                "-c listen_addresses=''",
                f"-c shared_buffers={self.shared_buffers}",
                "-c hot_standby=on",
                f"-c fsync={'on' if self.durable else 'off'}",
                # Report replay positions to the primary often: its pg_stat_replication stays current.
                "-c wal_receiver_status_interval=1s",
            ]
        )
        log = self.root / "standby.log"
        _run(
            [
                _bin("pg_ctl"),
                "-D",
                str(self.pgdata),
                "-l",
                str(log),
                "-o",
                options,
                "-w",
                "-t",
                str(int(timeout)),
                "start",
            ],
            timeout=timeout + 10,
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop it: `fast` (clean) or `immediate` (as a crash would, clients cut off mid-query)."""
        if self.running:
            _run([_bin("pg_ctl"), "-D", str(self.pgdata), "-m", mode, "-w", "-t", "30", "stop"], timeout=40)

    def remove(self) -> None:
        """Stop at once and delete every file of the standby."""
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def replay_lsn(self) -> str:
        with self.connect() as conn:
            row = conn.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()
        return str(row[0]) if row else ""

    def wait_caught_up(self, *, timeout: float = 15) -> None:
        """Wait until everything committed on the primary so far has been replayed here."""
        with _primary(self.primary_host, self.primary_port) as primary:
            row = primary.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        target = str(row[0]) if row else "0/0"
        deadline = time.monotonic() + timeout
        with self.connect() as conn:
            while True:
                done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]).fetchone()
                if done and done[0]:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the standby did not replay up to {target} within {timeout} s")
                time.sleep(0.02)

    def pause_replay(self) -> None:
        """Keep receiving WAL but stop applying it: the standby falls behind on purpose."""
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    def __enter__(self) -> Standby:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _primary(host: str, port: int) -> psycopg.Connection[Any]:
    return psycopg.connect(host=host, port=port, user="postgres", dbname="postgres", autocommit=True, connect_timeout=5)


def primary_of_settings() -> tuple[str, int]:
    """The socket directory (or host) and port of Django's default database: the embedded server."""
    from django.conf import settings

    default = settings.DATABASES["default"]
    return str(default["HOST"]), int(default.get("PORT") or 5432)


def start_standby(
    primary_host: str | None = None,
    primary_port: int | None = None,
    *,
    port: int | None = None,
    shared_buffers: str = "64MB",
    durable: bool = False,
    timeout: float = 120,
) -> Standby:
    """Copy the running primary (default: Django's `default` database server) with pg_basebackup
    and start the copy as a streaming hot standby; returns once it accepts reads. The caller
    removes it (`remove()`, or use it as a context manager). Raises RuntimeError when a step fails."""
    if primary_host is None or primary_port is None:
        primary_host, primary_port = primary_of_settings()
    root = Path(tempfile.mkdtemp(prefix="engram-standby-"))
    (root / "run").mkdir()
    if os.geteuid() == 0:
        server = pwd.getpwnam(SERVER_USER)
        for path in (root, root / "run"):
            os.chown(path, server.pw_uid, server.pw_gid)
    standby = Standby(
        root=root,
        port=port or primary_port + 1,
        primary_host=primary_host,
        primary_port=primary_port,
        shared_buffers=shared_buffers,
        durable=durable,
    )
    try:
        # -c fast: checkpoint at once rather than spread over minutes; -R: standby.signal and
        # primary_conninfo (the primary's socket) written into the copy; -N: the throwaway copy
        # is not synced to disk (durable=True syncs it).
        _run(
            [
                _bin("pg_basebackup"),
                "-h",
                primary_host,
                "-p",
                str(primary_port),
                "-U",
                "postgres",
                "-D",
                str(standby.pgdata),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                *([] if durable else ["-N"]),
            ],
            timeout=timeout,
        )
        standby.start(timeout=timeout)
    except BaseException:
        standby.remove()
        raise
    return standby


def _main(argv: list[str]) -> int:
    if argv[:1] == ["start"] and len(argv) <= 2:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        from django.conf import settings

        standby = start_standby()
        name = argv[1] if len(argv) == 2 else settings.DATABASES["default"]["NAME"]
        print(f"standby in {standby.root}")
        print(f"DATABASE_REPLICA_URLS={standby.url(name)}")
        return 0
    if argv[:1] == ["stop"] and len(argv) == 2:
        root = Path(argv[1])
        if not (root / "pgdata").exists():
            print(f"{root} holds no standby", file=sys.stderr)
            return 1
        Standby(root=root, port=0, primary_host="", primary_port=0).remove()
        return 0
    print("usage: python -m bench.replica start [DBNAME] | stop DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
