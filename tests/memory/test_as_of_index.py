"""As-of semantic recall is served by the HNSW indexes (issue 38, point 4): the graph of the facts
recallable now and the graph of every other embedded fact, overfetched and filtered by the
moment, with the exact scan only when the filter leaves too few."""

from __future__ import annotations

import math
import re
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.actors import Actor
from memory.embeddings import embed_text
from memory.models import Fact
from memory.search import voices
from memory.services.embedding import embed_missing
from memory.services.facts import FactInput, propose_fact, supersede_fact
from tests.factories import FactFactory

NOW_GRAPH = re.compile(r"Index Scan using fact_embedding_hnsw on memory_fact")
PAST_GRAPH = re.compile(r"Index Scan using fact_embedding_hnsw_past on memory_fact")


def _unit(angle_degrees: float) -> list[float]:
    """A unit vector at `angle_degrees` from the first axis, in the plane of the first two."""
    angle = math.radians(angle_degrees)
    return [math.cos(angle), math.sin(angle)] + [0.0] * 382


def _plan_without_scans(scope: voices.Scope) -> str:
    """EXPLAIN of the scope's semantic query with sequential scans and sorts priced out: on a
    small table the nearest facts of a graph then come only from an index whose predicate the
    query proves (at scale the planner picks the graphs by itself: bench/as_of.py prints it)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        sql, params = voices.semantic_sql(scope, _unit(0), limit=10)
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_as_of_semantic_query_reads_both_graphs_from_their_indexes(world):
    live = FactFactory(domain=world.architecture, embedding=_unit(10))
    FactFactory(domain=world.architecture, embedding=_unit(20), superseded_by=live, superseded_at=timezone.now())
    FactFactory(domain=world.architecture, embedding=_unit(30), status="challenged")

    plan = _plan_without_scans(voices.Scope(agent=world.coder, as_of=timezone.now()))

    assert NOW_GRAPH.search(plan) and PAST_GRAPH.search(plan), plan
    assert "Seq Scan on memory_fact" not in plan, plan


def test_valid_at_semantic_query_reads_only_the_graph_of_now(world):
    FactFactory(domain=world.architecture, embedding=_unit(10))

    plan = _plan_without_scans(voices.Scope(agent=world.coder, valid_at=timezone.now()))

    assert NOW_GRAPH.search(plan) and not PAST_GRAPH.search(plan), plan
    assert "Seq Scan on memory_fact" not in plan, plan


def _vacuumed() -> None:
    """Clear the dead entries earlier tests' rolled-back rows left in the HNSW graphs: a scan of
    `reach` entries skips them, and a test of which path answered must not depend on them."""
    with connection.cursor() as cursor:
        cursor.execute("VACUUM memory_fact")


def _as_of_scans(queries: CaptureQueriesContext) -> tuple[int, int]:
    """(queries of the graphs' candidates, exact scans) among the captured queries."""
    executed = [q["sql"] for q in queries.captured_queries]
    candidates = "memory_fact.embedding IS NOT NULL ORDER BY memory_fact.embedding <=>"
    scans = "+ 0, memory_fact.id LIMIT"
    return sum(candidates in sql for sql in executed), sum(scans in sql for sql in executed)


@pytest.mark.django_db(transaction=True)
def test_a_fact_superseded_after_as_of_is_found_as_of_then_from_the_index(world):
    coder = Actor.of_agent(world.coder)
    data = FactInput(topic="queue-broker", content="The job queue broker is RabbitMQ.", memory_type="decision")
    old = propose_fact(domain=world.architecture, data=data, by=coder).fact
    then = timezone.now()
    new = supersede_fact(fact=old, by=coder, content="The job queue broker is Redis Streams.")
    embed_missing()
    _vacuumed()
    vector = embed_text("Is RabbitMQ the job queue broker?")

    with CaptureQueriesContext(connection) as queries:
        found = voices.semantic(voices.Scope(agent=world.coder, as_of=then), vector, limit=1)

    assert [pk for pk, _ in found] == [old.pk]
    assert _as_of_scans(queries) == (1, 0)  # from fact_embedding_hnsw_past, no scan
    assert [pk for pk, _ in voices.semantic(voices.Scope(agent=world.coder), vector, limit=5)] == [new.pk]
    # With more asked than the scope holds, the exact scan answers (no index can say "that is all").
    assert [pk for pk, _ in voices.semantic(voices.Scope(agent=world.coder, as_of=then), vector, limit=5)] == [old.pk]


@pytest.fixture
def crowded_past(world, monkeypatch):
    """Reaches of 6 then 8 neighbours (pgvector's ceiling stood in for), 12 facts recorded today
    nearest the query and 4 recorded a month ago farther away: as of two weeks ago the filter
    keeps none of the candidates either reach brings."""
    monkeypatch.setattr(voices, "EF_SEARCH", 4)
    monkeypatch.setattr(voices, "MAX_EF_SEARCH", 8)
    month_ago = timezone.now() - timedelta(days=30)
    for i in range(12):
        FactFactory(domain=world.architecture, embedding=_unit(1 + i))
    old = [
        FactFactory(domain=world.architecture, embedding=_unit(angle), created_at=month_ago)
        for angle in (75, 60, 80, 65)
    ]
    return voices.Scope(agent=world.coder, as_of=month_ago + timedelta(days=16)), old


def test_as_of_falls_back_to_the_exact_answer_when_the_filter_removes_most_candidates(world, crowded_past):
    scope, old = crowded_past
    assert voices._reaches(3) == [6, 8]

    with CaptureQueriesContext(connection) as queries:
        found = voices.semantic(scope, _unit(0), limit=3)

    by_angle = {75: old[0].pk, 60: old[1].pk, 80: old[2].pk, 65: old[3].pk}
    assert [pk for pk, _ in found] == [by_angle[60], by_angle[65], by_angle[75]]
    assert found[0][1] == pytest.approx(math.cos(math.radians(60)), abs=1e-5)
    assert _as_of_scans(queries) == (1, 1)  # none of the scope in reach: no wider one could do, the scan


@pytest.mark.django_db(transaction=True)
def test_as_of_widens_the_reach_when_a_wider_one_could_answer(world, crowded_past, monkeypatch):
    scope, old = crowded_past
    monkeypatch.setattr(voices, "MAX_EF_SEARCH", 32)
    near = FactFactory(domain=world.architecture, embedding=_unit(3.5), created_at=old[0].created_at)
    _vacuumed()

    with CaptureQueriesContext(connection) as queries:
        found = voices.semantic(scope, _unit(0), limit=3)

    assert voices._reaches(3) == [6, 12, 24, 32]
    assert [pk for pk, _ in found] == [near.pk, old[1].pk, old[3].pk]  # 3.5°, 60°, 65°
    # Reach 6 found one fact of then: 24 could find three at that rate, so 12 is skipped; no scan.
    assert _as_of_scans(queries) == (2, 0)


def test_dead_row_versions_in_a_graph_never_cost_a_nearer_fact(world, crowded_past, monkeypatch):
    # Re-mentioning facts writes new row versions: until vacuum, the old ones still fill the
    # graph's nearest entries, so a scan of 16 returns fewer rows though the graph holds more.
    scope, old = crowded_past
    monkeypatch.setattr(voices, "MAX_EF_SEARCH", 16)
    Fact.objects.filter(pk__in=[f.pk for f in old[:2]]).update(last_mentioned_at=timezone.now() - timedelta(days=29))

    found = voices.semantic(scope, _unit(0), limit=3)

    assert [pk for pk, _ in found] == [old[1].pk, old[3].pk, old[0].pk]  # 60°, 65°, 75°: the exact answer
