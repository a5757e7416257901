"""Availability on real processes: long-polls that do not starve the web workers, no connection
leak under `make run`'s server, an embedded PostgreSQL that starts whatever pgserver's handle file
says. Each test starts the real server (gunicorn as bin/serve-prod configures it, or runserver)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client

from memory.actors import Actor
from review.models import RememberReview
from review.services import approve_review, submit_review
from tests.procs import ROOT, free_port, wait_for
from tests.review.samples import FILES, OUTPUT

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("reviewer_is_workspace_admin")]

WAITERS = 16


def _call(
    url: str, *, key: str | None = None, body: dict | None = None, headers: dict | None = None, timeout: float = 60
) -> tuple[int, dict, dict]:
    """(status, JSON body — or {"html": text} —, headers); never raises for an HTTP status."""
    request = urllib.request.Request(  # noqa: S310 — loopback URLs built by the test
        url, data=json.dumps(body).encode() if body is not None else None, method="POST" if body is not None else "GET"
    )
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            raw = response.read()
            kind = response.headers.get("Content-Type", "")
            payload = json.loads(raw) if "json" in kind and raw else {"html": raw.decode()}
            return response.status, payload, dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, {}, dict(exc.headers)
    except OSError:
        return 0, {}, {}


def _connections(db_name: str) -> int:
    """Server connections to `db_name`, this test's own left out."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [db_name]
        )
        return int(cursor.fetchone()[0])


def _server_env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "ENGRAM_DB_NAME": connection.settings_dict["NAME"],
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "HF_HUB_OFFLINE": "1",
        **extra,
    }
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "ENGRAM_MAX_WAITERS", "WEB_THREADS", "ENGRAM_CONN_MAX_AGE"):
        env.pop(name, None)
    return env


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, 15)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait(timeout=10)


