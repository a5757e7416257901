"""`make load`: 50 simulated agents for 60 s of mixed preamble / search / propose traffic against
gunicorn on loopback, each agent with its own key. Prints p50/p95/p99 and errors per endpoint;
exits 1 on any error. An agent's proposal names the episode of its latest preamble (`episode_id`),
as a dispatched agent's write would: that episode is written by the recall buffer moments after
the preamble answers, possibly by another worker (memory.recalls.await_episode).

Environment: LOAD_AGENTS=50  LOAD_SECONDS=60  LOAD_WORKERS=4  LOAD_FACTS=2000  LOAD_THINK_MS=100
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_load")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.db import transaction  # noqa: E402

from agents.services import create_agent  # noqa: E402
from bench import corpus  # noqa: E402
from bench import run as bench_run  # noqa: E402
from bench.common import recreate_database  # noqa: E402
from memory.actors import Actor  # noqa: E402
from memory.services.batch import IngestItem, ingest_facts  # noqa: E402
from memory.services.facts import FactInput  # noqa: E402
from memory.services.tenancy import create_domain, get_or_create_repo, get_or_create_role, get_or_create_workspace  # noqa: E402

AGENTS = int(os.environ.get("LOAD_AGENTS", "50"))
SECONDS = float(os.environ.get("LOAD_SECONDS", "60"))
WORKERS = int(os.environ.get("LOAD_WORKERS", "4"))
FACTS = int(os.environ.get("LOAD_FACTS", "2000"))
THINK_MS = float(os.environ.get("LOAD_THINK_MS", "100"))
PORT = int(os.environ.get("LOAD_PORT", "8766"))


def setup() -> list[str]:
    recreate_database()
    by = Actor.system("load")
    with transaction.atomic():
        ws = get_or_create_workspace(slug="load", name="Load test", by=by)
        roles = [get_or_create_role(workspace=ws, name=name, by=by) for name in ("coder", "planner")]
        domains = {(name, None): create_domain(workspace=ws, name=name, by=by) for name in corpus.DOMAINS}
        for slug in corpus.REPOS:
            repo = get_or_create_repo(workspace=ws, slug=slug, by=by)
            domains[("context", slug)] = create_domain(workspace=ws, name="context", repo=repo, by=by)
        # The corpus's facts include people's statements (human_stated), which only agents relaying
        # people's words may propose: the simulated agents are such relays.
        keys = [
            create_agent(workspace=ws, name=f"agent-{i}", role=roles[i % 2], by=by, relays_human_words=True)[1]
            for i in range(AGENTS)
        ]
    items = [
        IngestItem(
            domain=domains[(f.domain, f.repo)],
            data=FactInput(topic=f.topic, content=f.content, memory_type=f.memory_type, veracity=f.veracity),
        )
        for f in corpus.facts(FACTS)
    ]
    print(f"ingesting {FACTS} facts…", flush=True)
    ingest_facts(items=items, by=by)
    return keys


def call(path: str, body: dict, key: str, answer: dict | None = None) -> tuple[int, float]:
    """POST `body`; (status, ms). With `answer`, the JSON answer is stored in it."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{PORT}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    began = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            content = response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        status, content = exc.code, exc.read()
    except OSError:
        status, content = 0, b""
    ms = (time.perf_counter() - began) * 1000
    if answer is not None and content:
        with contextlib.suppress(ValueError):  # an error page: nothing to keep
            answer.update(json.loads(content))
    return status, ms


def main() -> None:
    keys = setup()
    tasks = corpus.tasks(1000)
    new_facts = list(corpus.facts(AGENTS * 400, start=10_000_000))
    bench_run.PORT, bench_run.WORKERS = PORT, WORKERS
    server = bench_run.start_server()
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, list[int]] = defaultdict(list)
    lock = threading.Lock()
    try:
        bench_run.warm_up(keys[0], tasks)
        stop = time.monotonic() + SECONDS

        def agent(n: int) -> None:
            rng = random.Random(n)
            key = keys[n]
            i = 0
            dispatch: dict = {}  # the latest preamble's answer: its episode_id goes with the next proposal
            while time.monotonic() < stop:
                roll = rng.random()
                if roll < 0.5:
                    dispatch.clear()
                    name, status_ok, result = (
                        "preamble",
                        200,
                        call("/api/v1/preamble/", {"task": rng.choice(tasks)}, key, dispatch),
                    )
                elif roll < 0.8:
                    name, status_ok, result = "search", 200, call("/api/v1/search/", {"query": rng.choice(tasks)}, key)
                else:
                    f = new_facts[(n * 400 + i) % len(new_facts)]
                    body = {
                        "domain": f.domain,
                        "repo": f.repo,
                        "topic": f.topic,
                        "content": f.content,
                        "memory_type": f.memory_type,
                        "veracity": f.veracity,
                    }
                    if dispatch.get("episode_id"):
                        body["episode_id"] = dispatch["episode_id"]
                    name, status_ok, result = "propose", 201, call("/api/v1/facts/", body, key)
                    i += 1
                status, ms = result
                with lock:
                    (latencies[name] if status == status_ok else errors[name]).append(
                        ms if status == status_ok else status
                    )
                time.sleep(rng.uniform(0, 2 * THINK_MS) / 1000)

        print(
            f"load: {AGENTS} agents × {SECONDS:g} s, think time ~{THINK_MS:g} ms, gunicorn {WORKERS} workers",
            flush=True,
        )
        threads = [threading.Thread(target=agent, args=(n,)) for n in range(AGENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        bench_run.stop_server(server)
    print(f"\n{'endpoint':<10}{'requests':>10}{'errors':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'req/s':>8}")
    total_errors = 0
    for name in ("preamble", "search", "propose"):
        values = latencies[name]
        p50, p95, p99 = np.percentile(values, [50, 95, 99]) if values else (float("nan"),) * 3
        total_errors += len(errors[name])
        print(
            f"{name:<10}{len(values):>10}{len(errors[name]):>8}{p50:>9.1f}{p95:>9.1f}{p99:>9.1f}{len(values) / SECONDS:>8.1f}"
        )
        if errors[name]:
            statuses = sorted(set(errors[name]))
            print(f"  error statuses: {', '.join(f'{st} × {errors[name].count(st)}' for st in statuses)}")
    print(f"\n{'zero errors' if total_errors == 0 else f'{total_errors} ERRORS'}")
    sys.exit(1 if total_errors else 0)


if __name__ == "__main__":
    main()
