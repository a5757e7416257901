"""`make bench`: ingest and recall at 10k and 100k facts, measured over HTTP.

In its own database (ENGRAM_DB_NAME=engram_bench, recreated), for each size:
  1. ingest generated facts through the real write path (ingest_facts: conflict detection,
     locks, audit, embeddings) and report facts/s;
  2. serve the site with gunicorn on loopback and measure preamble, keyword, semantic and
     hybrid search with concurrent clients: p50 / p95 / p99;
  3. measure a plain pgvector top-10 query (SQL only, precomputed vector) beside them, and HNSW
     recall@10 against exact search at ef_search 40 / 100 / 200 / 400 (the database uses 200).

Options (environment): BENCH_SIZES=10000,100000  BENCH_SECONDS=12  BENCH_CLIENTS=2  BENCH_WORKERS=3
  BENCH_REUSE=1  measure the facts already in engram_bench (one size; no ingest) — for tuning.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_bench")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
from django.db import connection, connections, transaction  # noqa: E402
from tqdm import tqdm  # noqa: E402

from agents.services import create_agent, rotate_key  # noqa: E402
from bench import corpus  # noqa: E402
from bench.common import recreate_database  # noqa: E402
from memory.actors import Actor  # noqa: E402
from memory.embeddings import embed_texts  # noqa: E402
from memory.models import (  # noqa: E402
    Agent,
    Episode,
    EpisodeFact,
    Fact,
)
from memory.services.facts import FactInput, IngestItem, ingest_facts  # noqa: E402
from memory.services.tenancy import create_domain, get_or_create_repo, get_or_create_role, get_or_create_workspace  # noqa: E402

SIZES = [int(x) for x in os.environ.get("BENCH_SIZES", "10000,100000").split(",")]
SECONDS = float(os.environ.get("BENCH_SECONDS", "12"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "2"))
REUSE = os.environ.get("BENCH_REUSE") == "1"
WORKERS = int(os.environ.get("BENCH_WORKERS", "3"))
PORT = int(os.environ.get("BENCH_PORT", "8765"))
TARGETS = {"preamble": 15.0, "keyword": 10.0, "hybrid": 50.0}


def setup() -> tuple[str, dict]:
    recreate_database()
    by = Actor.of_system("bench")
    with transaction.atomic():
        ws = get_or_create_workspace(slug="bench", name="Benchmark", by=by)
        role = get_or_create_role(workspace=ws, name="coder", by=by)
        domains = {}
        for name in corpus.DOMAINS:
            domains[(name, None)] = create_domain(workspace=ws, name=name, by=by)
        for slug in corpus.REPOS:
            repo = get_or_create_repo(workspace=ws, slug=slug, by=by)
            domains[("context", slug)] = create_domain(workspace=ws, name="context", repo=repo, by=by)
        # The corpus mixes people's statements (human_stated) with agents' inferences: the bench agent
        # imports it as a relay of people's words would (only such an agent may state human_stated).
        agent, key = create_agent(workspace=ws, name="bench-agent", role=role, by=by, relays_human_words=True)
    return key, {"workspace": ws, "domains": domains, "agent": agent}


def ingest(ctx: dict, start: int, n: int) -> float:
    by = Actor.of_agent(ctx["agent"])
    items = [
        IngestItem(
            domain=ctx["domains"][(f.domain, f.repo)],
            data=FactInput(topic=f.topic, content=f.content, memory_type=f.memory_type, veracity=f.veracity),
        )
        for f in corpus.facts(n, start=start)
    ]
    began = time.monotonic()
    with tqdm(total=n, unit="fact", desc=f"ingest {start:,}→{start + n:,}", file=sys.stderr) as bar:
        counts = ingest_facts(items=items, by=by, progress=bar.update)
    rate = n / (time.monotonic() - began)
    print(f"  outcomes: {counts}", file=sys.stderr)
    _link_episodes(ctx, start)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_fact")
        cursor.execute("ANALYZE memory_episodefact")
    return rate


def _link_episodes(ctx: dict, start: int) -> None:
    """Sessions that wrote several facts: the edges the graph voice walks."""
    ids = list(
        Fact.objects.filter(workspace=ctx["workspace"], pk__gt=_link_episodes.last)
        .order_by("pk")
        .values_list("pk", flat=True)
    )  # type: ignore[attr-defined]
    _link_episodes.last = ids[-1] if ids else _link_episodes.last  # type: ignore[attr-defined]
    with transaction.atomic():
        episodes = Episode.objects.bulk_create(
            [
                Episode(workspace=ctx["workspace"], kind="session", title=f"bench session {i}")
                for i in range(0, len(ids), 4)
            ]
        )
        EpisodeFact.objects.bulk_create(
            [EpisodeFact(episode=episodes[i // 4], fact_id=pk, relation="written") for i, pk in enumerate(ids)],
            batch_size=5000,
        )


_link_episodes.last = 0  # type: ignore[attr-defined]


def start_server() -> subprocess.Popen:
    env = {
        **os.environ,
        "ENGRAM_PRELOAD_MODEL": "1",
        "ENGRAM_RECALL_MODE": "background",
        "DEBUG": "0",
        "SECRET_KEY": "bench-" + "x" * 60,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi",
            "-w",
            str(WORKERS),
            "-b",
            f"127.0.0.1:{PORT}",
            "--log-level",
            "warning",
            "--timeout",
            "120",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    raise SystemExit("gunicorn did not start")


def stop_server(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def post(path: str, body: dict, key: str) -> float:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{PORT}{path}",
        data=data,
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    began = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{path} answered {response.status}")
    return (time.perf_counter() - began) * 1000


def load(name: str, make_body, path: str, key: str) -> dict:
    """CLIENTS threads for SECONDS each; latencies in ms."""
    for i in range(10):  # warm every worker
        post(path, make_body(i), key)
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop = time.monotonic() + SECONDS

    def client(c: int) -> None:
        nonlocal errors
        i = c * 100_000
        while time.monotonic() < stop:
            try:
                ms = post(path, make_body(i), key)
                with lock:
                    latencies.append(ms)
            except Exception:
                with lock:
                    errors += 1
            i += 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summarise(name, latencies, errors)


def warm_up(key: str, tasks: list[str]) -> None:
    """Until every worker has its model loaded and answers hybrid searches quickly."""

    def burst() -> float:
        times: list[float] = []
        threads = [
            threading.Thread(target=lambda i=i: times.append(post("/api/v1/search/", {"query": tasks[i]}, key)))
            for i in range(WORKERS * 4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return max(times)

    deadline = time.monotonic() + 180
    while burst() > 1000 and time.monotonic() < deadline:
        time.sleep(1)


def summarise(name: str, latencies: list[float], errors: int) -> dict:
    qs = np.percentile(latencies, [50, 95, 99]) if latencies else [float("nan")] * 3
    return {
        "name": name,
        "n": len(latencies),
        "errors": errors,
        "p50": float(qs[0]),
        "p95": float(qs[1]),
        "p99": float(qs[2]),
        "rps": len(latencies) / SECONDS,
    }


def pgvector_baseline(vectors: list[list[float]]) -> dict:
    """Plain pgvector top-10 over the same table: SQL only, vector precomputed, same concurrency."""
    settings = connections["default"].settings_dict
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + SECONDS

    def client(c: int) -> None:
        with psycopg.connect(
            host=settings["HOST"],
            port=settings["PORT"],
            user=settings["USER"],
            dbname=settings["NAME"],
            autocommit=True,
        ) as conn:
            i = c
            while time.monotonic() < stop:
                vector = "[" + ",".join(f"{x:.6f}" for x in vectors[i % len(vectors)]) + "]"
                began = time.perf_counter()
                conn.execute(
                    "SELECT id FROM memory_fact WHERE superseded_by_id IS NULL AND status = 'active' "
                    "ORDER BY embedding <=> %s::vector LIMIT 10",
                    [vector],
                ).fetchall()
                with lock:
                    latencies.append((time.perf_counter() - began) * 1000)
                i += CLIENTS

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summarise("pgvector top-10 (SQL)", latencies, 0)


def hnsw_recall(vectors: list[list[float]]) -> dict[int, float]:
    """recall@10 of the HNSW index against exact search, per ef_search."""
    sql = (
        "SELECT id FROM memory_fact WHERE superseded_by_id IS NULL AND status = 'active' "
        "ORDER BY embedding <=> %s::vector LIMIT 10"
    )
    results = {}
    with connection.cursor() as cursor:
        exact = []
        with transaction.atomic():
            cursor.execute("SET LOCAL enable_indexscan = off")
            for v in vectors:
                cursor.execute(sql, [str(v)])
                exact.append({row[0] for row in cursor.fetchall()})
        for ef in (40, 100, 200, 400):
            found = 0
            with transaction.atomic():
                cursor.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                for v, truth in zip(vectors, exact, strict=True):
                    cursor.execute(sql, [str(v)])
                    found += len({row[0] for row in cursor.fetchall()} & truth)
            results[ef] = found / (10 * len(vectors))
    return results


def measure(key: str, size: int, ingest_rate: float) -> dict:
    tasks = corpus.tasks(500)
    vectors = embed_texts(tasks[:200])
    proc = start_server()
    try:
        warm_up(key, tasks)
        rows = [
            load(
                "preamble",
                lambda i: {"task": tasks[i % len(tasks)], "repo": corpus.REPOS[i % 5]},
                "/api/v1/preamble/",
                key,
            ),
            load("keyword", lambda i: {"query": tasks[i % len(tasks)], "mode": "keyword"}, "/api/v1/search/", key),
            load("semantic", lambda i: {"query": tasks[i % len(tasks)], "mode": "semantic"}, "/api/v1/search/", key),
            load("hybrid", lambda i: {"query": tasks[i % len(tasks)]}, "/api/v1/search/", key),
        ]
    finally:
        stop_server(proc)
    rows.append(pgvector_baseline(vectors))
    recall = hnsw_recall(vectors[:50])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_size_pretty(pg_relation_size('fact_embedding_hnsw')), "
            "pg_size_pretty(pg_relation_size('fact_search_gin'))"
        )
        hnsw_size, gin_size = cursor.fetchone()
    return {
        "size": size,
        "ingest_facts_per_s": ingest_rate,
        "rows": rows,
        "hnsw_recall": recall,
        "hnsw_size": hnsw_size,
        "gin_size": gin_size,
    }


def report(result: dict) -> None:
    print(
        f"\n=== {result['size']:,} facts  (ingest {result['ingest_facts_per_s']:.0f} facts/s incl. embeddings; "
        f"HNSW {result['hnsw_size']}, GIN {result['gin_size']}) ==="
    )
    print(f"{'endpoint':<24}{'requests':>9}{'errors':>7}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'req/s':>8}  target")
    for row in result["rows"]:
        target = TARGETS.get(row["name"])
        verdict = "" if target is None else (f"p95 ≤ {target:g} ms " + ("met" if row["p95"] <= target else "NOT met"))
        print(
            f"{row['name']:<24}{row['n']:>9}{row['errors']:>7}{row['p50']:>9.1f}{row['p95']:>9.1f}{row['p99']:>9.1f}"
            f"{row['rps']:>8.0f}  {verdict}"
        )
    print(
        "HNSW recall@10 vs exact: " + ", ".join(f"ef_search {ef}: {r:.2f}" for ef, r in result["hnsw_recall"].items())
    )
    rate = result["ingest_facts_per_s"]
    if rate != rate:  # NaN: BENCH_REUSE measured facts ingested earlier
        print("ingest: not measured (BENCH_REUSE=1)")
    else:
        print(f"ingest target ≥ 120 facts/s: {'met' if rate >= 120 else 'NOT met'}")


def main() -> None:
    print(
        f"bench: sizes {SIZES}, {CLIENTS} concurrent clients × {SECONDS:g} s per endpoint, gunicorn {WORKERS} workers",
        flush=True,
    )
    results = []
    if REUSE:
        agent = Agent.objects.get(name="bench-agent")
        key = rotate_key(agent=agent, by=Actor.of_system("bench"))
        size = Fact.objects.filter(workspace=agent.workspace).count()
        result = measure(key, size, float("nan"))
        report(result)
        return
    key, ctx = setup()
    done = 0
    for size in SIZES:
        rate = ingest(ctx, done, size - done)
        done = size
        result = measure(key, size, rate)
        report(result)
        results.append(result)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"\nmedian hybrid p95 over sizes: {statistics.median(r['rows'][3]['p95'] for r in results):.1f} ms")


if __name__ == "__main__":
    main()
