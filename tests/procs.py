"""Real processes for tests: a Redis server and Celery workers bound to the test database."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate, *, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Redis:
    def __init__(self, tmp: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed: `apt-get install redis-server` (.ci/run does this).")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(tmp),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self._ping, timeout=10, what="redis to answer PING")

    def _ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class CeleryWorker:
    """`celery worker` in its own process group, on the pytest test database."""

    def __init__(self, broker_url: str, db_name: str, log: Path) -> None:
        env = {
            **os.environ,
            "CELERY_BROKER_URL": broker_url,
            "ENGRAM_DB_NAME": db_name,
            "DJANGO_SETTINGS_MODULE": "config.settings",
        }
        self.log = log
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--concurrency",
                "1",
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(lambda: b"ready." in log.read_bytes() or self.proc.poll() is not None, timeout=60, what="the worker")
        if self.proc.poll() is not None:
            raise AssertionError(f"celery worker exited: {log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and its pool children): a crash, not a shutdown."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def send_task(broker_url: str, name: str, *args: object) -> None:
    """Publish a task on a real broker through a Celery app of its own (the project's app stays
    in inline mode for every other test)."""
    from celery import Celery

    sender = Celery("engram-test-sender", broker=broker_url)
    try:
        sender.send_task(name, args=list(args))
    finally:
        sender.close()
