"""As-of recall (issues 21 and 38): the cost of `as_of` next to today's search and preamble, in-process.

In its own database (ENGRAM_DB_NAME=engram_bench_asof, recreated unless BENCH_ASOF_REUSE=1 finds
it holding BENCH_ASOF_FACTS facts): N generated facts (default 1000; BENCH_ASOF_SOURCE_DB=name takes
them and their vectors from another bench's database instead) recorded over 90 days; a third
superseded later, a tenth challenged later (with their audit events). Then, in the same run:

- for each query, the median over the tasks of today's search in each mode and the preamble,
  and the same as of 45 days ago; the as-of / today ratio of semantic search against its target
  (issue 38: ≤ 1.5×);
- the semantic voice alone: today, as of (from the indexes, voices.semantic_then) and the exact
  scan the as-of voice used before, and how many tasks the indexes answered without the scan;
- recall: every fact the exact answer has (a sequential scan of the scope) found by the voice,
  per task and overall, as of and valid at 45 days ago (and today's, for the HNSW baseline);
- the write cost of the graph of past facts: ms per fact to insert embedded facts and to move
  them out of the recallable set, with fact_embedding_hnsw_past and without it (dropped inside
  the rolled-back transaction).

    .venv/bin/python -m bench.as_of            # BENCH_ASOF_FACTS=1000 BENCH_ASOF_TASKS=40
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_bench_asof")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ENGRAM_RECALL_MODE", "sync")

import django  # noqa: E402
import psycopg  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import OperationalError, connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from agents.services import create_agent  # noqa: E402
from bench import corpus  # noqa: E402
from bench.common import recreate_database  # noqa: E402
from memory.actors import Actor  # noqa: E402
from memory.embeddings import embed_text, embed_texts, vector_literal  # noqa: E402
from memory.models import Agent, AuditEvent, Fact, MemoryDomain  # noqa: E402
from memory.search import voices  # noqa: E402
from memory.search.hybrid import CANDIDATES, MODES, search_memory  # noqa: E402
from memory.search.preamble import build_preamble  # noqa: E402
from memory.services.tenancy import create_domain, get_or_create_role, get_or_create_workspace  # noqa: E402

FACTS = int(os.environ.get("BENCH_ASOF_FACTS", "1000"))
TASKS = int(os.environ.get("BENCH_ASOF_TASKS", "40"))
ROUNDS = int(os.environ.get("BENCH_ASOF_ROUNDS", "3"))
REUSE = os.environ.get("BENCH_ASOF_REUSE") == "1"
SOURCE = os.environ.get("BENCH_ASOF_SOURCE_DB", "")
WRITES = int(os.environ.get("BENCH_ASOF_WRITES", "300"))
TARGET = 1.5  # issue 38: as-of semantic p50 within 1.5× of today's
GRAPHS = [index for index in Fact._meta.indexes if index.name.startswith("fact_embedding_hnsw")]
PAST_GRAPH = "fact_embedding_hnsw_past"


def facts_and_vectors() -> tuple[list[corpus.GeneratedFact], list[list[float]]]:
    """FACTS generated facts and their embeddings. With BENCH_ASOF_SOURCE_DB, the first FACTS
    embedded facts of that database (another bench's corpus, embedded by the same model from the
    same text, topic: content) instead: embedding is most of the populating time at 100k facts."""
    if not SOURCE:
        generated = list(corpus.facts(FACTS))
        return generated, embed_texts([f"{g.topic}: {g.content}" for g in generated])
    settings = connection.settings_dict
    params = {"host": settings["HOST"], "port": settings["PORT"] or 5432, "user": settings["USER"]}
    with psycopg.connect(**params, password=settings["PASSWORD"] or None, dbname=SOURCE) as source:
        rows = source.execute(
            "SELECT d.name, f.topic, f.content, f.memory_type, f.veracity, f.embedding::text FROM memory_fact f"
            " JOIN memory_memorydomain d ON d.id = f.domain_id WHERE f.embedding IS NOT NULL ORDER BY f.id LIMIT %s",
            [FACTS],
        ).fetchall()
    if len(rows) < FACTS:
        raise SystemExit(f"{SOURCE} holds {len(rows)} embedded facts, fewer than BENCH_ASOF_FACTS={FACTS}")
    generated = [corpus.GeneratedFact(row[0], None, *row[1:5]) for row in rows]
    return generated, [[float(x) for x in row[5][1:-1].split(",")] for row in rows]


def populate() -> tuple[Agent, datetime]:
    system = Actor.system("bench")
    workspace = get_or_create_workspace(slug="asof", name="As-of bench", by=system)
    role = get_or_create_role(workspace=workspace, name="coder", by=system)
    domains: dict[str, MemoryDomain] = {}
    generated, vectors = facts_and_vectors()
    for g in generated:
        if g.domain not in domains:
            domains[g.domain] = create_domain(workspace=workspace, name=g.domain, by=system)
    now = timezone.now()
    rows = []
    for i, (g, vector) in enumerate(zip(generated, vectors, strict=True)):
        at = now - timedelta(days=90) + timedelta(days=90 * i / FACTS)
        rows.append(
            Fact(
                workspace=workspace,
                domain=domains[g.domain],
                topic=g.topic,
                content=g.content,
                memory_type=g.memory_type,
                veracity=g.veracity,
                confidence=0.7,
                observed_at=at,
                created_at=at,
                last_mentioned_at=at,
                status_changed_at=at,
                embedding=vector,
                embedded_at=at,
            )
        )
    # The graphs are built after the load, as a backfill would: inserting row by row into them
    # would be most of the populating time at 100k facts.
    with connection.schema_editor(atomic=False) as editor:
        for index in GRAPHS:
            editor.remove_index(Fact, index)
    facts = Fact.objects.bulk_create(rows, batch_size=2000)
    events = []
    for i, fact in enumerate(facts):
        later = fact.created_at + timedelta(days=20)
        if i % 3 == 0 and i + 1 < len(facts) and later < now:  # superseded later by its neighbour
            Fact.objects.filter(pk=fact.pk).update(superseded_by=facts[i + 1], superseded_at=later)
        elif i % 10 == 1 and later < now:  # challenged later
            Fact.objects.filter(pk=fact.pk).update(status="challenged", status_changed_at=later)
            events.append(
                AuditEvent(
                    workspace=workspace,
                    actor_label="system:bench",
                    verb="fact.challenged",
                    target_type="fact",
                    target_id=fact.pk,
                    detail={"from": "active", "to": "challenged", "reason": "stale"},
                    created_at=later,
                )
            )
    AuditEvent.objects.bulk_create(events)
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
    with connection.schema_editor(atomic=False) as editor:
        for index in GRAPHS:
            editor.add_index(Fact, index)
    with connection.cursor() as cursor:
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("VACUUM ANALYZE memory_fact")
        cursor.execute("ANALYZE memory_auditevent")
    agent, _ = create_agent(workspace=workspace, name="bench", role=role, by=system)
    return agent, now


def reused() -> tuple[Agent, datetime] | None:
    """The bench's agent and the moment its facts were populated at, when the database already
    holds FACTS facts (BENCH_ASOF_REUSE=1); migrated to this tree first."""
    try:
        call_command("migrate", verbosity=0)
        if Fact.objects.count() != FACTS:
            return None
    except OperationalError:  # no such database yet: populate it
        return None
    newest = Fact.objects.order_by("-created_at").values_list("created_at", flat=True)[0]
    return Agent.objects.get(name="bench"), newest + timedelta(days=90 / FACTS)


def ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def p95(values: list[float]) -> float:
    return sorted(values)[max(int(len(values) * 0.95) - 1, 0)]


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    found = reused() if REUSE else None
    name = str(connection.settings_dict["NAME"])
    if found is None:
        name = recreate_database()
        found = populate()
    agent, now = found
    as_of = now - timedelta(days=45)
    tasks = corpus.tasks(TASKS)
    for task in tasks[:3]:  # warm the model, caches and plans
        search_memory(agent=agent, query=task, record=False)
        search_memory(agent=agent, query=task, record=False, as_of=as_of)
    print(f"{FACTS} facts in {name}; {TASKS} tasks; as_of = 45 days ago; load average {loadavg()}")
    print("median ms (p95), today and as_of interleaved:")
    runs = [
        *[
            (f"search {m}", lambda t, at, m=m: search_memory(agent=agent, query=t, mode=m, record=False, as_of=at))
            for m in MODES
        ],
        ("preamble", lambda t, at: build_preamble(agent=agent, task=t, as_of=at)),
        (
            "semantic, before",
            lambda t, at: before(search_memory, agent=agent, query=t, mode="semantic", record=False, as_of=at),
        ),
    ]
    ratios = {}
    for label, fn in runs:
        base, then = interleaved(tasks, lambda t, fn=fn: fn(t, None), lambda t, fn=fn: fn(t, as_of))
        ratios[label] = statistics.median(then) / statistics.median(base)
        print(
            f"  {label:16s} today {statistics.median(base):6.1f} ({p95(base):6.1f})"
            f"   as_of {statistics.median(then):6.1f} ({p95(then):6.1f})   ×{ratios[label]:.2f}"
        )
    print("  (semantic, before: today's search beside the as-of search with the exact scan it used before)")
    ratio = ratios["search semantic"]
    print(
        f"  as-of semantic search p50 = {ratio:.2f}× today's (target ≤ {TARGET}×: {'met' if ratio <= TARGET else 'NOT met'})"
    )
    vectors = {task: embed_text(task) for task in tasks}
    voice(agent, as_of, tasks, vectors)
    print("recall of the semantic voice against an exact scan of the same scope (per task: min, tasks at 1.0):")
    for scope in (
        voices.Scope(agent=agent),
        voices.Scope(agent=agent, as_of=as_of),
        voices.Scope(agent=agent, valid_at=as_of),
    ):
        recall(scope, tasks, vectors)
    plan = voices.explain(*voices.semantic_sql(voices.Scope(agent=agent, as_of=as_of), vectors[tasks[0]], limit=50))
    print(f"  the as-of query's plan reads both graphs: {'fact_embedding_hnsw ' in plan and PAST_GRAPH in plan}")
    write_cost(agent)
    print(f"load average at the end {loadavg()}")


def exact_voice(scope: voices.Scope, vector: list[float], *, limit: int) -> list[tuple[int, float]]:
    """The as-of semantic voice as it was before issue 38: an exact scan of the scope."""
    with voices.reader().cursor() as cursor:
        cursor.execute(*voices.semantic_exact_sql(scope, vector, limit=limit))
        return [(pk, float(similarity)) for pk, similarity in cursor.fetchall()]


def before(fn: Callable[..., object], **kwargs: object) -> object:
    """`fn` with the as-of semantic voice of before issue 38 (search as it was, in the same run)."""
    indexed, voices.semantic_then = voices.semantic_then, exact_voice
    try:
        return fn(**kwargs)
    finally:
        voices.semantic_then = indexed


def interleaved(
    tasks: list[str], today: Callable[[str], object], then: Callable[[str], object]
) -> tuple[list[float], list[float]]:
    """ms of `today` and `then` over the tasks, ROUNDS times, one after the other."""
    base, past = [], []
    for _ in range(ROUNDS):
        for task in tasks:
            base.append(ms(lambda task=task: today(task)))
            past.append(ms(lambda task=task: then(task)))
    return base, past


def voice(agent: Agent, as_of: datetime, tasks: list[str], vectors: dict[str, list[float]]) -> None:
    """The semantic voice alone (CANDIDATES neighbours, as search asks): today, as of from the
    indexes, and the exact scan the as-of voice used before issue 38, in the same run."""
    today, then = voices.Scope(agent=agent), voices.Scope(agent=agent, as_of=as_of)

    def exact(task: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(*voices.semantic_exact_sql(then, vectors[task], limit=CANDIDATES))
            cursor.fetchall()

    base, indexed = interleaved(
        tasks,
        lambda t: voices.semantic(today, vectors[t], limit=CANDIDATES),
        lambda t: voices.semantic(then, vectors[t], limit=CANDIDATES),
    )
    scans = [ms(lambda t=t: exact(t)) for t in tasks]
    scanned = 0
    for task in tasks:
        with CaptureQueriesContext(connection) as queries:
            voices.semantic(then, vectors[task], limit=CANDIDATES)
        scanned += any("+ 0, memory_fact.id LIMIT" in q["sql"] for q in queries.captured_queries)
    print(
        f"semantic voice, {CANDIDATES} neighbours, median ms (p95): today {statistics.median(base):.1f} ({p95(base):.1f});"
        f" as_of from the indexes {statistics.median(indexed):.1f} ({p95(indexed):.1f}),"
        f" ×{statistics.median(indexed) / statistics.median(base):.2f};"
        f" as_of by the exact scan (before) {statistics.median(scans):.1f} ({p95(scans):.1f});"
        f" tasks the indexes answered without the scan: {len(tasks) - scanned}/{len(tasks)}"
    )


def recall(scope: voices.Scope, tasks: list[str], vectors: dict[str, list[float]]) -> None:
    """The semantic voice's top 10 and top CANDIDATES against an exact scan of the same scope:
    overall, the worst task, and how many tasks lost nothing."""
    per_k: dict[int, list[tuple[int, int]]] = {10: [], CANDIDATES: []}
    for task in tasks:
        vector = vectors[task]
        exact = list(
            scope.facts()
            .exclude(embedding__isnull=True)
            # + 0: no HNSW index may serve the order (today's scope matches one's predicate).
            .extra(select={"d": "(embedding <=> %s::vector) + 0"}, select_params=[vector_literal(vector)])
            .order_by("d")
            .values_list("pk", flat=True)[:CANDIDATES]
        )
        for k, per_task in per_k.items():
            found = {pk for pk, _ in voices.semantic(scope, vector, limit=k)}
            per_task.append((len(set(exact[:k]) & found), len(exact[:k])))
    moments = "today" if scope.current else f"as_of={scope.as_of is not None} valid_at={scope.valid_at is not None}"
    for k, per_task in per_k.items():
        overall = sum(hit for hit, _ in per_task) / max(sum(n for _, n in per_task), 1)
        rates = [hit / n for hit, n in per_task if n]
        print(
            f"  {moments:28s} recall@{k:<3d} {overall:.4f}   worst task {min(rates, default=1.0):.2f};"
            f" tasks at 1.0: {sum(r == 1.0 for r in rates)}/{len(rates)}"
        )


def write_cost(agent: Agent) -> None:
    """ms per fact to insert WRITES embedded facts, then to move them out of the recallable set
    (challenged: into the graph of past facts), with fact_embedding_hnsw_past and without it;
    each in a transaction rolled back, alternating, twice."""
    template = list(Fact.objects.filter(embedding__isnull=False, workspace=agent.workspace).order_by("pk")[:WRITES])
    costs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(2):
        for with_past in (True, False):
            with transaction.atomic():
                if not with_past:
                    with connection.cursor() as cursor:
                        cursor.execute(f"DROP INDEX {PAST_GRAPH}")
                rows = [
                    Fact(
                        workspace_id=f.workspace_id,
                        domain_id=f.domain_id,
                        topic=f.topic,
                        content=f.content,
                        memory_type=f.memory_type,
                        veracity=f.veracity,
                        confidence=f.confidence,
                        embedding=f.embedding,
                        embedded_at=f.embedded_at,
                    )
                    for f in template
                ]
                started = time.perf_counter()
                created = Fact.objects.bulk_create(rows)
                inserted = time.perf_counter()
                Fact.objects.filter(pk__in=[f.pk for f in created]).update(status="challenged")
                moved = time.perf_counter()
                costs[with_past].append(((inserted - started) * 1000 / WRITES, (moved - inserted) * 1000 / WRITES))
                transaction.set_rollback(True)
    for with_past in (True, False):
        insert = statistics.median(c[0] for c in costs[with_past])
        move = statistics.median(c[1] for c in costs[with_past])
        label = "with the graph of past facts" if with_past else "without it (before)"
        print(f"write cost, {WRITES} facts, {label:30s}: insert {insert:.2f} ms/fact, challenge {move:.2f} ms/fact")


if __name__ == "__main__":
    main()
