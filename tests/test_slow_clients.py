"""Slow and idle clients against the production shape (issue 33). bin/serve-prod runs as a real
process — nginx in front of gunicorn, Celery — on this test's database and a Redis of its own.
A crowd of clients that send one header line, or a few bytes of body, every two seconds, plus
sixteen review long-polls, leave /healthz fast through nginx; nginx cuts off a client too slow to
send its request; ordinary requests still work; and the same crowd sent straight to gunicorn's
socket starves it, as it starved the production shape before nginx stood in front."""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client

from config.nginx import CLIENT_BODY_TIMEOUT, CLIENT_HEADER_TIMEOUT
from memory.actors import Actor
from review.models import RememberReview
from review.services import approve_review, submit_review
from tests.procs import ROOT, Redis, free_port, wait_for
from tests.review.samples import FILES, OUTPUT

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("reviewer_is_workspace_admin")]

SLOW_HEADERS = 80  # clients that send one header line every LINE_EVERY seconds, never the blank line
SLOW_BODIES = 20  # clients whose headers are whole and whose body comes a few bytes every LINE_EVERY
LINE_EVERY = 2.0
WAITERS = 16
SAMPLES = 30
HTTPS = {"X-Forwarded-Proto": "https"}  # as the TLS terminator in front of nginx says it

Target = tuple[str, int] | str  # nginx's (host, port) or gunicorn's unix socket


