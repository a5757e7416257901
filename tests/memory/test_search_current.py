"""What is current (issue 35): age runs from when a statement was said, and of two live statements of
the same thing the later ranks first unless the earlier carries more authority (real model)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.actors import Actor
from memory.models import Conflict, Fact
from memory.search.hybrid import search_memory
from memory.services.conflicts import Said, apply_same
from memory.services.embedding import embed_missing
from memory.services.facts import FactInput, propose_fact
from tests.factories import FactFactory


def said(world, content, *, days, topic="tomas", **kw):
    """A fact stated `days` ago and written today (imported history)."""
    when = timezone.now() - timedelta(days=days)
    return FactFactory(
        domain=world.architecture,
        topic=topic,
        content=content,
        memory_type="observation",
        observed_at=when,
        last_mentioned_at=when,
        **kw,
    )


def ids(result):
    return [h.fact.pk for h in result.hits]


def asked(world, existing, proposed):
    """The write path's open question between two live facts it could not settle."""
    return Conflict.objects.create(
        workspace=world.workspace,
        domain=world.architecture,
        topic=existing.topic,
        existing=existing,
        proposed=proposed,
        status=Conflict.Status.OPEN,
        resolution="",
        similarity=0.6,
    )


def _job_change(world, **earlier):
    old = said(world, "Tomás works at Allied Insurance in Cork, answering claims calls all day.", days=300, **earlier)
    new = said(world, "Tomás took the QA tester offer from Ravenlight Games and started there on Monday.", days=30)
    for i, text in enumerate(
        [
            "Tomás plays five-a-side football on Thursdays.",
            "Niamh is training for the Limerick half marathon.",
            "The flat in Cork has a damp problem in the bathroom.",
        ]
    ):
        said(world, text, days=100 + i, topic=f"other-{i}")
    embed_missing()
    return old, new


QUESTION = "Where does Tomás work?"


def test_without_a_link_the_better_match_leads(world):
    # The situation current first is for: the earlier statement matches the question better.
    old, new = _job_change(world)
    assert ids(search_memory(agent=world.coder, query=QUESTION, limit=5))[:2] == [old.pk, new.pk]


def test_the_later_of_two_statements_the_write_path_asked_about_ranks_first(world):
    old, new = _job_change(world)
    asked(world, old, new)
    assert ids(search_memory(agent=world.coder, query=QUESTION, limit=5))[:2] == [new.pk, old.pk]


@pytest.mark.parametrize(
    "authority", [{"validated_by": "human"}, {"human_edited": True}, {"veracity": "human_stated"}], ids=str
)
def test_an_earlier_statement_with_more_authority_keeps_its_place(world, authority):
    old, new = _job_change(world, **authority)
    asked(world, old, new)
    assert ids(search_memory(agent=world.coder, query=QUESTION, limit=5))[:2] == [old.pk, new.pk]


def test_a_later_statement_that_does_not_answer_the_question_is_not_lifted(world):
    old, _new = _job_change(world)
    unrelated = said(world, "Niamh moved into a house in Salthill with two friends.", days=10, topic="niamh")
    embed_missing()
    before = ids(search_memory(agent=world.coder, query=QUESTION, limit=5, record=False))
    asked(world, old, unrelated)
    after = ids(search_memory(agent=world.coder, query=QUESTION, limit=5, record=False))
    assert old.pk in after and after == before


def test_a_proposal_about_the_past_is_as_old_as_its_statement(world):
    when = timezone.now() - timedelta(days=400)
    result = propose_fact(
        domain=world.architecture,
        data=FactInput(
            topic="history",
            content="The old billing system ran on one MySQL host.",
            memory_type="observation",
            observed_at=when,
        ),
        by=Actor.of_agent(world.coder),
    )
    fact = Fact.objects.get(pk=result.fact.pk)
    assert fact.last_mentioned_at == when and fact.created_at > when


def test_an_old_restatement_does_not_freshen_a_fact(world):
    fact = said(world, "The staging database is reset every Sunday night.", days=200, topic="staging")
    before = fact.last_mentioned_at
    by = Actor.of_agent(world.coder)
    old_words = Said("Staging gets wiped on Sundays.", "agent_inferred", timezone.now() - timedelta(days=300))
    apply_same(fact=fact, said=old_words, by=by, similarity=0.9, reason="restates")
    assert Fact.objects.get(pk=fact.pk).last_mentioned_at == before
    fresh = Said("Staging is reset each Sunday.", "agent_inferred", timezone.now() - timedelta(days=5))
    apply_same(fact=fact, said=fresh, by=by, similarity=0.9, reason="restates")
    assert Fact.objects.get(pk=fact.pk).last_mentioned_at == fresh.observed_at


def test_a_year_of_age_does_not_outweigh_relevance_in_keyword_search(world):
    # Decay orders near-equals; raw, 400 days of an observation's age was a factor of 10^-6.
    match = said(world, "The ledger reconciliation job runs nightly at 02:00.", days=400, topic="ledger")
    glance = said(world, "The ledger export lands in the finance bucket.", days=1, topic="export")
    embed_missing()
    result = search_memory(agent=world.coder, query="ledger reconciliation nightly", mode="keyword", limit=2)
    assert ids(result) == [match.pk, glance.pk]
