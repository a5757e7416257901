"""`make bench`: ingest and recall at 10k and 100k facts, measured over HTTP.

In its own database (ENGRAM_DB_NAME=engram_bench, recreated), for each size:
  1. ingest generated facts through the real write path (ingest_facts: conflict detection,
     locks, audit, embeddings) and report facts/s;
  2. serve the site with gunicorn on loopback and measure preamble, keyword, semantic and
     hybrid search with 1, 2 and 4 concurrent clients: p50 / p95 / p99 — first on the primary
     alone, then again with a streaming read replica (bench.replica: a hot standby of the
     embedded cluster, DATABASE_REPLICA_URLS, a Redis cache for the read-your-writes pins),
     side by side in one table;
  3. measure, at the same concurrencies beside them, what any request costs here (the floors:
     GET /healthz, and GET me/, an authenticated request that does nothing), a plain pgvector
     top-10 query (SQL only, precomputed vector) and PostgreSQL's own full-text top-10 (SQL
     only, every word required, by ts_rank), and HNSW recall@10 against exact search at
     ef_search 40 / 100 / 200 / 400 (the database uses 200);
  4. measure the query embedding alone (bench.run.embedding_baseline: as many processes as
     clients, the server's encoder settings), and report each endpoint's overhead: its p50 minus
     the p50s of its unavoidable parts (GET me/, the embedding, the top-10 SQL of each index it
     reads), and its p95 / p50 (issue 38's targets).

Options (environment): BENCH_SIZES=10000,100000  BENCH_SECONDS=12  BENCH_CLIENTS=1,2,4
  BENCH_WORKERS=(2 × cores, as production)  BENCH_REPLICA=1 (0: the primary only)
  BENCH_REUSE=1  measure the facts already in engram_bench (one size; no ingest) — for tuning.
The targets (issue 22) are read at 2 clients on the primary alone.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
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
from bench.overhead import (  # noqa: E402
    HYBRID_VS_PGVECTOR,
    LEXICAL_RANKING,
    ME,
    OVERHEAD_TARGETS,
    SEMANTIC_RANKING,
    TAIL_TARGET,
    overheads,
    ranking_overheads,
)
from memory.actors import Actor  # noqa: E402
from memory.embeddings import embed_texts  # noqa: E402
from memory.models import (  # noqa: E402
    Agent,
    Episode,
    EpisodeFact,
    Fact,
)
from memory.services.batch import IngestItem, ingest_facts  # noqa: E402
from memory.services.facts import FactInput  # noqa: E402
from memory.services.tenancy import create_domain, get_or_create_repo, get_or_create_role, get_or_create_workspace  # noqa: E402

SIZES = [int(x) for x in os.environ.get("BENCH_SIZES", "10000,100000").split(",")]
SECONDS = float(os.environ.get("BENCH_SECONDS", "12"))
CLIENT_COUNTS = [int(x) for x in os.environ.get("BENCH_CLIENTS", "1,2,4").split(",")]
REUSE = os.environ.get("BENCH_REUSE") == "1"
# The production shape (config/gunicorn_conf.py: gthread, 2 × cores workers, 8 threads each); the
# bench ran gunicorn's default sync workers until issue 38, a shape nothing serves with.
WORKERS = int(os.environ.get("BENCH_WORKERS") or 2 * len(os.sched_getaffinity(0)))
PORT = int(os.environ.get("BENCH_PORT", "8765"))
REPLICA = os.environ.get("BENCH_REPLICA", "1") == "1"
TARGETS = {"preamble": 15.0, "keyword": 10.0, "hybrid": 50.0}  # p95 ms at TARGET_CLIENTS, primary alone
TARGET_CLIENTS = 2
PRIMARY, WITH_REPLICA = "primary", "+ replica"


def setup() -> tuple[str, dict]:
    recreate_database()
    by = Actor.system("bench")
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


def start_server(extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """gunicorn on loopback as production runs it (config/gunicorn_conf.py: threaded workers,
    its access log, here thrown away) with WORKERS workers, serving the bench database (with
    `extra_env`, e.g. a replica)."""
    env = {
        **os.environ,
        "ENGRAM_PRELOAD_MODEL": "1",
        "ENGRAM_RECALL_MODE": "background",
        "DEBUG": "0",
        "SECRET_KEY": "bench-" + "x" * 60,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "OMP_WAIT_POLICY": "PASSIVE",
        # One agent sends every request: at 4 clients it would pass the default 6,000/min and
        # measure 429s. Latency is measured here, not the rate limit (still counted per request).
        "ENGRAM_THROTTLE_RATE": "1000000/min",
        **(extra_env or {}),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "config/gunicorn_conf.py",
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
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with {proc.returncode}")
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
    return _timed(request)


def get(path: str, key: str | None) -> float:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return _timed(urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", headers=headers))


def _timed(request: urllib.request.Request) -> float:
    """ms from sending `request` to having read its whole answer (a 200)."""
    began = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{request.full_url} answered {response.status}")
    return (time.perf_counter() - began) * 1000


# Client c of load() sends requests c × CLIENT_STRIDE, c × CLIENT_STRIDE + 1, …
CLIENT_STRIDE = 100_000


def load(name: str, send: Callable[[int], float], clients: int = 2) -> dict:
    """`clients` threads sending `send(i)` for SECONDS each (client c: i from c × CLIENT_STRIDE);
    latencies in ms; a request that raises is counted as an error, the first one shown."""
    for i in range(10):  # warm every worker
        send(i)
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop = time.monotonic() + SECONDS

    def client(c: int) -> None:
        nonlocal errors
        i = c * CLIENT_STRIDE
        while time.monotonic() < stop:
            try:
                ms = send(i)
                with lock:
                    latencies.append(ms)
            except Exception as error:
                with lock:
                    errors += 1
                    if errors == 1:
                        print(f"  {name}: {error}", file=sys.stderr)
            i += 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
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


def sql_baseline(name: str, sql: str, params: Callable[[int], list], clients: int = 2) -> dict:
    """`sql` alone (no HTTP, no Django) over the same table, `clients` connections at once."""
    return _statements(name, lambda i: (sql, params(i)), clients)


def _statements(name: str, statement: Callable[[int], tuple[str, list]], clients: int) -> dict:
    """statement(i) for i = client, client + clients, … alone, `clients` connections at once, for
    SECONDS, at the database's hnsw.ef_search (migration 0006). Bound on the client, as Django's
    PostgreSQL backend sends them (server-side parameters are planned without their values:
    plainto_tsquery($1) is then evaluated per row, and the lexical statement took twice as long)."""
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
            cursor_factory=psycopg.ClientCursor,
        ) as conn:
            i = c
            while time.monotonic() < stop:
                sql, values = statement(i)
                began = time.perf_counter()
                conn.execute(sql, values).fetchall()
                with lock:
                    latencies.append((time.perf_counter() - began) * 1000)
                i += clients

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summarise(name, latencies, 0)


def pgvector_baseline(vectors: list[list[float]], clients: int = 2) -> dict:
    """Plain pgvector top-10 over the same table: SQL only, vector precomputed."""

    def vector(i: int) -> list:
        return ["[" + ",".join(f"{x:.6f}" for x in vectors[i % len(vectors)]) + "]"]

    sql = (
        "SELECT id FROM memory_fact WHERE superseded_by_id IS NULL AND status = 'active' "
        "ORDER BY embedding <=> %s::vector LIMIT 10"
    )
    return sql_baseline("pgvector top-10 (SQL)", sql, vector, clients)


def fulltext_baseline(tasks: list[str], clients: int = 2) -> dict:
    """PostgreSQL's own full-text top-10 over the same table and tasks: SQL only, every word of the
    task required (plainto_tsquery), ordered by ts_rank — no IDF, decay or grants."""
    sql = (
        "SELECT id FROM memory_fact WHERE superseded_by_id IS NULL AND status = 'active' "
        "AND search_vector @@ plainto_tsquery('english', %s) "
        "ORDER BY ts_rank(search_vector, plainto_tsquery('english', %s)) DESC LIMIT 10"
    )
    return sql_baseline("full-text top-10 (SQL)", sql, lambda i: [tasks[i % len(tasks)]] * 2, clients)


def ranking_baselines(tasks: list[str], vectors: list[list[float]], clients: int = 2) -> list[dict]:
    """The endpoints' own ranking statements alone, as search sends them for the bench agent
    (memory.search.voices: scope, grants, IDF weights, decay; built here, run over psycopg with no
    Django): the lexical voice's (every mode runs it) and the semantic voice's, `CANDIDATES` rows
    each, with the columns semantic and hybrid ask of them (the undecayed score, rank_rows). What the issue's floors leave out: an OR query scored per term is more work than the
    full-text floor's AND query by ts_rank, and the scoped HNSW query than the bare one."""
    from memory.search import voices
    from memory.search.hybrid import CANDIDATES

    scope = voices.Scope(agent=Agent.objects.get(name="bench-agent"))
    lexical = [voices.lexical_sql(scope, task, limit=CANDIDATES, relevance=True, ranking=True) for task in tasks]
    lexical = [q for q in lexical if q is not None]
    semantic = [voices.semantic_sql(scope, vector, limit=CANDIDATES, ranking=True) for vector in vectors]
    return [
        _statements(name, lambda i, q=queries: q[i % len(q)], clients)
        for name, queries in ((LEXICAL_RANKING, lexical), (SEMANTIC_RANKING, semantic))
    ]


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


