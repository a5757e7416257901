"""Completing a held candidate (issue 18): a person adds the scope, anti-scope or evidence refs its
gates miss; the gates are computed again, nothing else moves, and no gate that needs a replay by
someone other than the submitter (or a person's approval) is passed by it."""

from __future__ import annotations

import pytest

from memory.actors import Actor
from memory.errors import InsufficientPermission, InvalidInput
from memory.models import AuditEvent, Candidate, PromotionDecision
from memory.services.promotion import (
    CandidateDecided,
    complete_candidate,
    deny,
    promote,
)
from tests.memory.test_services_promotion import gates, reload, replay, submit

pytestmark = pytest.mark.usefixtures("reviewer_reviews_world_domains")


def held_without_scope(world, **overrides):
    candidate = submit(world, scope={"applies_to": ["public_api"]}, **overrides)
    assert candidate.promotion_status == "held"
    return candidate


def test_adding_the_missing_anti_scope_releases_a_held_candidate_and_is_audited(world):
    candidate = held_without_scope(world)
    assert gates(candidate)["scope"] == "failed"
    complete_candidate(
        candidate=candidate,
        by=Actor.of_user(world.reviewer),
        does_not_apply_to=["internal_refactor", " internal_refactor ", "docs"],
        note="from the run's diff",
    )
    fresh = reload(candidate)
    assert fresh.does_not_apply_to == ["internal_refactor", "docs"]
    assert fresh.applies_to == ["public_api"]  # additions only: the agent's scope is kept
    assert fresh.promotion_status == "candidate"
    assert gates(fresh)["scope"] == "passed"
    event = AuditEvent.objects.get(verb="candidate.completed", target_id=candidate.pk)
    assert event.detail["added"] == {"does_not_apply_to": ["internal_refactor", "docs"]}
    assert event.detail["note"] == "from the run's diff"
    assert event.detail["promotion_status"] == "candidate"
    assert "scope" not in event.detail["failing"] and "evidence" in event.detail["failing"]


def test_adding_evidence_refs_passes_the_traceability_gate(world):
    candidate = submit(world, source_action_ids=[], evidence_refs=[])
    assert candidate.promotion_status == "held" and gates(candidate)["traceability"] == "failed"
    complete_candidate(candidate=candidate, by=Actor.of_user(world.reviewer), evidence_refs=["ci:4711"])
    fresh = reload(candidate)
    assert fresh.evidence_refs == ["ci:4711"] and fresh.promotion_status == "candidate"
    assert gates(fresh)["traceability"] == "passed"


def test_a_completion_is_not_evidence_and_the_submitters_own_replay_still_does_not_count(world):
    candidate = held_without_scope(world)
    replay(world, candidate, passed=True, by=Actor.of_agent(world.coder))  # the submitter itself
    complete_candidate(candidate=candidate, by=Actor.of_user(world.reviewer), does_not_apply_to=["docs"])
    after = gates(candidate)
    assert after["scope"] == "passed"
    assert after["evidence"] == "pending" and after["auto_promotion"] == "pending"
    fresh = reload(candidate)
    assert fresh.human_approved_at is None and fresh.requires_human_review is False
    decision = promote(candidate=fresh, by=Actor.of_agent(world.coder), write=True, auto=True)
    assert decision.decision == PromotionDecision.Kind.REFUSED
    assert "does not count" in decision.scorecard["evidence"]["reason"]
    assert reload(candidate).fact_id is None


def test_a_completed_candidate_with_a_verifiers_replay_promotes(world):
    candidate = held_without_scope(world)
    replay(world, candidate, passed=True)  # a verifier agent other than the submitter
    assert promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True).fact_id is None
    complete_candidate(candidate=candidate, by=Actor.of_user(world.reviewer), does_not_apply_to=["docs"])
    decision = promote(candidate=reload(candidate), by=Actor.of_agent(world.coder), write=True)
    assert decision.fact_id is not None
    assert decision.fact.not_valid_for == ["docs"]


@pytest.mark.parametrize(
    ("additions", "code", "field"),
    [
        ({}, "nothing_to_add", "non_field_errors"),
        ({"does_not_apply_to": ["   "]}, "invalid_input", "does_not_apply_to"),
        ({"does_not_apply_to": ["x" * 201]}, "invalid_input", "does_not_apply_to"),
        ({"does_not_apply_to": ["docs"], "note": "n" * 501}, "invalid_input", "note"),
        ({"evidence_refs": ["ci:1"]}, "not_held", "evidence_refs"),  # traceability already passes
    ],
)
def test_bad_additions_are_refused_and_write_nothing(world, additions, code, field):
    candidate = held_without_scope(world)
    events = AuditEvent.objects.count()
    with pytest.raises(InvalidInput) as caught:
        complete_candidate(candidate=candidate, by=Actor.of_user(world.reviewer), **additions)
    assert field in caught.value.fields
    if code != "invalid_input":
        assert caught.value.code == code
    fresh = reload(candidate)
    assert (fresh.applies_to, fresh.does_not_apply_to, fresh.evidence_refs) == (
        ["public_api"],
        [],
        ["judge:contract-verifier"],
    )
    assert fresh.promotion_status == "held" and AuditEvent.objects.count() == events


def test_only_people_who_may_decide_the_domain_complete_it(world):
    candidate = held_without_scope(world)
    for by in (Actor.of_agent(world.coder), Actor.of_user(world.outsider_reviewer)):
        with pytest.raises(InsufficientPermission):
            complete_candidate(candidate=candidate, by=by, does_not_apply_to=["docs"])
    assert reload(candidate).does_not_apply_to == []
    assert not AuditEvent.objects.filter(verb="candidate.completed").exists()


def test_a_decided_candidate_cannot_be_completed(world):
    candidate = held_without_scope(world)
    deny(candidate=candidate, by=Actor.of_user(world.reviewer), reason="not a rule")
    with pytest.raises(CandidateDecided):
        complete_candidate(candidate=candidate, by=Actor.of_user(world.reviewer), does_not_apply_to=["docs"])
    assert Candidate.objects.get(pk=candidate.pk).does_not_apply_to == []