# --- long-polls do not hold the workers ----------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_sixteen_long_polls_leave_healthz_and_pages_fast_under_the_production_server(world, tmp_path, settings):
    reviews = [
        submit_review(agent=world.coder, session_id=f"turn-{i}", output=OUTPUT, files=FILES, repo="web")
        for i in range(WAITERS)
    ]
    settings.SECRET_KEY = secrets.token_urlsafe(64)  # the server's: it signs the reviewer's session
    browser = Client()
    browser.force_login(world.reviewer)
    cookie = {"Cookie": f"sessionid={browser.cookies['sessionid'].value}"}
    port = free_port()
    log = tmp_path / "gunicorn.log"
    env = _server_env(
        DEBUG="0",
        SECRET_KEY=settings.SECRET_KEY,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="0",
        WEB_CONCURRENCY="4",  # serve-prod's default on this project's 2-core machine
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "config/gunicorn_conf.py",
            "--bind",
            f"127.0.0.1:{port}",
            "config.wsgi",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    key = world.coder.plain_key
    lock = threading.Lock()
    in_flight = [0]
    answers: list[tuple[int, float, str, str | None]] = []  # status, seconds, review status, Retry-After
    final: dict[int, str] = {}
    returned_at: dict[int, float] = {}
    approved_at: dict[int, float] = {}
    stop = threading.Event()

    def waiter(review_id: int) -> None:
        while not stop.is_set():
            with lock:
                in_flight[0] += 1
            started = time.monotonic()
            status, body, headers = _call(f"{base}/api/v1/reviews/{review_id}/?wait=20", key=key, timeout=40)
            elapsed = time.monotonic() - started
            with lock:
                in_flight[0] -= 1
                answers.append((status, elapsed, body.get("status", ""), headers.get("Retry-After")))
            if status != 200 or body["status"] != "pending":
                final[review_id] = body.get("status", str(status))
                returned_at[review_id] = time.monotonic()
                return
            if headers.get("Retry-After"):
                time.sleep(float(headers["Retry-After"]))

    threads = [threading.Thread(target=waiter, args=(r.pk,)) for r in reviews]
    healthz: list[float] = []
    pages: list[float] = []
    held: list[int] = []
    open_connections: list[int] = []
    try:
        wait_for(lambda: _call(f"{base}/healthz", timeout=5)[0] == 200, timeout=120, what="gunicorn")
        # Every worker renders the page once first (templates load on first use).
        warm = [threading.Thread(target=_call, args=(f"{base}/",), kwargs={"headers": cookie}) for _ in range(12)]
        for thread in warm:
            thread.start()
        for thread in warm:
            thread.join()
        for thread in threads:
            thread.start()
        # On a busy machine the 16 threads take a moment to get their polls in: start measuring
        # once most are waiting (the assertion below checks they stay in flight throughout).
        wait_for(lambda: in_flight[0] >= 12, timeout=60, what="the long polls")
        time.sleep(2)  # and the threads that took them have handed back their connections
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with lock:
                held.append(in_flight[0])
            started = time.monotonic()
            status, body, _ = _call(f"{base}/healthz", timeout=30)
            healthz.append(time.monotonic() - started)
            assert status == 200 and body["ok"] is True
            started = time.monotonic()
            status, body, _ = _call(f"{base}/", headers=cookie, timeout=30)
            pages.append(time.monotonic() - started)
            assert status == 200 and "Remember reviews waiting for you" in body["html"]
            open_connections.append(_connections(connection.settings_dict["NAME"]))
            time.sleep(0.25)
        # A person decides: every waiter, whichever process holds it, learns it within a poll.
        for review in reviews:
            approve_review(review=RememberReview.objects.get(pk=review.pk), by=Actor.of_user(world.reviewer))
            approved_at[review.pk] = time.monotonic()
        for thread in threads:
            thread.join(timeout=30)
        # (a waiter sleeping out a Retry-After learns it on its next poll: up to 2 s later)
        woken = max(returned_at[pk] - approved_at[pk] for pk in approved_at)
    finally:
        stop.set()
        _stop(server)
    turned_away = [a for a in answers if a[3] is not None]
    print(
        f"\n{WAITERS} waiters: healthz max {max(healthz) * 1000:.0f} ms (n={len(healthz)}), "
        f"page max {max(pages) * 1000:.0f} ms, polls in flight min/max {min(held)}/{max(held)}, "
        f"{len(turned_away)} of {len(answers)} answers turned away with Retry-After, "
        f"connections to the database max {max(open_connections)}, each waiter answered at most {woken:.1f} s "
        "after its review was decided"
    )
    assert max(healthz) < 1, healthz
    assert max(pages) < 1, pages
    # The waits really were in flight while /healthz answered: at least 10 of the 16 in four samples
    # of five, and never fewer than 4 (a few may be sleeping out a 2 s Retry-After when gunicorn
    # handed one worker more than its share, more of them at one moment on a busy machine).
    assert sum(n >= 10 for n in held) >= 0.8 * len(held), held
    assert min(held) >= 4, held
    assert {a[0] for a in answers} == {200}
    assert all(a[3] == "2" and a[1] < 1 for a in turned_away)
    assert final == {r.pk: "approved" for r in reviews}
    assert woken < 3.5
    # Waiting requests hold no connection: what is open is each worker's watcher and the threads
    # that served /healthz and the page (kept for reuse) — fewer than the waiters.
    assert max(open_connections) < WAITERS, open_connections


# --- `make run` does not leak connections -------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_runserver_serves_thousands_of_sequential_requests_without_leaking_connections(world, tmp_path):
    port = free_port()
    log = tmp_path / "runserver.log"
    db_name = connection.settings_dict["NAME"]
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=_server_env(DEBUG="1", ENGRAM_THROTTLE_RATE="1000000/min", ENGRAM_RECALL_MODE="background"),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}/api/v1"
    key = world.coder.plain_key
    statuses: dict[int, int] = {}
    spent: dict[str, float] = {}
    counts: list[int] = []
    total = 2_000
    try:
        wait_for(lambda: _call(f"{base}/me/", key=key, timeout=5)[0] == 200, timeout=120, what="runserver")
        started = time.monotonic()
        for i in range(total):
            kind = "fact" if i % 20 == 3 else "search" if i % 20 == 13 else "me"
            began = time.monotonic()
            if kind == "fact":
                status, _, _ = _call(
                    f"{base}/facts/",
                    key=key,
                    body={
                        "domain": "architecture",
                        "topic": f"host-{i}",
                        "memory_type": "observation",
                        "content": f"Host web-{i} answered its health check in {i % 90 + 5} ms.",
                    },
                )
            elif kind == "search":
                status, _, _ = _call(f"{base}/search/", key=key, body={"query": f"health check of web-{i - 10}"})
            else:
                status, _, _ = _call(f"{base}/me/", key=key)
            statuses[status] = statuses.get(status, 0) + 1
            spent[kind] = spent.get(kind, 0.0) + time.monotonic() - began
            if i % 100 == 99:
                counts.append(_connections(db_name))
        elapsed = time.monotonic() - started
    finally:
        _stop(server)
    print(
        f"\nrunserver: {total} sequential requests in {elapsed:.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in spent.items())}), "
        f"statuses {statuses}, "
        f"connections to the database every 100 requests: max {max(counts)} {counts}"
    )
    assert set(statuses) <= {200, 201}, statuses
    assert max(counts) <= 4, counts


