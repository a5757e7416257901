"""Hostile input, measured (issues 15 and 33): `python -m bench.hostile [--classifier-only]`.

1. The parsers on their worst known inputs at the largest allowed body (ENGRAM_MAX_BODY_BYTES):
   the remember-review parser (review.parsing) and the API's strict JSON (memory.safe_json).
2. The write classifier (memory.classifier) on bench/hostile_text.py's corpus — every token class
   its readers know, repeated — at 1,000, 4,000 and 16,000 characters (the maximum fact length):
   the CPU time (time.process_time) of reading each text as a proposal against a topic of facts
   (bench.hostile_text.TOPIC_FACTS and a first proposal of its own class), no reading cached.
3. Real servers: gunicorn and runserver (as `make run` starts it), each sent the fuzzer's review
   output at the largest size, 5,000-deep JSON, a chunked body (Transfer-Encoding: chunked, no
   Content-Length), and two 16,000-character repetitive proposals on one topic per class of the
   issue ("a a a …", "1,1,1,…", "every a …", the mix), with the server's CPU per proposal (its
   processes' utime + stime) while /healthz is asked every 50 ms from another connection.

Uses its own database (ENGRAM_DB_NAME=engram_hostile, recreated empty). Exits 1 when a server
answers 5xx, a parse takes over 2 s, a chunked body is misread, a reading takes over 0.25 s of
CPU, a hostile proposal over 1 s of the server's CPU, or /healthz over 1 s meanwhile.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
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
from bench import hostile_text  # noqa: E402
from bench.common import recreate_database  # noqa: E402
from memory import safe_json  # noqa: E402
from memory.actors import Actor  # noqa: E402
from memory.services.tenancy import create_domain, get_or_create_role, get_or_create_workspace  # noqa: E402
from review.parsing import parse_remember_output  # noqa: E402

PORT = int(os.environ.get("HOSTILE_PORT", "8767"))
LIMIT_S = 2.0
SIZE = settings.ENGRAM_MAX_BODY_BYTES
READING_LIMIT_S = 0.25  # one proposal read against a topic, CPU
PROPOSAL_LIMIT_S = 1.0  # one hostile proposal over HTTP, the server's CPU
HEALTHZ_LIMIT_S = 1.0
# The classes of issue 33's report, each sent twice on one topic.
PROPOSALS = ("a word", "1,1,1", "every a", "a mix of every class")


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


def classifier() -> float:
    """The CPU of reading each hostile text as a proposal (see the module's docstring, 2.): the
    classifier as configured (the rules, and the pair model's second reading where it is asked),
    with the real cosines of the texts' embeddings; the worst, in seconds."""
    import numpy as np

    from memory import classifier, pair_model
    from memory.embeddings import embed_texts, fact_text

    if pair_model.enabled():
        pair_model.probabilities([("warm", "up")])  # the model loads once, before any measurement
    corpora = {size: hostile_text.texts(size) for size in hostile_text.SIZES}
    facts = list(hostile_text.TOPIC_FACTS)
    vectors = {
        text: vector
        for size in hostile_text.SIZES
        for texts in [[*facts, *corpora[size].values(), *(t[1:] + "z" for t in corpora[size].values())]]
        for text, vector in zip(
            texts, np.asarray(embed_texts([fact_text("hostile", t) for t in texts], bulk=True)), strict=True
        )
    }
    print(f"the write classifier, CPU ms per proposal read against {len(facts) + 1} facts:")
    print(f"  {'':36s}" + "".join(f"{size:>10,}" for size in hostile_text.SIZES))
    worst = 0.0
    for label in corpora[hostile_text.SIZES[0]]:
        row = []
        for size in hostile_text.SIZES:
            text = corpora[size][label]
            items = [(old, text, float(vectors[old] @ vectors[text])) for old in [*facts, text[1:] + "z"]]
            classifier.forget_readings()
            started = time.process_time()
            classifier.classify_many(items, nearest=classifier.NEAREST_FACTS, model=pair_model.active())
            row.append(time.process_time() - started)
        worst = max(worst, *row)
        print(f"  {label:36s}" + "".join(f"{spent * 1000:10.1f}" for spent in row))
    return worst


def setup() -> str:
    recreate_database()
    by = Actor.system("bench")
    workspace = get_or_create_workspace(slug="hostile", name="Hostile input", by=by)
    role = get_or_create_role(workspace=workspace, name="coder", by=by)
    create_domain(workspace=workspace, name="architecture", by=by)  # `write` for the role
    return create_agent(workspace=workspace, name="fuzzer", role=role, by=by)[1]


def start(kind: str) -> subprocess.Popen:
    env = {**os.environ, "ENGRAM_RECALL_MODE": "background", "ENGRAM_PRELOAD_MODEL": "1"}
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


def server_cpu(proc: subprocess.Popen) -> float:
    """CPU seconds (user + system) the server's processes (its session) have used so far."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == proc.pid:  # the process group: start_new_session made it the pid
                ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


class HealthProbe(threading.Thread):
    """GET /healthz every 50 ms until stopped; the slowest answer's wall time."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.slowest = 0.0

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            with contextlib.suppress(OSError), urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=120):
                pass
            self.slowest = max(self.slowest, time.perf_counter() - started)
            self.stop.wait(0.05)


def hostile_proposals(kind: str, key: str, proc: subprocess.Popen) -> list[str]:
    """Two 16,000-character proposals of each class of PROPOSALS on one topic (see the module's
    docstring, 3.): the server's CPU per proposal, /healthz meanwhile."""
    problems = []

    def fact(topic: str, content: str) -> bytes:
        body = {"domain": "architecture", "topic": topic, "content": content, "memory_type": "decision"}
        return json.dumps(body).encode()

    for content in ("Deploys happen on Tuesdays.", "Deploys happen on Fridays."):  # models loaded, paths warm
        send(key, "/api/v1/facts/", fact(f"warm-up-{kind}", content))
    corpus = hostile_text.texts(hostile_text.MAX_FACT_CHARS)
    probe = HealthProbe()
    probe.start()
    try:
        for n, label in enumerate(PROPOSALS):
            for content in (corpus[label], corpus[label][1:] + "z"):
                before = server_cpu(proc)
                status, code, elapsed = send(key, "/api/v1/facts/", fact(f"hostile-{kind}-{n}", content))
                spent = server_cpu(proc) - before
                print(f"  16,000 chars of {label!r:36s} {status} {spent:6.2f} s CPU {elapsed * 1000:7.0f} ms")
                if status != 201:
                    problems.append(f"{kind}: a proposal of {label!r} answered {status} {code}")
                if spent > PROPOSAL_LIMIT_S:
                    problems.append(f"{kind}: a proposal of {label!r} took {spent:.2f} s of CPU")
    finally:
        probe.stop.set()
        probe.join(timeout=130)
    print(f"  slowest /healthz meanwhile: {probe.slowest * 1000:.0f} ms")
    if probe.slowest > HEALTHZ_LIMIT_S:
        problems.append(f"{kind}: /healthz took {probe.slowest:.2f} s during the hostile proposals")
    return problems


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
            problems += hostile_proposals(kind, key, proc)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    return problems


def main() -> None:
    problems = []
    if "--classifier-only" not in sys.argv:
        worst = parsers()
        print(f"worst parse: {worst * 1000:.0f} ms")
        problems += [f"a parse took {worst:.2f} s"] if worst > LIMIT_S else []
    reading = classifier()
    print(f"worst reading: {reading * 1000:.0f} ms of CPU")
    problems += [f"a reading took {reading:.2f} s of CPU"] if reading > READING_LIMIT_S else []
    if "--classifier-only" not in sys.argv:
        problems += servers(setup())
    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