def _connect(target: Target, timeout: float) -> socket.socket:
    if isinstance(target, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(target)
        except OSError:
            sock.close()
            raise
        return sock
    return socket.create_connection(target, timeout=timeout)


class _Connection(http.client.HTTPConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(*(("127.0.0.1",) if isinstance(target, str) else target), timeout=timeout)
        self.target = target

    def connect(self) -> None:
        self.sock = _connect(self.target, self.timeout)  # type: ignore[arg-type]


def _request(
    target: Target, method: str, path: str, *, body: bytes | None = None, headers: dict | None = None, timeout: float
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body); status 0 when no answer came within `timeout` or the connection broke."""
    conn = _Connection(target, timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    except OSError:
        return 0, {}, b""
    finally:
        conn.close()


class Crowd:
    """Slow clients held open from one thread. Each sends a little every LINE_EVERY seconds and,
    once cut off, connects again, as an attacker would; `cut` keeps how long each connection lived
    and what the server said before closing it (a 408, or nothing)."""

    def __init__(self, target: Target, *, headers: int, bodies: int, key: str) -> None:
        self.target = target
        self.kinds = ["header"] * headers + ["body"] * bodies
        self.key = key
        self.socks: list[socket.socket | None] = [None] * len(self.kinds)
        self.opened = [0.0] * len(self.kinds)
        self.sent = [0] * len(self.kinds)
        self.cut: dict[str, list[tuple[float, bytes]]] = {"header": [], "body": []}
        self.refused = 0
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Crowd:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        for sock in self.socks:
            if sock is not None:
                sock.close()

    def open_count(self) -> int:
        with self.lock:
            return sum(sock is not None for sock in self.socks)

    def _opening(self, kind: str) -> bytes:
        if kind == "header":
            return b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        return (
            "POST /api/v1/facts/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Proto: https\r\n"
            f"Authorization: Bearer {self.key}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            '{"domain": "architecture", "topic": "slow", "content": "'
        ).encode()

    def _run(self) -> None:
        while not self._stop.is_set():
            tick = time.monotonic()
            for n in range(len(self.kinds)):
                if self._stop.is_set():
                    return
                self._step(n)
            self._stop.wait(max(0.0, LINE_EVERY - (time.monotonic() - tick)))

    def _drop(self, n: int, said: bytes) -> None:
        sock = self.socks[n]
        assert sock is not None
        sock.close()
        with self.lock:
            self.cut[self.kinds[n]].append((time.monotonic() - self.opened[n], said))
            self.socks[n] = None

    def _step(self, n: int) -> None:
        sock = self.socks[n]
        if sock is None:
            try:
                sock = _connect(self.target, timeout=5)
                sock.sendall(self._opening(self.kinds[n]))
            except OSError:
                self.refused += 1
                return
            sock.setblocking(False)
            with self.lock:
                self.socks[n], self.opened[n], self.sent[n] = sock, time.monotonic(), 0
            return
        try:
            said = sock.recv(4096)
            self._drop(n, said)  # closed (b"") or answered: either way the server is done with it
            return
        except BlockingIOError:
            pass
        except OSError:
            self._drop(n, b"")
            return
        piece = b"X-Slow-%d: %d\r\n" % (self.sent[n], n) if self.kinds[n] == "header" else b"x" * 16
        try:
            sock.send(piece)
            self.sent[n] += 1
        except BlockingIOError:
            pass
        except OSError:
            self._drop(n, b"")


def _cut_off_after(target: Target, opening: bytes, dribble: bytes | None, limit: float) -> tuple[float, bytes]:
    """Seconds until the server closed a connection that sent `opening`, then `dribble` every
    second (or nothing), and what it said first; (limit, b"") if it never did."""
    started = time.monotonic()
    with _connect(target, timeout=5) as sock:
        sock.sendall(opening)
        sock.settimeout(1)
        while time.monotonic() - started < limit:
            try:
                said = sock.recv(4096)
                return time.monotonic() - started, said
            except TimeoutError:
                pass
            except OSError:
                return time.monotonic() - started, b""
            if dribble:
                try:
                    sock.sendall(dribble)
                except OSError:
                    return time.monotonic() - started, b""
    return limit, b""


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _server_env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "ENGRAM_DB_NAME": connection.settings_dict["NAME"],
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "HF_HUB_OFFLINE": "1",
        **extra,
    }
    for name in ("DATABASE_URL", "ENGRAM_MAX_WAITERS", "WEB_THREADS", "ENGRAM_CONN_MAX_AGE"):
        env.pop(name, None)
    return env


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGKILL)  # whatever of the group outlived bin/serve-prod's cleanup
    server.wait(timeout=10)


@dataclass
class ProdServer:
    """bin/serve-prod running on this test's database: nginx at `front`, gunicorn at `socket_path`."""

    process: subprocess.Popen
    port: int
    serve_dir: Path
    log: Path

    @property
    def front(self) -> Target:
        return ("127.0.0.1", self.port)

    @property
    def socket_path(self) -> str:
        return str(self.serve_dir / "sock" / "web.sock")

    def access_log(self) -> str:
        path = self.serve_dir / "nginx-access.log"
        return path.read_text() if path.exists() else ""


def _start_serve_prod(tmp_path: Path, redis: Redis, secret_key: str) -> ProdServer:
    # Short: gunicorn's socket lives here, and a unix socket's path is at most 107 bytes.
    serve_dir = Path(tempfile.mkdtemp(prefix="engram-serve-", dir="/tmp"))
    port = free_port()
    log = tmp_path / "serve-prod.log"
    process = subprocess.Popen(
        ["bin/serve-prod"],
        cwd=ROOT,
        env=_server_env(
            PORT=str(port),
            ENGRAM_SERVE_DIR=str(serve_dir),
            PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prometheus"),
            CELERY_BROKER_URL=redis.url,
            SECRET_KEY=secret_key,
            ALLOWED_HOSTS="127.0.0.1",
            SECURE_SSL_REDIRECT="1",  # so the test sees which scheme reached Django
            WEB_CONCURRENCY="4",  # serve-prod's default on this project's 2-core machine
        ),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return ProdServer(process, port, serve_dir, log)


def _wait_until_up_and_warm(server: ProdServer, cookie: dict[str, str]) -> None:
    """/healthz answers through nginx, and every worker has rendered the page once (templates load
    on first use)."""
    front = server.front
    wait_for(
        lambda: (
            server.process.poll() is not None or _request(front, "GET", "/healthz", headers=HTTPS, timeout=5)[0] == 200
        ),
        timeout=240,
        what="bin/serve-prod",
        interval=0.5,
    )
    assert server.process.poll() is None, server.log.read_text()[-5000:]
    warm = [
        threading.Thread(
            target=_request, args=(front, "GET", "/"), kwargs={"headers": {**HTTPS, **cookie}, "timeout": 60}
        )
        for _ in range(12)
    ]
    for thread in warm:
        thread.start()
    for thread in warm:
        thread.join()


class LongPolls:
    """One thread per review long-polling it (`?wait=20`) until it is no longer pending or `stop`."""

    def __init__(self, front: Target, key: str, reviews: list[RememberReview]) -> None:
        self.front, self.key = front, key
        self.lock = threading.Lock()
        self.in_flight = 0
        self.statuses: list[int] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._wait, args=(r.pk,), daemon=True) for r in reviews]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def answered(self) -> list[int]:
        with self.lock:
            return list(self.statuses)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=30)

    def _wait(self, review_id: int) -> None:
        while not self.stop.is_set():
            with self.lock:
                self.in_flight += 1
            status, headers, body = _request(
                self.front,
                "GET",
                f"/api/v1/reviews/{review_id}/?wait=20",
                headers={**HTTPS, "Authorization": f"Bearer {self.key}"},
                timeout=40,
            )
            with self.lock:
                self.in_flight -= 1
                self.statuses.append(status)
            if status != 200 or json.loads(body)["status"] != "pending":
                return
            if headers.get("Retry-After"):
                self.stop.wait(float(headers["Retry-After"]))


