"""Semantic and hybrid rank every candidate from the few columns ranking reads (rank_rows, brought
by the voices' own statements) and load only the hits whole (issue 38): the same answer as when
every candidate was loaded, at a fraction of the rows (real model, real PostgreSQL)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memory.models import Fact
from memory.search import hybrid, rank_rows, voices
from memory.services.embedding import embed_missing
from tests.factories import FactFactory


def _facts(world, n=12):
    """n facts on one subject, each last mentioned at its own moment (microseconds included), two
    of them at the same moment (the id breaks the tie)."""
    base = timezone.now() - timedelta(days=40)
    facts = []
    for i in range(n):
        when = base + timedelta(days=i * 3, microseconds=123_457 * (i + 1))
        if i == 5:
            when = facts[4].last_mentioned_at
        facts.append(
            FactFactory(
                domain=world.architecture,
                topic=f"billing-{i}",
                content=f"The billing service retries invoice export job {i} three times before paging.",
                memory_type="decision",
                observed_at=when,
                last_mentioned_at=when,
            )
        )
    embed_missing()
    return facts


def test_a_rank_row_holds_the_facts_own_values_to_the_microsecond(world):
    fact = _facts(world, n=3)[1]
    Fact.objects.filter(pk=fact.pk).update(validated_by="human", recall_count=4, veracity="human_stated")
    fact.refresh_from_db()
    row = rank_rows.load(connection, [fact.pk])[fact.pk]
    assert rank_rows.moment(row.last_mentioned) == fact.last_mentioned_at
    assert rank_rows.moment(row.observed) == fact.observed_at
    assert rank_rows.moment(row.created) == fact.created_at
    assert (row.memory_type, row.confidence, row.recall_count, row.veracity) == (
        fact.memory_type,
        fact.confidence,
        4,
        "human_stated",
    )
    assert row.vouched is True and row.domain_id == fact.domain_id


def test_a_fact_edited_by_a_person_is_vouched_for_and_a_plain_one_is_not(world):
    plain, edited = _facts(world, n=2)
    Fact.objects.filter(pk=edited.pk).update(human_edited=True)
    rows = rank_rows.load(connection, [plain.pk, edited.pk])
    assert (bool(rows[plain.pk].vouched), bool(rows[edited.pk].vouched)) == (False, True)


def test_the_recency_voice_read_from_the_rows_is_the_sql_voice(world):
    facts = _facts(world)
    scope = voices.Scope(agent=world.coder)
    pool = [f.pk for f in facts]
    rows = rank_rows.load(connection, pool)
    from_rows = hybrid._recency(scope, pool, rows)
    assert [pk for pk, _ in from_rows] == [pk for pk, _ in voices.temporal(scope, pool, limit=hybrid.CANDIDATES)]
    # the tie (facts 4 and 5, one moment) is broken by id, newest id first, as the SQL does
    assert [pk for pk, _ in from_rows].index(facts[5].pk) < [pk for pk, _ in from_rows].index(facts[4].pk)


def test_an_as_of_scope_reads_recency_from_sql(world, monkeypatch):
    facts = _facts(world, n=3)
    calls = []
    monkeypatch.setattr(voices, "temporal", lambda scope, pool, limit: calls.append(pool) or [])
    scope = voices.Scope(agent=world.coder, as_of=timezone.now())
    hybrid._recency(scope, [f.pk for f in facts], rank_rows.load(connection, [f.pk for f in facts]))
    assert calls == [[f.pk for f in facts]]


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_only_the_hits_are_loaded_whole(world, monkeypatch, mode):
    _facts(world)
    loads, rank_loads = [], []
    real_hits, real_rows = voices.hits_by_id, rank_rows.load
    monkeypatch.setattr(voices, "hits_by_id", lambda ids, **kw: loads.append(list(ids)) or real_hits(ids, **kw))
    monkeypatch.setattr(rank_rows, "load", lambda db, ids: rank_loads.append(list(ids)) or real_rows(db, ids))
    result = hybrid.search_memory(agent=world.coder, query="billing invoice export retries", mode=mode, limit=3)
    assert len(result.hits) == 3
    assert loads == [[h.fact.pk for h in result.hits]]
    # every candidate came with its rank row from the voice that found it: none read again
    assert rank_loads == [[]]


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_the_answer_is_the_one_every_candidate_loaded_whole_gave(world, mode):
    """The order and scores from the rank rows equal those from the whole rows (_candidates)."""
    _facts(world)
    query = "billing invoice export retries"
    result = hybrid.search_memory(agent=world.coder, query=query, mode=mode, limit=12, record=False)
    ids = [h.fact.pk for h in result.hits]
    whole = hybrid._candidates(voices.hits_by_id(ids))
    rows = rank_rows.load(connection, ids)
    light = hybrid._ranked_candidates(rows, ids, None)
    for pk in ids:
        a, b = whole[pk], light[pk]
        assert (a.memory_type, a.last_mentioned_at, a.confidence, a.observed_at, a.authority, a.recall_count) == (
            b.memory_type,
            b.last_mentioned_at,
            b.confidence,
            b.observed_at,
            b.authority,
            b.recall_count,
        )


def test_the_repo_boost_reads_the_candidates_domain(world):
    outside = _facts(world, n=1)[0]
    inside = FactFactory(domain=world.repo_context, topic="web-build", content="The web repo builds with pnpm.")
    rows = rank_rows.load(connection, [outside.pk, inside.pk])
    light = hybrid._ranked_candidates(rows, [outside.pk, inside.pk], "web")
    assert (light[outside.pk].repo_slug, light[inside.pk].repo_slug) == (None, "web")
    assert hybrid._repo_boost(light[inside.pk], "web") > hybrid._repo_boost(light[outside.pk], "web") == 1.0