def _embed_for(tasks: list[str], seconds: float, began_at: float) -> list[float]:
    """In a process of its own, as a gunicorn worker embeds: the query encoder loaded and warmed,
    then embed_text over `tasks` until `seconds` have passed from `began_at` (wall clock, shared by
    every client so they overlap); ms per query."""
    django.setup()
    from memory.embeddings import embed_text

    for task in tasks[:10]:
        embed_text(task)
    while time.time() < began_at:
        time.sleep(0.01)
    latencies, i = [], 0
    while time.time() < began_at + seconds:
        began = time.perf_counter()
        embed_text(tasks[i % len(tasks)])
        latencies.append((time.perf_counter() - began) * 1000)
        i += 1
    return latencies


def embedding_baseline(tasks: list[str], clients: int = 2) -> dict:
    """The query embedding alone (the server's encoder settings, no HTTP, no SQL), `clients`
    processes at once as `clients` gunicorn workers would embed side by side."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    start = time.time() + 20  # every process has loaded its model by then
    with context.Pool(clients) as pool:
        parts = pool.starmap(_embed_for, [(tasks[c::clients], SECONDS, start) for c in range(clients)])
    return summarise("query embedding", [ms for part in parts for ms in part], 0)


# What any request costs on this machine, measured beside the endpoints: an unauthenticated health
# check and an authenticated request that does nothing (key → agent, throttle, DRF, JSON).
# A target below the floor leaves that much less for the search itself.
FLOORS = {"floor: GET /healthz": ("/healthz", False), "floor: GET me/ (auth)": ("/api/v1/me/", True)}


def _get_floor(path: str, key: str | None, i: int) -> float:
    return get(path, key)


def measure_endpoints(key: str, tasks: list[str], server: str, extra_env: dict[str, str] | None = None) -> list[dict]:
    """One gunicorn (primary alone, or with a replica): every endpoint, then the floors, at each
    client count."""

    def task(i: int) -> str:
        return tasks[i % len(tasks)]

    sends: dict[str, Callable[[int], float]] = {
        "preamble": lambda i: post("/api/v1/preamble/", {"task": task(i), "repo": corpus.REPOS[i % 5]}, key),
        "keyword": lambda i: post("/api/v1/search/", {"query": task(i), "mode": "keyword"}, key),
        "semantic": lambda i: post("/api/v1/search/", {"query": task(i), "mode": "semantic"}, key),
        "hybrid": lambda i: post("/api/v1/search/", {"query": task(i)}, key),
    }
    for name, (path, authenticated) in FLOORS.items():
        sends[name] = functools.partial(_get_floor, path, key if authenticated else None)
    proc = start_server(extra_env)
    rows = []
    try:
        warm_up(key, tasks)
        for clients in CLIENT_COUNTS:
            for name, send in sends.items():
                row = load(name, send, clients)
                rows.append({**row, "clients": clients, "server": server, "load": _load_average()})
                print(
                    f"  {server:<10}{name:<22}{clients} clients: p50 {row['p50']:.1f} p95 {row['p95']:.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        stop_server(proc)
    return rows


def _load_average() -> float:
    return os.getloadavg()[0]


@contextlib.contextmanager
def replica_env() -> Iterator[dict[str, str] | None]:
    """A streaming hot standby of the bench database (bench.replica) and a Redis for the
    read-your-writes pins (settings require a shared cache with replicas); None when either
    cannot start (the table then has no replica column)."""
    from bench import replica

    redis_binary = shutil.which("redis-server")
    if redis_binary is None:
        print("no redis-server: measuring without a replica", file=sys.stderr)
        yield None
        return
    try:
        standby = replica.start_standby()
    except Exception as exc:  # a benchmark reports what it could measure
        print(f"the replica did not start ({exc}): measuring without it", file=sys.stderr)
        yield None
        return
    redis_port = PORT + 100
    redis = subprocess.Popen(
        [redis_binary, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        standby.wait_caught_up(timeout=120)
        yield {
            "DATABASE_REPLICA_URLS": standby.url(str(connections["default"].settings_dict["NAME"])),
            "CACHE_URL": f"redis://127.0.0.1:{redis_port}/0",
        }
    finally:
        redis.terminate()
        redis.wait(timeout=10)
        standby.remove()


def measure(key: str, size: int, ingest_rate: float) -> dict:
    tasks = corpus.tasks(500)
    vectors = embed_texts(tasks[:200])
    rows = measure_endpoints(key, tasks, PRIMARY)
    for clients in CLIENT_COUNTS:
        rows.append({**pgvector_baseline(vectors, clients), "clients": clients, "server": PRIMARY})
        rows.append({**fulltext_baseline(tasks, clients), "clients": clients, "server": PRIMARY})
        rows.append({**embedding_baseline(tasks, clients), "clients": clients, "server": PRIMARY})
        rows += [{**r, "clients": clients, "server": PRIMARY} for r in ranking_baselines(tasks, vectors, clients)]
    if REPLICA:
        connections.close_all()
        with replica_env() as extra_env:
            if extra_env is not None:
                rows += measure_endpoints(key, tasks, WITH_REPLICA, extra_env)
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


def _cell(row: dict | None) -> str:
    return f"{row['p50']:.1f} / {row['p95']:.1f} / {row['p99']:.1f}" if row else "—"


def report_overheads(result: dict) -> None:
    lines = overheads(result)
    if not lines:
        return
    print(
        f"\noverhead = p50 − (the p50s of {ME}, the query embedding and the top-10 SQL the endpoint needs), "
        "same run, primary alone"
    )
    print(f"{'endpoint':<10}{'clients':>8}{'p50':>8}{'parts':>8}{'overhead':>10}{'target':>8}{'p95/p50':>9}  verdict")
    for line in lines:
        verdict = [
            "overhead " + ("met" if line["overhead_met"] else "NOT met"),
            f"p95 ≤ {TAIL_TARGET:g}× p50 " + ("met" if line["tail_met"] else "NOT met"),
        ]
        if "vs_pgvector" in line:
            met = line["vs_pgvector"] <= HYBRID_VS_PGVECTOR
            verdict.append(f"{line['vs_pgvector']:.1f}× pgvector ({'met' if met else 'NOT met'})")
        print(
            f"{line['name']:<10}{line['clients']:>8}{line['p50']:>8.1f}{line['floor']:>8.1f}{line['overhead']:>10.1f}"
            f"{OVERHEAD_TARGETS[line['name']]:>8g}{line['tail']:>9.2f}  {'; '.join(verdict)}"
        )
    report_ranking_overheads(result)


def report_ranking_overheads(result: dict) -> None:
    """The same overheads above the endpoint's own ranking SQL (ranking_baselines) in place of the
    issue's floors: what the request path costs beyond the statements search must send."""
    lines = ranking_overheads(result)
    if not lines:
        return
    print(
        f"\noverhead above the endpoint's own ranking SQL = p50 − ({ME} + the ranking statements it sends"
        " + the query embedding where it waits for it), same run, primary alone"
    )
    print(f"{'endpoint':<10}{'clients':>8}{'p50':>8}{'parts':>8}{'overhead':>10}{'target':>8}  verdict")
    for line in lines:
        verdict = "met" if line["overhead_met"] else "NOT met"
        print(
            f"{line['name']:<10}{line['clients']:>8}{line['p50']:>8.1f}{line['floor']:>8.1f}{line['overhead']:>10.1f}"
            f"{OVERHEAD_TARGETS[line['name']]:>8g}  {verdict}"
        )


