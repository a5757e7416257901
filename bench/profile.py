"""Per-request latency inside Django (no HTTP), on the facts `make bench` left in engram_bench:
p50 / p95 over 500 dispatch tasks, where the time goes step by step, the SQL queries each request
sends, and the slowest requests with their slow queries.

    python -m bench.profile preamble|keyword|semantic|hybrid   [--tasks 500]

Tells the time of the work itself apart from HTTP, gunicorn and client queueing. Steps are timed
by wrapping the functions that do them (whichever of them exist in the code measured, so the same
script reads a before and an after): a step's time excludes the steps nested in it, and
"Django/DRF (rest)" is what no step claims — URL routing, middleware, DRF's request and response.
Queries are counted per request and grouped by what they do (classified by their SQL).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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

import importlib  # noqa: E402

import numpy as np  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from agents.services import rotate_key  # noqa: E402
from bench import corpus  # noqa: E402
from memory.actors import Actor  # noqa: E402
from memory.models import Agent, Fact  # noqa: E402

TASKS = 500
WARM = 50

# (module, attribute path, step). Missing ones are skipped: the list covers the code before and
# after issue 22, point 1, so one script times both.
STEPS: list[tuple[str, str, str]] = [
    ("agents.auth", "AgentKeyAuthentication.authenticate", "auth (key → agent, role, workspace)"),
    ("agents.api.throttling", "AgentRateThrottle.allow_request", "throttle"),
    ("agents.operations", "validated", "input validation"),
    ("memory.search.preamble", "dispatch_context", "context (policies, notes, episode id)"),
    ("memory.search.preamble", "working_memory_text", "context (policies, notes, episode id)"),
    ("memory.search.hybrid", "embed_text", "embed query"),
    ("memory.search.voices", "lexical", "ranking SQL"),
    ("memory.search.voices", "lexical_hits", "ranking SQL"),
    ("memory.search.voices", "semantic", "ranking SQL"),
    ("memory.search.voices", "temporal", "ranking SQL"),
    ("memory.search.voices", "graph", "ranking SQL"),
    ("memory.search.voices", "weighted_terms", "term statistics"),
    ("memory.search.preamble", "select_facts", "hit loading (+ restatement check)"),
    ("memory.search.hybrid", "_candidates", "hit loading (+ restatement check)"),
    ("memory.search.hybrid", "_load", "hit loading (+ restatement check)"),
    ("memory.search.voices", "hits_by_id", "hit loading (+ restatement check)"),
    ("memory.search.hybrid", "_mmr", "MMR (similarities)"),
    ("memory.search.preamble", "open_episode", "episode + recall bookkeeping"),
    ("memory.search.hybrid", "open_episode", "episode + recall bookkeeping"),
    ("memory.search.preamble", "record_recall", "episode + recall bookkeeping"),
    ("memory.search.hybrid", "record_recall", "episode + recall bookkeeping"),
    ("agents.operations.serializers", "PreambleOut.to_representation", "serialization"),
    ("agents.operations.serializers", "SearchOut.to_representation", "serialization"),
    ("agents.operations", "preamble_body", "serialization"),
    ("agents.operations", "search_body", "serialization"),
    ("rest_framework.renderers", "JSONRenderer.render", "JSON rendering"),
]
REST = "Django/DRF (rest)"

# What a query does, from its SQL (first match wins).
QUERY_KINDS: list[tuple[str, re.Pattern[str]]] = [
    ("auth", re.compile(r'FROM "agents_agent"|UPDATE "agents_agent"')),
    ("episode insert", re.compile(r'INSERT INTO "memory_episode"')),
    ("hit loading", re.compile(r'FROM "memory_fact"|FROM memory_fact hit')),
    ("similarities", re.compile(r"JOIN memory_fact b")),
    ("ranking (keyword: + hit loading)", re.compile(r"ts_rank|<=>|memory_episodefact s|extract\(epoch")),
    ("term statistics", re.compile(r"pg_stats|pg_class|to_tsvector\('english', t\)")),
    (
        "context (policies, notes, episode id)",
        re.compile(r"memory_policy|memory_workingmemory|memory_observation|nextval"),
    ),
]


class Steps:
    """Exclusive wall time per step and queries per kind, for the request being measured."""

    def __init__(self) -> None:
        self.stack: list[list[Any]] = []  # [step, began, time in children]
        self.times: dict[str, float] = defaultdict(float)
        self.queries: dict[str, list[float]] = defaultdict(list)
        self.slow: list[tuple[float, str]] = []  # (ms, SQL) of every query of the request

    def reset(self) -> None:
        self.times = defaultdict(float)
        self.queries = defaultdict(list)
        self.slow = []

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        if self.stack and self.stack[-1][0] == name:  # a step calling itself (lexical → lexical_hits)
            yield
            return
        frame = [name, time.perf_counter(), 0.0]
        self.stack.append(frame)
        try:
            yield
        finally:
            self.stack.pop()
            spent = time.perf_counter() - frame[1]
            self.times[name] += spent - frame[2]
            if self.stack:
                self.stack[-1][2] += spent

    def wrap(self, function: Callable[..., Any], name: str) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.step(name):
                return function(*args, **kwargs)

        return timed

    def execute(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            ms = (time.perf_counter() - began) * 1000
            kind = next((k for k, pattern in QUERY_KINDS if pattern.search(sql)), "other")
            self.queries[kind].append(ms)
            self.slow.append((ms, sql[:70]))


def instrument(steps: Steps) -> list[str]:
    """Wrap every step function found; returns the ones found."""
    found = []
    for module_name, path, name in STEPS:
        module = importlib.import_module(module_name)
        *owners, attribute = path.split(".")
        owner: Any = module
        for part in owners:
            owner = getattr(owner, part, None)
        if owner is None or not hasattr(owner, attribute):
            continue
        setattr(owner, attribute, steps.wrap(getattr(owner, attribute), name))
        found.append(f"{module_name}.{path}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["preamble", "keyword", "semantic", "hybrid"], nargs="?", default="keyword")
    parser.add_argument("--tasks", type=int, default=TASKS)
    args = parser.parse_args()
    mode = args.mode
    agent = Agent.objects.filter(name="bench-agent").first()
    if agent is None:
        raise SystemExit("No benchmark data: run `make bench` first (it leaves its facts in engram_bench).")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {rotate_key(agent=agent, by=Actor.system('bench'))}")
    tasks = corpus.tasks(max(args.tasks, WARM))
    if mode == "preamble":
        path, body = "/api/v1/preamble/", lambda i: {"task": tasks[i], "repo": corpus.REPOS[i % 5]}
    else:
        path, body = "/api/v1/search/", lambda i: {"query": tasks[i], "mode": mode}
    steps = Steps()
    instrument(steps)
    for i in range(WARM):
        client.post(path, json.dumps(body(i)), content_type="application/json")
    results = []
    per_step: dict[str, list[float]] = defaultdict(list)
    per_kind: dict[str, list[int]] = defaultdict(list)
    kind_ms: dict[str, list[float]] = defaultdict(list)
    with connection.execute_wrapper(steps.execute):
        for i in range(args.tasks):
            steps.reset()
            began = time.perf_counter()
            response = client.post(path, json.dumps(body(i)), content_type="application/json")
            ms = (time.perf_counter() - began) * 1000
            if response.status_code != 200:
                raise SystemExit(f"{path} answered {response.status_code}: {response.content[:300]!r}")
            named = sum(steps.times.values()) * 1000
            for name, seconds in steps.times.items():
                per_step[name].append(seconds * 1000)
            per_step[REST].append(ms - named)
            for kind in [*(k for k, _ in QUERY_KINDS), "other"]:
                per_kind[kind].append(len(steps.queries.get(kind, [])))
                kind_ms[kind].append(sum(steps.queries.get(kind, [])))
            results.append((ms, i, sum(len(v) for v in steps.queries.values()), list(steps.slow)))
    latencies = [r[0] for r in results]
    p50, p95 = np.percentile(latencies, [50, 95])
    counts = [r[2] for r in results]
    facts = Fact.objects.filter(workspace_id=agent.workspace_id).count()
    print(f"{mode}: {args.tasks} requests in-process over {facts:,} facts: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print(f"SQL queries per request: mean {np.mean(counts):.2f}, min {min(counts)}, max {max(counts)}")
    print(f"\n{'step':<42}{'mean ms':>9}{'p50 ms':>9}{'p95 ms':>9}")
    order = [name for _, _, name in STEPS] + [REST]
    for name in dict.fromkeys(order):
        values = per_step.get(name)
        if not values:
            continue
        values = values + [0.0] * (args.tasks - len(values))  # requests where the step did not run
        q50, q95 = np.percentile(values, [50, 95])
        print(f"{name:<42}{np.mean(values):>9.2f}{q50:>9.2f}{q95:>9.2f}")
    print(f"{'total':<42}{np.mean(latencies):>9.2f}{p50:>9.2f}{p95:>9.2f}")
    print(f"\n{'queries by kind':<42}{'per req':>9}{'mean ms':>9}{'p95 ms':>9}")
    for kind in [k for k, _ in QUERY_KINDS] + ["other"]:
        if not any(per_kind[kind]):
            continue
        print(
            f"{kind:<42}{np.mean(per_kind[kind]):>9.2f}{np.mean(kind_ms[kind]):>9.2f}"
            f"{np.percentile(kind_ms[kind], 95):>9.2f}"
        )
    print("\nslowest:")
    for ms, i, _, queries in sorted(results, reverse=True)[:5]:
        print(f"  {ms:6.1f} ms  {tasks[i]}")
        for query_ms, sql in queries:
            if query_ms >= 1:
                print(f"           {query_ms:5.1f} ms  {sql}")


if __name__ == "__main__":
    main()