CUT_OFF_LIMIT = 3 * max(CLIENT_HEADER_TIMEOUT, CLIENT_BODY_TIMEOUT)


def _start_cut_off_probes(front: Target) -> tuple[dict[str, tuple[float, bytes]], list[threading.Thread]]:
    """A client whose header never ends and one whose body stalls, each timed until nginx cuts it
    off (`_cut_off_after`): their results land in the returned dict once the threads end."""
    probes: dict[str, tuple[float, bytes]] = {}
    slow_header = (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Slow: 1\r\n")
    stalled_body = (
        b"POST /api/v1/facts/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{",
        None,
    )
    threads = [
        threading.Thread(
            target=lambda kind=kind, opening=opening, dribble=dribble: probes.__setitem__(
                kind, _cut_off_after(front, opening, dribble, CUT_OFF_LIMIT)
            )
        )
        for kind, (opening, dribble) in (("header", slow_header), ("body", stalled_body))
    ]
    for thread in threads:
        thread.start()
    return probes, threads


def _sample_healthz(front: Target, polls: LongPolls, crowd: Crowd) -> tuple[list[float], list[tuple[int, int]]]:
    """SAMPLES timings of /healthz through nginx, each with (long-polls in flight, slow connections
    open) at that moment; every answer must be a healthy 200."""
    healthz: list[float] = []
    held: list[tuple[int, int]] = []
    for _ in range(SAMPLES):
        with polls.lock:
            held.append((polls.in_flight, crowd.open_count()))
        started = time.monotonic()
        status, _, body = _request(front, "GET", "/healthz", headers=HTTPS, timeout=10)
        healthz.append(time.monotonic() - started)
        assert status == 200 and json.loads(body)["ok"] is True, (status, body)
        time.sleep(0.5)
    return healthz, held


def _assert_ordinary_requests_work(server: ProdServer, key: str, cookie: dict[str, str]) -> None:
    """With the crowd still there: the API, a page, a static file, the body limits and the scheme
    Django sees all behave as without it."""
    front = server.front
    auth = {**HTTPS, "Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    status, _, body = _request(front, "GET", "/api/v1/me/", headers=auth, timeout=30)
    assert status == 200, body
    fact = {
        "domain": "architecture",
        "topic": "front",
        "memory_type": "decision",
        "content": "nginx reads each request whole before gunicorn's threads see it.",
    }
    status, _, body = _request(
        front, "POST", "/api/v1/facts/", body=json.dumps(fact).encode(), headers=auth, timeout=30
    )
    assert status == 201, body
    status, _, body = _request(front, "GET", "/", headers={**HTTPS, **cookie}, timeout=30)
    assert status == 200 and b"Remember reviews waiting for you" in body
    status, _, body = _request(front, "GET", "/static/engram/htmx.min.js", timeout=30)
    assert status == 200 and body == (ROOT / "static" / "engram" / "htmx.min.js").read_bytes()
    # A body just under the limit reaches the app (nginx keeps it in a temp file meanwhile; the
    # app's own answer, not nginx's); one over it nginx refuses as the API does.
    near_limit = b'{"content": "' + b"x" * (django_settings.ENGRAM_MAX_BODY_BYTES - 100) + b'"}'
    status, _, body = _request(front, "POST", "/api/v1/facts/", body=near_limit, headers=auth, timeout=30)
    assert status == 400 and json.loads(body)["code"] == "invalid_input", (status, body[:300])
    too_big = b"x" * (django_settings.ENGRAM_MAX_BODY_BYTES + 1)
    status, _, body = _request(front, "POST", "/api/v1/facts/", body=too_big, headers=auth, timeout=30)
    assert status == 413 and json.loads(body)["code"] == "body_too_large", (status, body[:300])
    # The scheme Django sees is the one the TLS terminator in front said (http or https, nothing
    # else), and the Host keeps its port.
    for proto in (None, "gopher"):
        status, headers, _ = _request(
            front, "GET", "/healthz", headers={"X-Forwarded-Proto": proto} if proto else {}, timeout=30
        )
        assert status == 301 and headers["Location"] == f"https://127.0.0.1:{server.port}/healthz", (
            proto,
            status,
            headers,
        )


def _healthz_straight_at_gunicorn(server: ProdServer, key: str, crowds: list[Crowd]) -> list[float]:
    """The same crowd at gunicorn's socket (no front): how long /healthz took, 8 times (inf: no
    answer within 2 s)."""
    direct = Crowd(server.socket_path, headers=SLOW_HEADERS, bodies=SLOW_BODIES, key=key).start()
    crowds.append(direct)
    wait_for(lambda: direct.open_count() >= 90, timeout=60, what="the crowd at gunicorn")
    time.sleep(LINE_EVERY)
    starved: list[float] = []
    for _ in range(8):
        started = time.monotonic()
        status, _, _ = _request(server.socket_path, "GET", "/healthz", headers=HTTPS, timeout=2)
        starved.append(time.monotonic() - started if status == 200 else math.inf)
        time.sleep(0.5)
    direct.stop()
    return starved


@dataclass
class Measured:
    """What the run saw, judged after the server stopped."""

    healthz: list[float]
    held: list[tuple[int, int]]  # (long-polls in flight, slow connections open) at each sample
    polls_answered: list[int]
    probes: dict[str, tuple[float, bytes]]
    header_cuts: list[float]  # how long each slow-header connection of the crowd lived
    starved: list[float]
    access_log: str


def _print_figures(m: Measured) -> None:
    p50, p99 = statistics.median(m.healthz), _percentile(m.healthz, 0.99)
    held, cuts = m.held, m.header_cuts
    print(
        f"\nthrough nginx, {SLOW_HEADERS} slow-header + {SLOW_BODIES} slow-body clients and {WAITERS} long-polls: "
        f"/healthz p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {max(m.healthz) * 1000:.0f} ms "
        f"(n={len(m.healthz)}); "
        f"polls in flight median {statistics.median(h[0] for h in held):.0f} (min {min(h[0] for h in held)}), "
        f"slow connections open median {statistics.median(h[1] for h in held):.0f} (min {min(h[1] for h in held)}); "
        f"slow-header connections cut off {len(cuts)} times after {min(cuts):.1f}-{max(cuts):.1f} s; "
        f"a slow-header client cut off after {m.probes['header'][0]:.1f} s, "
        f"a stalled body after {m.probes['body'][0]:.1f} s. "
        f"Straight at gunicorn's socket: /healthz answered after {sorted(round(s, 1) for s in m.starved)} s "
        "(inf: not within 2 s)"
    )


def _assert_nginx_held_and_cut_off(m: Measured) -> None:
    assert _percentile(m.healthz, 0.99) < 1, m.healthz
    # The crowd and the polls really were there while /healthz answered. A few of the 16 polls may
    # be sleeping out a Retry-After when gunicorn handed one worker more than its share, and now and
    # then several at once (one sample of 30 saw 5 in flight, median 15, in a CI run): most samples,
    # not every one, must have at least half of them in flight.
    held = m.held
    assert statistics.median(h[0] for h in held) >= 12, held
    assert sum(h[0] >= WAITERS // 2 for h in held) >= 0.9 * len(held), held
    # (the slow-header connections opened together are cut off together, and take a moment to return)
    assert statistics.median(h[1] for h in held) >= 90 and min(h[1] for h in held) >= SLOW_BODIES, held
    assert set(m.polls_answered) == {200}, m.polls_answered
    # nginx cuts off a client whose header is not whole within CLIENT_HEADER_TIMEOUT, however
    # steadily it sends, and a body that pauses CLIENT_BODY_TIMEOUT: a reset, or a 408.
    for kind, timeout in (("header", CLIENT_HEADER_TIMEOUT), ("body", CLIENT_BODY_TIMEOUT)):
        seconds, said = m.probes[kind]
        assert timeout - 1 <= seconds <= timeout + 5, (kind, seconds)
        assert said == b"" or said.startswith(b"HTTP/1.1 408"), (kind, said[:200])
    assert m.header_cuts and all(
        CLIENT_HEADER_TIMEOUT - 1 <= s <= CLIENT_HEADER_TIMEOUT + LINE_EVERY + 3 for s in m.header_cuts
    )
    # The static file came from nginx itself, not from gunicorn.
    static = [json.loads(line) for line in m.access_log.splitlines() if "/static/engram/htmx.min.js" in line]
    assert static and all(entry["status"] == 200 and entry["upstream"] in {"", "-"} for entry in static), static
    # Without the front the same crowd holds gunicorn's threads: /healthz waits for one that a
    # long-poll gives back, or does not answer at all (what this test's bar above would refuse).
    assert max(m.starved) > 1, m.starved


@pytest.mark.django_db(transaction=True)
def test_slow_clients_and_long_polls_leave_healthz_fast_behind_nginx_and_are_cut_off(world, tmp_path, settings):
    reviews = [
        submit_review(agent=world.coder, session_id=f"turn-{i}", output=OUTPUT, files=FILES, repo="web")
        for i in range(WAITERS)
    ]
    settings.SECRET_KEY = secrets.token_urlsafe(64)  # the server's: it signs the reviewer's session
    browser = Client()
    browser.force_login(world.reviewer)
    cookie = {"Cookie": f"sessionid={browser.cookies['sessionid'].value}"}
    key = world.coder.plain_key
    redis = Redis(tmp_path)
    server = _start_serve_prod(tmp_path, redis, settings.SECRET_KEY)
    polls = LongPolls(server.front, key, reviews)
    crowds: list[Crowd] = []
    try:
        _wait_until_up_and_warm(server, cookie)

        # --- through nginx: the crowd and the long-polls, then /healthz ---------------------------
        crowd = Crowd(server.front, headers=SLOW_HEADERS, bodies=SLOW_BODIES, key=key).start()
        crowds.append(crowd)
        polls.start()
        wait_for(lambda: polls.in_flight >= 12 and crowd.open_count() >= 90, timeout=60, what="the crowd and the polls")
        probes, probe_threads = _start_cut_off_probes(server.front)
        time.sleep(2)  # the threads that took the polls have handed back their connections
        healthz, held = _sample_healthz(server.front, polls, crowd)
        _assert_ordinary_requests_work(server, key, cookie)
        polls_answered = polls.answered()
        for thread in probe_threads:
            thread.join(timeout=CUT_OFF_LIMIT + 10)
        crowd.stop()

        # --- the same crowd straight at gunicorn's socket (no front): /healthz starves --------------
        starved = _healthz_straight_at_gunicorn(server, key, crowds)

        # A person decides: the long-polls end, and the server can stop at once.
        polls.stop.set()
        for review in reviews:
            approve_review(review=RememberReview.objects.get(pk=review.pk), by=Actor.of_user(world.reviewer))
        polls.join()
    finally:
        polls.stop.set()
        for crowd_ in crowds:
            crowd_.stop()
        _stop(server.process)
        redis.stop()
        access_log = server.access_log()
        shutil.rmtree(server.serve_dir, ignore_errors=True)

    header_cuts = [seconds for seconds, _ in crowd.cut["header"]]
    measured = Measured(healthz, held, polls_answered, probes, header_cuts, starved, access_log)
    _print_figures(measured)
    _assert_nginx_held_and_cut_off(measured)