# --- the embedded PostgreSQL starts whatever its handle file says ---------------------------------
def _manage(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


READ_MARKER = (
    "from django.db import connection; c = connection.cursor(); c.execute('SELECT v FROM kept'); print(c.fetchone()[0])"
)


def test_a_stale_empty_or_corrupt_handle_file_never_stops_the_embedded_database(tmp_path):
    """A private ENGRAM_HOME (its own server): the shared one other tests use is not touched."""
    from config.embedded import stop_embedded_postgres

    home = Path(tmp_path) / "home"
    env = {
        **os.environ,
        "ENGRAM_HOME": str(home),
        "ENGRAM_DB_NAME": "engram_handles",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    for name in ("DATABASE_URL", "XDG_RUNTIME_DIR", "CELERY_BROKER_URL"):
        env.pop(name, None)
    handle_file = home / "pg" / ".handle_pids.json"
    try:
        created = _manage(
            env,
            "shell",
            "-c",
            "from django.db import connection; c = connection.cursor(); "
            'c.execute("CREATE TABLE kept (v text)"); c.execute("INSERT INTO kept VALUES (\'still here\')")',
        )
        assert created.returncode == 0, created.stderr
        cases = [
            ("empty", "", True),
            ("empty, server stopped", "", False),
            ("cut short", "[12", True),
            ("not JSON", "\x00\x01garbage", False),
            ("not a list", '{"pids": [1]}', True),
            ("dead pids", json.dumps([_dead_pid(), _dead_pid()]), False),
            ("odd values", '[1.5, "x", true, -4, 0]', True),
        ]
        for label, content, running in cases:
            if not running:
                stop_embedded_postgres(home)
            handle_file.write_text(content)
            result = _manage(env, "shell", "-c", READ_MARKER)
            assert result.returncode == 0, f"{label}: {result.stderr[-2000:]}"
            assert result.stdout.strip().splitlines()[-1] == "still here", label
            pids = json.loads(handle_file.read_text())
            assert isinstance(pids, list) and all(isinstance(p, int) and p > 0 for p in pids), (label, pids)
            assert "delete" not in result.stderr.lower(), label
    finally:
        stop_embedded_postgres(home)


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_failed_start_says_the_data_is_kept_and_never_to_delete_it(tmp_path, monkeypatch, capsys):
    import pgserver

    from config.embedded import ensure_embedded_postgres

    def broken(*args, **kwargs):
        raise subprocess.CalledProcessError(1, ["pg_ctl", "start"])

    monkeypatch.setattr(pgserver, "get_server", broken)
    with pytest.raises(SystemExit):
        ensure_embedded_postgres(tmp_path / "home", "engram")
    message = capsys.readouterr().err
    assert "keep it" in message and "make stop" in message
    assert "delete" not in message.lower() and "afresh" not in message
