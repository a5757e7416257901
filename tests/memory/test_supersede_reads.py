"""A supersession is read as a proposal would be (issue 36): against the domain's other live facts,
under the domain's lock, so a concurrent proposal of the same text ends in one live fact."""

import pytest

from memory.actors import Actor
from memory.models import AuditEvent, Fact, FactMention
from memory.services.facts import FactInput, propose_fact, supersede_fact
from tests.races import race

TOPIC = "deploys"
OLD = "The deploy runbook lives in the ops wiki under Releases."
NEW = "Production deploys happen on Thursdays after the standup."


def _propose(world, content, *, by=None, topic=TOPIC):
    data = FactInput(topic=topic, content=content, memory_type="decision")
    return propose_fact(domain=world.architecture, data=data, by=by or Actor.of_agent(world.coder)).fact


def _live(content):
    return Fact.objects.filter(content=content, superseded_by__isnull=True, status="active")


@pytest.mark.django_db
def test_a_supersession_that_restates_a_third_live_fact_becomes_its_mention(world):
    old = _propose(world, OLD)
    third = _propose(world, NEW, by=Actor.of_agent(world.coder2), topic="release-days")
    assert _live(NEW).count() == 1 and third.is_live
    successor = supersede_fact(fact=old, by=Actor.of_user(world.admin_user), content=NEW, reason="moved")
    assert successor.pk == third.pk  # no duplicate: the third fact holds the text and gains a mention
    assert _live(NEW).count() == 1
    assert Fact.objects.get(pk=old.pk).superseded_by_id == third.pk
    assert FactMention.objects.filter(fact=third, text=NEW).exists()
    event = AuditEvent.objects.get(verb="fact.superseded", target_id=old.pk)
    assert event.detail["successor"] == third.pk and event.detail["outcome"] == "re_mentioned"


@pytest.mark.django_db
def test_a_plain_supersession_still_writes_a_new_version(world):
    old = _propose(world, OLD)
    successor = supersede_fact(fact=old, by=Actor.of_user(world.admin_user), content=NEW, reason="moved")
    assert successor.pk != old.pk and successor.content == NEW and successor.is_live
    assert successor.source == "supersede" and successor.human_edited and successor.veracity == "human_stated"
    assert successor.embedding is not None  # embedded before the transaction, not later
    assert Fact.objects.get(pk=old.pk).superseded_by_id == successor.pk


@pytest.mark.django_db(transaction=True)
def test_a_supersession_racing_a_proposal_of_the_same_text_leaves_one_live_fact(world):
    for _ in range(3):  # each round, whichever thread wins the domain's lock, one live fact holds NEW
        Fact.objects.filter(domain=world.architecture).update(status="archived")
        old = _propose(world, OLD)
        _results, errors = race(
            lambda old=old: supersede_fact(fact=old, by=Actor.of_user(world.admin_user), content=NEW, reason="r"),
            lambda: _propose(world, NEW, by=Actor.of_agent(world.coder2)),
        )
        assert not errors, errors
        assert _live(NEW).count() == 1
        assert not Fact.objects.get(pk=old.pk).is_live
        Fact.objects.filter(content=NEW).update(status="archived")
