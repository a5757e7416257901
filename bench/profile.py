"""Per-request latency inside Django (no HTTP), on the facts `make bench` left in engram_bench:
p50 / p95 over 500 dispatch tasks and the slowest requests with their slow queries.

    python -m bench.profile preamble|keyword|semantic|hybrid

Tells the time of the work itself apart from HTTP, gunicorn and client queueing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_bench")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ENGRAM_RECALL_MODE", "background")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "profile-" + "x" * 60)
os.environ.setdefault("ALLOWED_HOSTS", "testserver")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from agents.services import rotate_key  # noqa: E402
from bench import corpus  # noqa: E402
from memory.actors import Actor  # noqa: E402
from memory.models import Agent, Fact  # noqa: E402

TASKS = 500
WARM = 50


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "keyword"
    if mode not in {"preamble", "keyword", "semantic", "hybrid"}:
        raise SystemExit("usage: python -m bench.profile preamble|keyword|semantic|hybrid")
    agent = Agent.objects.filter(name="bench-agent").first()
    if agent is None:
        raise SystemExit("No benchmark data: run `make bench` first (it leaves its facts in engram_bench).")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {rotate_key(agent=agent, by=Actor.of_system('bench'))}")
    tasks = corpus.tasks(TASKS)
    if mode == "preamble":
        path, body = "/api/v1/preamble/", lambda i: {"task": tasks[i], "repo": corpus.REPOS[i % 5]}
    else:
        path, body = "/api/v1/search/", lambda i: {"query": tasks[i], "mode": mode}
    for i in range(WARM):
        client.post(path, json.dumps(body(i)), content_type="application/json")
    results = []
    for i in range(TASKS):
        with CaptureQueriesContext(connection) as queries:
            began = time.perf_counter()
            response = client.post(path, json.dumps(body(i)), content_type="application/json")
            ms = (time.perf_counter() - began) * 1000
        if response.status_code != 200:
            raise SystemExit(f"{path} answered {response.status_code}: {response.content[:300]!r}")
        results.append((ms, i, [(float(q["time"]) * 1000, q["sql"][:70]) for q in queries.captured_queries]))
    p50, p95 = np.percentile([r[0] for r in results], [50, 95])
    facts = Fact.objects.filter(workspace_id=agent.workspace_id).count()
    print(f"{mode}: {TASKS} requests in-process over {facts:,} facts: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print("slowest:")
    for ms, i, queries in sorted(results, reverse=True)[:5]:
        print(f"  {ms:6.1f} ms  {tasks[i]}")
        for query_ms, sql in queries:
            if query_ms >= 1:
                print(f"           {query_ms:5.1f} ms  {sql}")


if __name__ == "__main__":
    main()