def report(result: dict) -> None:
    """One table: a line per endpoint and server, p50 / p95 / p99 per client count side by side."""
    print(
        f"\n=== {result['size']:,} facts  (ingest {result['ingest_facts_per_s']:.0f} facts/s incl. embeddings; "
        f"HNSW {result['hnsw_size']}, GIN {result['gin_size']}) ==="
    )
    rows = {(r["name"], r["server"], r["clients"]): r for r in result["rows"]}
    counts = sorted({r["clients"] for r in result["rows"]})
    plural = {c: f"{c} client{'s' if c > 1 else ''} p50/p95/p99" for c in counts}
    header = f"{'endpoint':<26}{'server':<11}" + "".join(f"{plural[c]:>26}" for c in counts)
    print(header + "  errors  target")
    names = dict.fromkeys(r["name"] for r in result["rows"])
    for name in names:
        for server in (PRIMARY, WITH_REPLICA):
            line = [rows.get((name, server, c)) for c in counts]
            if not any(line):
                continue
            cells = "".join(f"{_cell(r):>26}" for r in line)
            errors = sum(r["errors"] for r in line if r)
            target = TARGETS.get(name)
            verdict = ""
            at_target = rows.get((name, server, TARGET_CLIENTS))
            if target is not None and server == PRIMARY and at_target is not None:
                met = at_target["p95"] <= target
                verdict = f"p95 ≤ {target:g} ms at {TARGET_CLIENTS} clients: " + ("met" if met else "NOT met")
            print(f"{name:<26}{server:<11}{cells}{errors:>8}  {verdict}")
    floor = rows.get(("floor: GET me/ (auth)", PRIMARY, TARGET_CLIENTS))
    if floor is not None:
        left = ", ".join(f"{name} {target - floor['p95']:.1f} ms" for name, target in TARGETS.items())
        print(
            f"an authenticated request that does nothing: p95 {floor['p95']:.1f} ms at {TARGET_CLIENTS} clients; "
            f"what each target leaves for the work itself: {left}"
        )
    report_overheads(result)
    loads = [r["load"] for r in result["rows"] if "load" in r]
    if loads:
        print(
            f"machine load (1-min average) during the runs: {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores"
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
        f"bench: sizes {SIZES}, {', '.join(map(str, CLIENT_COUNTS))} concurrent clients × {SECONDS:g} s per endpoint, "
        f"gunicorn {WORKERS} threaded workers (config/gunicorn_conf.py){', then with a streaming replica' if REPLICA else ''}",
        flush=True,
    )
    results = []
    if REUSE:
        agent = Agent.objects.get(name="bench-agent")
        key = rotate_key(agent=agent, by=Actor.system("bench"))
        size = Fact.objects.filter(workspace=agent.workspace).count()
        result = measure(key, size, float("nan"))
        report(result)
        results.append(result)
    else:
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


if __name__ == "__main__":
    main()
