"""Races on one topic: locks keep one live head and exact counts (real threads, real PostgreSQL)."""

import pytest

from memory.actors import Actor
from memory.embeddings import embed_meaning
from memory.errors import FactNotLive
from memory.models import Fact
from memory.services.facts import FactInput, propose_fact, supersede_fact
from tests.races import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_eight_threads_proposing_the_same_fact_leave_one_live_fact_mentioned_eight_times(world):
    content = "Production deploys happen on Tuesdays."
    vector = embed_meaning("deploys", content)  # the model is not what this test races
    data = FactInput(topic="deploys", content=content, memory_type="convention")
    results, errors = race(
        *[lambda: propose_fact(domain=world.architecture, data=data, by=Actor.of_agent(world.coder), embedding=vector)]
        * 8
    )
    assert errors == []
    assert sorted(r.outcome for r in results) == ["created"] + ["re_mentioned"] * 7
    live = Fact.objects.filter(domain=world.architecture, topic="deploys").live()
    assert live.count() == 1
    assert live.get().mention_count == 8


def test_eight_threads_superseding_one_fact_leave_exactly_one_successor(world):
    original = propose_fact(
        domain=world.architecture,
        by=Actor.of_agent(world.coder),
        data=FactInput(topic="review", content="Code review needs two approvals.", memory_type="convention"),
    ).fact
    results, errors = race(
        *[
            lambda i=i: supersede_fact(
                fact=original, by=Actor.of_agent(world.coder), content=f"Code review needs {i + 3} approvals."
            )
            for i in range(8)
        ]
    )
    assert len(results) == 1
    assert len(errors) == 7 and all(isinstance(e, FactNotLive) for e in errors)
    original.refresh_from_db()
    assert original.superseded_by_id == results[0].pk
    assert Fact.objects.filter(topic="review").count() == 2
    assert Fact.objects.filter(topic="review", superseded_by__isnull=True).count() == 1
