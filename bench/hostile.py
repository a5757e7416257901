"""Hostile input, measured (issue 15): `python -m bench.hostile`.

1. The parsers on their worst known inputs at the largest allowed body (ENGRAM_MAX_BODY_BYTES):
   the remember-review parser (review.parsing) and the API's strict JSON (memory.safe_json).
2. Real servers: gunicorn and runserver, each sent the fuzzer's review output at the largest
   size, 5,000-deep JSON, and a chunked body (Transfer-Encoding: chunked, no Content-Length).

Uses its own database (ENGRAM_DB_NAME=engram_hostile, recreated empty). Exits 1 when a server
answers 5xx, a parse takes over 2 s, or a chunked body is misread.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_hostile")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from agents.operations.serializers_reviews import OUTPUT_MAX_CHARS  # noqa: E402
from agents.services import create_agent  # noqa: E402
from bench.common import recreate_database  # noqa: E402
from memory import safe_json  # noqa: E402
from memory.actors import Actor  # noqa: E402
from memory.services.tenancy import get_or_create_role, get_or_create_workspace  # noqa: E402
from review.parsing import parse_remember_output  # noqa: E402

PORT = int(os.environ.get("HOSTILE_PORT", "8767"))
LIMIT_S = 2.0
SIZE = settings.ENGRAM_MAX_BODY_BYTES


def review_outputs(size: int) -> dict[str, str]:
    return {
        "dots without a path (the fuzzer's)": "a." * (size // 2),
        "almost an extension": "a.m" * (size // 3),
        "fence without a newline": "```" + "a" * size,
        "fences on one line": "```x" * (size // 4),
        "a flood of empty fences": "```\n" * (size // 4),
        "a flood of broken JSON blocks": '```json\n{"recommendations":[\n```' * (size // 32),
        "bare objects nested": '{"recommendations":[' * 500 + "1," * (size // 2 - 5000),
        "bare objects broken": '{"recommendations": [1,' * (size // 24),
        "an absurd number after bare objects": '{"recommendations":[' * 20 + "1," * (size // 2 - 5000) + "9" * 5000,
        "bare objects too deep": '{"recommendations":' * (size // 19),
        "one path repeated": "a.md " * (size // 5),
        "distinct paths": "".join(f"d/{i}.py " for i in range(size // 12)),
        "deep nesting in a fence": "```\n" + "[" * size + "\n```",
    }


def json_bodies(size: int) -> dict[str, str]:
    return {
        "5,000 deep": "[" * 5000 + "]" * 5000,
        "2 MB deep": "[" * size,
        "empty arrays": "[" + "[]," * (size // 3 - 1) + "[]]",
        "small objects": "[" + '{"a":1},' * (size // 8 - 1) + "{}]",
        "integers": "[" + "1," * (size // 2 - 1) + "1]",
        "integers beyond 64 bits": "[" + "99999999999999999999," * (size // 21 - 1) + "1]",
        "\\u escapes": "[" + '"\\u00e9",' * (size // 9 - 1) + '"a"]',
        "unterminated escaped quotes": '"' + '\\"' * (size // 2 - 1),
        "one long string": json.dumps({"output": "a." * (size // 2 - 20)}),
    }


def timed(label: str, fn: Callable[[str], object], arg: str) -> float:
    started = time.perf_counter()
    with contextlib.suppress(safe_json.UnsafeJSON):
        fn(arg)
    elapsed = time.perf_counter() - started
    print(f"  {label:44s} {len(arg):>9,} chars  {elapsed * 1000:7.0f} ms")
    return elapsed


def parsers() -> float:
    print(f"parsers, worst known inputs of {SIZE:,} characters:")
    times = [timed(f"review: {k}", lambda t: parse_remember_output(t, {}), v) for k, v in review_outputs(SIZE).items()]
    times += [timed(f"json: {k}", safe_json.loads, v) for k, v in json_bodies(SIZE).items()]
    return max(times)


def setup() -> str:
    recreate_database()
    by = Actor.of_system("bench")
    workspace = get_or_create_workspace(slug="hostile", name="Hostile input", by=by)
    role = get_or_create_role(workspace=workspace, name="coder", by=by)
    return create_agent(workspace=workspace, name="fuzzer", role=role, by=by)[1]


def start(kind: str) -> subprocess.Popen:
    env = {**os.environ, "ENGRAM_RECALL_MODE": "background"}
    if kind == "gunicorn":
        env.update({"DEBUG": "0", "SECRET_KEY": "bench-" + "x" * 60, "ALLOWED_HOSTS": "127.0.0.1"})
        env["SECURE_SSL_REDIRECT"] = "0"
        command = ["-m", "gunicorn", "config.wsgi", "-w", "2", "-b", f"127.0.0.1:{PORT}", "--timeout", "60"]
    else:
        command = ["manage.py", "runserver", f"127.0.0.1:{PORT}", "--noreload"]
    proc = subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=2):
                return proc
        except OSError:
            time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    raise SystemExit(f"{kind} did not start")


def send(key: str, path: str, body: bytes, *, chunked: bool = False) -> tuple[int, str, float]:
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=90)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    started = time.perf_counter()
    if chunked:  # an iterable body without Content-Length: http.client sends it chunked
        connection.request("POST", path, body=iter([body[: len(body) // 2], body[len(body) // 2 :]]), headers=headers)
    else:
        connection.request("POST", path, body=body, headers=headers)
    response = connection.getresponse()
    answer = response.read()
    elapsed = time.perf_counter() - started
    connection.close()
    try:
        code = json.loads(answer).get("code", "")
    except ValueError:
        code = answer[:40].decode(errors="replace")
    return response.status, code, elapsed


def servers(key: str) -> list[str]:
    problems = []
    review = json.dumps({"session_id": "x", "output": "a." * (OUTPUT_MAX_CHARS // 2), "files": {}}).encode()
    cases = [
        ("the fuzzer's review output, 200,000 chars", "/api/v1/reviews/", review, False),
        ("5,000-deep JSON", "/api/v1/search/", b'{"query": ' + b"[" * 5000 + b"]" * 5000 + b"}", False),
        ("chunked body", "/api/v1/runs/", b'{"task": "chunked"}', True),
    ]
    for kind in ("gunicorn", "runserver"):
        proc = start(kind)
        try:
            print(f"{kind}:")
            for label, path, body, chunked in cases:
                status, code, elapsed = send(key, path, body, chunked=chunked)
                print(f"  {label:44s} {status} {code:20s} {elapsed * 1000:7.0f} ms")
                if status >= 500:
                    problems.append(f"{kind}: {label} answered {status}")
                if chunked and (status, kind) not in {(201, "gunicorn"), (411, "runserver")}:
                    problems.append(f"{kind}: chunked body answered {status} {code}")
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    return problems


def main() -> None:
    worst = parsers()
    print(f"worst parse: {worst * 1000:.0f} ms")
    problems = [f"a parse took {worst:.2f} s"] if worst > LIMIT_S else []
    problems += servers(setup())
    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
