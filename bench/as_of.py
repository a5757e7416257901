"""As-of recall (issue 21): the cost of `as_of` next to today's search and preamble, in-process.

In its own database (ENGRAM_DB_NAME=engram_bench_asof, recreated): N generated facts (default
1000) recorded over 90 days; a third superseded later, a tenth challenged later (with their
audit events). Then, for each query, the median over the tasks of: today's search in each mode
and the preamble, the same as of 45 days ago, and whether every fact the exact answer has
(a sequential scan of the facts believed then) is found by the as-of semantic voice.

    .venv/bin/python -m bench.as_of            # BENCH_ASOF_FACTS=1000 BENCH_ASOF_TASKS=40
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_bench_asof")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ENGRAM_RECALL_MODE", "sync")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from agents.services import create_agent  # noqa: E402
from bench import corpus  # noqa: E402
from bench.common import recreate_database  # noqa: E402
from memory.actors import Actor  # noqa: E402
from memory.embeddings import embed_text, embed_texts, vector_literal  # noqa: E402
from memory.models import AuditEvent, Fact, MemoryDomain  # noqa: E402
from memory.search import voices  # noqa: E402
from memory.search.hybrid import MODES, search_memory  # noqa: E402
from memory.search.preamble import build_preamble  # noqa: E402
from memory.services.tenancy import create_domain, get_or_create_role, get_or_create_workspace  # noqa: E402

FACTS = int(os.environ.get("BENCH_ASOF_FACTS", "1000"))
TASKS = int(os.environ.get("BENCH_ASOF_TASKS", "40"))
ROUNDS = int(os.environ.get("BENCH_ASOF_ROUNDS", "3"))


def populate() -> tuple[object, object]:
    system = Actor.system("bench")
    workspace = get_or_create_workspace(slug="asof", name="As-of bench", by=system)
    role = get_or_create_role(workspace=workspace, name="coder", by=system)
    domains: dict[str, MemoryDomain] = {}
    generated = list(corpus.facts(FACTS))
    for g in generated:
        if g.domain not in domains:
            domains[g.domain] = create_domain(workspace=workspace, name=g.domain, by=system)
    vectors = embed_texts([f"{g.topic}: {g.content}" for g in generated])
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
    facts = Fact.objects.bulk_create(rows)
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
        cursor.execute("ANALYZE memory_fact; ANALYZE memory_auditevent")
    agent, _ = create_agent(workspace=workspace, name="bench", role=role, by=system)
    return agent, now


def ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    name = recreate_database()
    agent, now = populate()
    as_of = now - timedelta(days=45)
    tasks = corpus.tasks(TASKS)
    for task in tasks[:3]:  # warm the model, caches and plans
        search_memory(agent=agent, query=task, record=False)
        search_memory(agent=agent, query=task, record=False, as_of=as_of)
    print(f"{FACTS} facts in {name}; {TASKS} tasks; as_of = 45 days ago; median ms (p95), today and as_of interleaved")
    runs = [
        *[
            (f"search {m}", lambda t, at, m=m: search_memory(agent=agent, query=t, mode=m, record=False, as_of=at))
            for m in MODES
        ],
        ("preamble", lambda t, at: build_preamble(agent=agent, task=t, as_of=at)),
    ]
    for label, fn in runs:
        base, then = [], []
        for _ in range(ROUNDS):
            for task in tasks:
                base.append(ms(lambda task=task, fn=fn: fn(task, None)))
                then.append(ms(lambda task=task, fn=fn: fn(task, as_of)))
        p95 = lambda xs: sorted(xs)[int(len(xs) * 0.95) - 1]  # noqa: E731
        print(
            f"  {label:16s} today {statistics.median(base):6.1f} ({p95(base):6.1f})"
            f"   as_of {statistics.median(then):6.1f} ({p95(then):6.1f})"
        )
    # Recall of the as-of semantic voice against an exact scan of the facts believed then.
    for scope in (voices.Scope(agent=agent, as_of=as_of), voices.Scope(agent=agent, valid_at=as_of)):
        recall(scope, tasks)


def recall(scope: voices.Scope, tasks: list[str]) -> None:
    """The as-of semantic voice's top 10 against an exact scan of the same scope."""
    missed = total = 0
    for task in tasks:
        vector = embed_text(task)
        found = {pk for pk, _ in voices.semantic(scope, vector, limit=10)}
        exact = list(
            scope.facts()
            .exclude(embedding__isnull=True)
            .extra(select={"d": "embedding <=> %s::vector"}, select_params=[vector_literal(vector)])
            .order_by("d")
            .values_list("pk", flat=True)[:10]
        )
        total += len(exact)
        missed += len(set(exact) - found)
    plan = voices.explain(*voices.semantic_sql(scope, embed_text(tasks[0]), limit=50))
    moments = f"as_of={scope.as_of is not None} valid_at={scope.valid_at is not None}"
    print(
        f"  {moments}: semantic recall@10 vs exact {1 - missed / max(total, 1):.3f}; HNSW {'fact_embedding_hnsw' in plan}"
    )


if __name__ == "__main__":
    main()
