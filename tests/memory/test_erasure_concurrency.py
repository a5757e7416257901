"""Erasure races (issue 21): real threads, real PostgreSQL, rows locked."""

import pytest

from memory.actors import Actor
from memory.embeddings import embed_meaning
from memory.errors import EngramError
from memory.models import AuditEvent, Fact, FactMention
from memory.services import erasure
from memory.services.erasure import NothingToErase, parse_selection, select_subject
from memory.services.facts import FactInput, propose_fact
from tests.races import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_admins_erasing_the_same_fact_leave_one_tombstone(world):
    fact = Fact.objects.create(
        workspace=world.workspace,
        domain=world.architecture,
        topic="t",
        content="Hal's code is 1234.",
        confidence=0.7,
        memory_type="decision",
    )
    plans = [select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [fact.pk]})) for _ in range(2)]
    by = Actor.of_user(world.admin_user)
    results, errors = race(*[lambda p=p: erasure.erase(plan=p, reason="r", by=by) for p in plans])
    assert len(results) == 1 and len(errors) == 1 and isinstance(errors[0], NothingToErase)
    assert AuditEvent.objects.filter(verb="subject.erased").count() == 1


def test_a_re_mention_racing_the_erasure_leaves_no_trace_of_the_text(world):
    content = "Ivy's locker combination is 31-07-22."
    vector = embed_meaning("lockers", content)
    data = FactInput(topic="lockers", content=content, memory_type="decision")
    fact = propose_fact(domain=world.architecture, data=data, by=Actor.of_agent(world.coder), embedding=vector).fact
    plan = select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [fact.pk]}))
    results, errors = race(
        lambda: erasure.erase(plan=plan, reason="r", by=Actor.of_user(world.admin_user)),
        lambda: propose_fact(domain=world.architecture, data=data, by=Actor.of_agent(world.coder2), embedding=vector),
    )
    assert all(isinstance(e, EngramError) for e in errors), errors
    assert any(getattr(r, "verb", "") == "subject.erased" for r in results)
    assert not Fact.objects.filter(pk=fact.pk).exists()
    assert not FactMention.objects.filter(text=content).exists()
    # the proposal either ran first (its mention erased with the fact) or after (a new fact, written after)
    assert Fact.objects.filter(content=content).count() <= 1
