"""A candidate that restates a live fact (issue 18): the person approving it chooses, before the
promotion, to keep the live wording (a re-mention) or replace it with the new wording (the old
fact superseded by the rule `human`, through memory.services.conflicts). An edit by a person
makes the promoted fact `human_edited`."""

from __future__ import annotations

import pytest

from memory.actors import Actor
from memory.errors import InvalidInput
from memory.models import AuditEvent, Conflict, Fact, FactMention
from memory.services.facts import FactInput, Outcome, propose_fact
from memory.services.promotion import decide_candidate, parse_candidate_document, restated_fact, submit_candidate

pytestmark = pytest.mark.usefixtures("reviewer_reviews_world_domains")

OLD = "Run the tests with make test before pushing."
NEW = "Before pushing, run the tests with make test."


def setup(world, text: str = NEW, cid: str = "c-1"):
    old = propose_fact(
        domain=world.architecture,
        by=Actor.of_agent(world.coder),
        data=FactInput(topic="testing", content=OLD, memory_type="procedure"),
    ).fact
    document = parse_candidate_document(
        {
            "candidate_id": cid,
            "failure_class": "agent_failure",
            "proposed_memory": text,
            "source_action_ids": ["a-1"],
            "scope": {"applies_to": ["web"], "does_not_apply_to": ["mobile"]},
            "requires_human_review": True,
        }
    )
    candidate, _ = submit_candidate(
        domain=world.architecture, topic="testing", document=document, by=Actor.of_agent(world.coder)
    )
    return old, candidate


def test_restated_fact_names_the_live_fact_the_rule_restates(world):
    old, candidate = setup(world)
    found = restated_fact(candidate)
    assert found is not None and found[0].pk == old.pk
    assert restated_fact(candidate, "Deploys happen on Fridays after the standup.") is None


def test_keep_re_mentions_the_live_fact_and_leaves_its_wording(world):
    old, candidate = setup(world)
    decision = decide_candidate(
        candidate=candidate, by=Actor.of_user(world.reviewer), action="approve", on_restatement="keep"
    )
    assert decision.outcome == Outcome.RE_MENTIONED and decision.fact_id == old.pk
    old.refresh_from_db()
    assert old.content == OLD and old.superseded_by_id is None and old.mention_count == 2
    assert FactMention.objects.filter(fact=old, text=NEW).exists()


def test_replace_supersedes_the_live_fact_by_the_rule_human(world):
    old, candidate = setup(world)
    decision = decide_candidate(
        candidate=candidate, by=Actor.of_user(world.reviewer), action="approve", on_restatement="replace"
    )
    assert decision.outcome == Outcome.CONFLICT_WON
    new = Fact.objects.get(pk=decision.fact_id)
    old.refresh_from_db()
    assert new.content == NEW and old.superseded_by_id == new.pk
    conflict = Conflict.objects.get(existing=old, proposed=new)
    assert (conflict.rule, conflict.winner_id, conflict.loser_id) == ("human", new.pk, old.pk)
    assert conflict.decided_by == world.reviewer and conflict.reviewed_at is not None  # not queued for review
    assert old.status == "active"  # superseded, not challenged: a reviewer just decided it
    assert AuditEvent.objects.filter(verb="fact.conflict", target_id=conflict.pk).exists()


def test_replace_on_a_text_that_restates_nothing_is_a_plain_promotion(world):
    _old, candidate = setup(world, text="Deploys happen on Fridays after the standup.", cid="c-2")
    decision = decide_candidate(
        candidate=candidate, by=Actor.of_user(world.reviewer), action="approve", on_restatement="replace"
    )
    assert decision.outcome == Outcome.CREATED


def test_an_unknown_restatement_choice_is_refused(world):
    _old, candidate = setup(world)
    with pytest.raises(InvalidInput):
        decide_candidate(candidate=candidate, by=Actor.of_user(world.reviewer), action="approve", on_restatement="x")


def test_edit_and_approve_makes_the_fact_human_edited(world):
    _old, candidate = setup(world, text="Deploys happen on Fridays.", cid="c-3")
    decision = decide_candidate(
        candidate=candidate,
        by=Actor.of_user(world.reviewer),
        action="edit_approve",
        edited_text="Deploys happen on Fridays after the standup.",
    )
    fact = Fact.objects.get(pk=decision.fact_id)
    assert fact.content == "Deploys happen on Fridays after the standup." and fact.human_edited is True
