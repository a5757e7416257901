"""The promotion gate (SPEC §7): candidates, gates, replays, approvals, decisions, against real
PostgreSQL. One test per gate and per transition of a candidate."""

from __future__ import annotations

from typing import Any

import pytest

from memory.actors import Actor
from memory.errors import InsufficientPermission, InvalidInput, StateConflict
from memory.models import (
    CANDIDATE_SCHEMA,
    Agent,
    AuditEvent,
    Candidate,
    Fact,
    PromotionDecision,
    Replay,
)
from memory.search.preamble import build_preamble
from memory.services.facts import FactInput, propose_fact
from memory.services.promotion import (
    CandidateDecided,
    approve_candidate,
    compute_gates,
    deny,
    parse_candidate_document,
    promote,
    record_replay,
    submit_candidate,
)
from tests.factories import AgentFactory, UserFactory

# People decide candidates of the domains they review (issue 16).
pytestmark = pytest.mark.usefixtures("reviewer_reviews_world_domains")

RULE = "When a public API response schema changes, update the contract artifact and the verifier evidence together."


def document(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": CANDIDATE_SCHEMA,
        "candidate_id": "memcand-demo-a",
        "failure_class": "agent_failure",
        "failure_type": "contract_mismatch",
        "source_action_ids": ["action-12"],
        "root_cause_summary": "Public response shape changed without updating contract evidence.",
        "proposed_memory": RULE,
        "scope": {"applies_to": ["public_api", "contract_change"], "does_not_apply_to": ["internal_refactor"]},
        "evidence_refs": ["judge:contract-verifier"],
        "verification_probe_candidate": "public-contract-regression",
        "promotion_status": "candidate",
        "requires_human_review": False,
    }
    doc.update(overrides)
    return {k: v for k, v in doc.items() if v is not ...}


def submit(world, *, topic: str = "contracts", domain=None, agent=None, **overrides: Any) -> Candidate:
    candidate, created = submit_candidate(
        domain=domain or world.architecture,
        topic=topic,
        document=parse_candidate_document(document(**overrides)),
        by=Actor.of_agent(agent or world.coder),
    )
    assert created
    return candidate


def verifier(world) -> Agent:
    """The workspace's verifier agent: its replays count for candidates it did not submit."""
    found = Agent.objects.filter(workspace=world.workspace, name="verifier-v").first()
    return found or AgentFactory(workspace=world.workspace, role=world.coder_role, name="verifier-v", is_verifier=True)


def replay(
    world, candidate: Candidate, passed: bool = True, probe: str = "public-contract-regression", by: Actor | None = None
) -> Replay:
    """A replay by the verifier agent unless `by` says otherwise (the submitter's own would not count)."""
    by = by or Actor.of_agent(verifier(world))
    return record_replay(candidate=candidate, by=by, probe=probe, passed=passed)


def gates(candidate: Candidate) -> dict[str, str]:
    fresh = Candidate.objects.get(pk=candidate.pk)
    return {name: gate["status"] for name, gate in compute_gates(fresh).items()}


def reload(candidate: Candidate) -> Candidate:
    return Candidate.objects.get(pk=candidate.pk)


def counts() -> tuple[int, int, int]:
    return Fact.objects.count(), PromotionDecision.objects.count(), AuditEvent.objects.count()


# --- Submission ----------------------------------------------------------------------------------
def test_submit_stores_the_document_and_computes_every_gate(world):
    before = AuditEvent.objects.count()
    candidate = submit(world)
    assert candidate.candidate_id == "memcand-demo-a"
    assert candidate.applies_to == ["public_api", "contract_change"]
    assert candidate.does_not_apply_to == ["internal_refactor"]
    assert candidate.promotion_status == "candidate"
    assert candidate.submitted_by_agent == world.coder
    assert gates(candidate) == {
        "failure_class": "passed",
        "evidence": "pending",
        "provenance": "passed",
        "scope": "passed",
        "traceability": "passed",
        "human_review": "passed",
        "write_flag": "pending",
        "auto_promotion": "pending",
    }
    assert AuditEvent.objects.filter(verb="candidate.submitted", target_id=candidate.pk).count() == 1
    assert AuditEvent.objects.count() == before + 1


def test_resubmitting_the_same_candidate_id_returns_the_existing_candidate_unchanged(world):
    first = submit(world)
    before = (Candidate.objects.count(), AuditEvent.objects.count())
    again, created = submit_candidate(
        domain=world.conventions,
        topic="other",
        document=parse_candidate_document(document(proposed_memory="Something else entirely.")),
        by=Actor.of_agent(world.coder2),
    )
    assert not created
    assert again.pk == first.pk
    assert (again.proposed_memory, again.topic, again.domain_id) == (RULE, "contracts", world.architecture.pk)
    assert (Candidate.objects.count(), AuditEvent.objects.count()) == before


def test_the_same_candidate_id_in_another_workspace_is_another_candidate(world):
    from tests.factories import DomainFactory

    submit(world)
    foreign_domain = DomainFactory(workspace=world.other_workspace, name="architecture")
    submit(world, domain=foreign_domain, agent=world.foreign_agent)
    assert Candidate.objects.filter(candidate_id="memcand-demo-a").count() == 2


@pytest.mark.parametrize("key", ["schema", "schema_version"])
def test_an_unknown_schema_version_is_refused_naming_the_field(world, key):
    with pytest.raises(InvalidInput) as caught:
        parse_candidate_document(document(**{key: "awtl.memory_candidate.v1"}))
    assert caught.value.code == "unknown_schema_version"
    assert key in caught.value.fields


def test_a_document_without_schema_is_read_as_v2(world):
    assert parse_candidate_document(document(schema=...)).schema_version == CANDIDATE_SCHEMA


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"candidate_id": ...}, "candidate_id"),
        ({"candidate_id": "   "}, "candidate_id"),
        ({"failure_class": "network_failure"}, "failure_class"),
        ({"failure_class": ...}, "failure_class"),
        ({"proposed_memory": ""}, "proposed_memory"),
        ({"proposed_memory": 42}, "proposed_memory"),
        ({"source_action_ids": "action-12"}, "source_action_ids"),
        ({"evidence_refs": [""]}, "evidence_refs"),
        ({"scope": ["public_api"]}, "scope"),
        ({"scope": {"applies_to": "public_api"}}, "scope"),
        ({"requires_human_review": "yes"}, "requires_human_review"),
        ({"promotion_status": "active"}, "promotion_status"),
        ({"origin": "Imported From Elsewhere"}, "origin"),
        ({"memory_type": "gossip"}, "memory_type"),
    ],
)
def test_a_malformed_document_is_refused_naming_the_field_and_nothing_is_written(world, overrides, field):
    before = (Candidate.objects.count(), AuditEvent.objects.count())
    with pytest.raises(InvalidInput) as caught:
        submit(world, **overrides)
    assert field in caught.value.fields
    assert (Candidate.objects.count(), AuditEvent.objects.count()) == before


def test_a_memory_too_long_for_a_fact_is_refused_at_submission(world, settings):
    settings.ENGRAM_FACT_MAX_CHARS = 50
    with pytest.raises(InvalidInput) as caught:
        submit(world, proposed_memory="x" * 51)
    assert "proposed_memory" in caught.value.fields


# --- Gate: failure class ---------------------------------------------------------------------------
@pytest.mark.parametrize("failure_class", ["environment_blocker", "flaky_blocker"])
def test_a_blocker_is_never_promoted_not_even_with_a_passing_replay_and_human_approval(world, failure_class):
    candidate = submit(world, failure_class=failure_class)
    assert candidate.promotion_status == "blocked"
    replay(world, candidate, passed=True)
    approve_candidate(candidate=candidate, by=Actor.of_user(world.admin_user))
    assert gates(candidate)["failure_class"] == "failed"
    assert gates(candidate)["evidence"] == "passed"
    facts_before = Fact.objects.count()
    decision = promote(candidate=candidate, by=Actor.of_user(world.admin_user), write=True)
    assert decision.decision == "refused"
    assert decision.fact_id is None
    assert decision.scorecard["failure_class"]["status"] == "failed"
    assert "never promoted" in decision.scorecard["failure_class"]["reason"]
    assert Fact.objects.count() == facts_before
    assert reload(candidate).promotion_status == "blocked"
    assert reload(candidate).fact_id is None


def test_the_database_refuses_an_active_blocker(world):
    from django.db import IntegrityError

    candidate = submit(world, failure_class="environment_blocker")
    with pytest.raises(IntegrityError):
        Candidate.objects.filter(pk=candidate.pk).update(promotion_status="active")


def test_a_harness_blocker_is_routed_to_harness_fixes_and_never_promoted(world):
    candidate = submit(world, failure_class="harness_blocker")
    assert candidate.promotion_status == "harness_fix"
    replay(world, candidate, passed=True)
    assert reload(candidate).promotion_status == "harness_fix"
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert decision.decision == "refused"
    assert "harness" in decision.scorecard["failure_class"]["reason"]
    assert reload(candidate).promotion_status == "harness_fix"


def test_a_verification_failure_needs_its_probe(world):
    without = submit(world, failure_class="verification_failure", verification_probe_candidate="")
    assert gates(without)["failure_class"] == "failed"
    assert without.promotion_status == "blocked"
    with_probe = submit(world, candidate_id="memcand-b", failure_class="verification_failure")
    assert gates(with_probe)["failure_class"] == "passed"
    assert with_probe.promotion_status == "candidate"


# --- Gate: provenance ------------------------------------------------------------------------------
def test_an_imported_only_candidate_is_blocked(world):
    candidate = submit(world, origin="imported")
    assert candidate.promotion_status == "blocked"
    assert gates(candidate)["provenance"] == "failed"
    replay(world, candidate, passed=True)
    approve_candidate(candidate=candidate, by=Actor.of_user(world.admin_user))
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert decision.decision == "refused"
    assert decision.scorecard["provenance"]["status"] == "failed"
    assert reload(candidate).fact_id is None


# --- Gate: scope -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "scope",
    [
        {"applies_to": ["public_api"]},
        {"applies_to": ["public_api"], "does_not_apply_to": []},
        {"does_not_apply_to": ["internal_refactor"]},
        ...,
    ],
)
def test_a_candidate_without_scope_and_anti_scope_is_held(world, scope):
    candidate = submit(world, scope=scope)
    assert candidate.promotion_status == "held"
    assert gates(candidate)["scope"] == "failed"
    replay(world, candidate, passed=True)
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert decision.decision == "refused"
    assert decision.scorecard["scope"]["reason"].startswith("held")
    assert reload(candidate).promotion_status == "held"
    assert reload(candidate).fact_id is None


# --- Gate: evidence ------------------------------------------------------------------------------------
def test_evidence_needs_a_passing_replay_or_a_human_approval(world):
    candidate = submit(world)
    assert gates(candidate)["evidence"] == "pending"
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert decision.decision == "refused"
    assert decision.scorecard["evidence"]["status"] == "pending"

    replay(world, candidate, passed=False)
    assert gates(candidate)["evidence"] == "failed"
    replay(world, candidate, passed=True)
    assert gates(candidate)["evidence"] == "passed"

    approved_only = submit(world, candidate_id="memcand-b")
    approve_candidate(candidate=approved_only, by=Actor.of_user(world.reviewer))
    assert gates(approved_only)["evidence"] == "passed"


def test_a_failed_replay_after_an_approval_fails_the_evidence_again(world):
    candidate = submit(world)
    approve_candidate(candidate=candidate, by=Actor.of_user(world.reviewer))
    replay(world, candidate, passed=False)
    assert gates(candidate)["evidence"] == "failed"


# --- Gate: human review -------------------------------------------------------------------------------
def test_a_candidate_requiring_human_review_waits_for_a_person_even_with_a_passing_replay(world):
    candidate = submit(world, requires_human_review=True)
    replay(world, candidate, passed=True)
    assert gates(candidate)["human_review"] == "pending"
    refused = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert refused.decision == "refused"
    approve_candidate(candidate=candidate, by=Actor.of_user(world.reviewer), note="checked the probe")
    assert gates(candidate)["human_review"] == "passed"
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert decision.decision == "promote"
    fact = Fact.objects.get(pk=decision.fact_id)
    assert fact.validated_by == "replay"
    assert fact.veracity == "human_stated"  # a person vouched for it


def test_only_a_person_of_the_workspace_may_approve(world):
    candidate = submit(world)
    with pytest.raises(InsufficientPermission) as caught:
        approve_candidate(candidate=candidate, by=Actor.of_agent(world.coder))
    assert caught.value.code == "human_approval_required"
    stranger = UserFactory(username="stranger")
    with pytest.raises(InsufficientPermission):
        approve_candidate(candidate=candidate, by=Actor.of_user(stranger))
    assert reload(candidate).human_approved_at is None
    approved = approve_candidate(candidate=candidate, by=Actor.of_user(world.reviewer))
    assert approved.human_approved_by == world.reviewer
    assert AuditEvent.objects.filter(verb="candidate.approved", target_id=candidate.pk).exists()


# --- Gate: write flag ------------------------------------------------------------------------------------
def test_promote_without_write_is_a_dry_run_that_changes_nothing(world):
    candidate = submit(world)
    replay(world, candidate, passed=True)
    before = counts()
    status_before = reload(candidate).promotion_status
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=False)
    assert decision.pk is None
    assert decision.decision == "dry_run"
    assert decision.is_dry_run
    assert decision.scorecard["write_flag"]["status"] == "failed"
    assert "nothing written" in decision.reason.lower()
    assert "would promote" in decision.reason
    assert counts() == before
    assert reload(candidate).promotion_status == status_before
    assert reload(candidate).fact_id is None


def test_a_dry_run_says_why_it_would_not_promote(world):
    candidate = submit(world, scope={"applies_to": ["public_api"]})
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=False)
    assert "would not promote" in decision.reason
    assert "scope" in decision.reason and "evidence" in decision.reason


# --- Gate: automatic promotion -------------------------------------------------------------------------
def test_auto_promotion_refuses_an_unverified_candidate(world):
    candidate = submit(world)
    approve_candidate(candidate=candidate, by=Actor.of_user(world.reviewer))  # evidence, but no replay
    decision = promote(candidate=candidate, by=Actor.system("auto-promoter"), write=True, auto=True)
    assert decision.decision == "refused"
    assert decision.auto is True
    assert decision.scorecard["auto_promotion"]["status"] == "failed"
    assert decision.scorecard["evidence"]["status"] == "passed"
    assert reload(candidate).fact_id is None
    # The same candidate may still be promoted by a deliberate (non-automatic) call.
    assert promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True).decision == "promote"


def test_auto_promotion_refuses_a_candidate_requiring_human_review(world):
    candidate = submit(world, requires_human_review=True)
    replay(world, candidate, passed=True)
    approve_candidate(candidate=candidate, by=Actor.of_user(world.reviewer))
    decision = promote(candidate=candidate, by=Actor.system("auto-promoter"), write=True, auto=True)
    assert decision.decision == "refused"
    assert "human review" in decision.scorecard["auto_promotion"]["reason"]


def test_auto_promotion_promotes_a_replay_verified_candidate(world):
    candidate = submit(world)
    replay(world, candidate, passed=True)
    assert gates(candidate)["auto_promotion"] == "passed"
    decision = promote(candidate=candidate, by=Actor.system("auto-promoter"), write=True, auto=True)
    assert decision.decision == "promote"
    assert decision.decided_by_label == "system:auto-promoter"


# --- Promotion --------------------------------------------------------------------------------------------
def test_promotion_writes_the_fact_through_the_write_path_with_its_lifecycle_metadata(world):
    candidate = submit(world)
    replay(world, candidate, passed=True)
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert decision.decision == "promote"
    assert decision.outcome == "created"
    assert all(gate["status"] == "passed" for gate in decision.scorecard.values())
    fact = Fact.objects.get(pk=decision.fact_id)
    assert fact.content == RULE
    assert (fact.domain_id, fact.topic, fact.memory_type) == (world.architecture.pk, "contracts", "procedure")
    assert fact.status == "active"
    assert fact.origin == "promotion"
    assert fact.origin_candidate_id == candidate.pk
    assert fact.validated_by == "replay"
    assert fact.valid_for == ["public_api", "contract_change"]
    assert fact.not_valid_for == ["internal_refactor"]
    assert fact.verification == "public-contract-regression"
    assert fact.last_validated_at is not None
    assert fact.verification_contract_version == "awtl.memory_candidate.v2"
    assert fact.embedding is not None
    assert fact.created_by_agent == world.coder
    candidate = reload(candidate)
    assert (candidate.promotion_status, candidate.fact_id) == ("active", fact.pk)
    verbs = set(AuditEvent.objects.filter(target_id__in=[candidate.pk, fact.pk]).values_list("verb", flat=True))
    assert {"fact.created", "candidate.promoted"} <= verbs


def test_a_human_approved_promotion_is_validated_by_human(world):
    candidate = submit(world)
    approve_candidate(candidate=candidate, by=Actor.of_user(world.reviewer))
    decision = promote(candidate=candidate, by=Actor.of_user(world.reviewer), write=True)
    fact = Fact.objects.get(pk=decision.fact_id)
    assert fact.validated_by == "human"
    assert fact.created_by_user == world.reviewer
    assert decision.decided_by_user == world.reviewer


def test_promotion_that_restates_a_live_fact_re_mentions_and_revalidates_it(world):
    existing = propose_fact(
        domain=world.architecture,
        data=FactInput(topic="contracts", content=RULE, memory_type="procedure"),
        by=Actor.of_agent(world.coder2),
    ).fact
    candidate = submit(world)
    replay(world, candidate, passed=True)
    facts_before = Fact.objects.count()
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert decision.outcome == "re_mentioned"
    assert decision.fact_id == existing.pk
    assert Fact.objects.count() == facts_before
    fact = Fact.objects.get(pk=existing.pk)
    assert fact.mention_count == 2
    assert fact.last_validated_at is not None and fact.validated_by == "replay"
    assert fact.valid_for == ["public_api", "contract_change"]
    assert fact.origin_candidate_id == candidate.pk


def test_a_promoted_fact_is_recalled_with_its_scope_in_compact_form(world):
    candidate = submit(world)
    replay(world, candidate, passed=True)
    promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    preamble = build_preamble(agent=world.coder, task="Change the public API response schema for invoices")
    assert len(preamble.facts) == 1
    line = preamble.fact_lines[0]
    assert RULE in line
    assert (
        "(applies to: public_api, contract_change; not for: internal_refactor; verify: public-contract-regression)"
        in line
    )


# --- Decisions ---------------------------------------------------------------------------------------------
def test_each_decision_is_recorded_with_the_scorecard_it_was_made_on(world):
    candidate = submit(world)
    refused = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    replay(world, candidate, passed=True)
    promoted = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    stored = list(PromotionDecision.objects.filter(candidate=candidate).order_by("pk"))
    assert [d.pk for d in stored] == [refused.pk, promoted.pk]
    assert [d.decision for d in stored] == ["refused", "promote"]
    assert stored[0].scorecard["evidence"] == {
        "status": "pending",
        "reason": "needs a passing replay recorded by a person or a verifier agent other than the submitter, "
        "or a human approval",
    }
    assert stored[1].scorecard["evidence"]["status"] == "passed"
    assert "replay #" in stored[1].scorecard["evidence"]["reason"]
    assert stored[0].write and stored[1].write
    assert AuditEvent.objects.filter(verb="candidate.promotion_refused", target_id=candidate.pk).count() == 1


def test_a_decided_candidate_refuses_any_further_decision(world):
    candidate = submit(world)
    replay(world, candidate, passed=True)
    promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    before = counts()
    with pytest.raises(CandidateDecided) as caught:
        promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert caught.value.status == 409
    with pytest.raises(StateConflict):
        promote(candidate=candidate, by=Actor.of_agent(world.coder), write=False)
    with pytest.raises(StateConflict):
        deny(candidate=candidate, by=Actor.of_agent(world.coder), reason="too late")
    with pytest.raises(StateConflict):
        approve_candidate(candidate=candidate, by=Actor.of_user(world.reviewer))
    assert counts() == before


def test_deny_is_final_and_recorded_with_its_scorecard(world):
    candidate = submit(world)
    decision = deny(candidate=candidate, by=Actor.of_user(world.reviewer), reason="Too broad.")
    assert decision.decision == "deny"
    assert decision.scorecard["evidence"]["status"] == "pending"
    assert reload(candidate).promotion_status == "denied"
    assert AuditEvent.objects.filter(verb="candidate.denied", target_id=candidate.pk).exists()
    replay(world, candidate, passed=True)  # a late replay is kept, and changes nothing
    assert reload(candidate).promotion_status == "denied"
    with pytest.raises(CandidateDecided):
        promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)


# --- Replays on promoted candidates ----------------------------------------------------------------------------
def test_a_failed_replay_on_an_active_promoted_fact_challenges_it(world):
    candidate = submit(world)
    replay(world, candidate, passed=True)
    fact_id = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True).fact_id
    replay(world, candidate, passed=False)
    fact = Fact.objects.get(pk=fact_id)
    assert fact.status == "challenged"
    assert not Fact.objects.recallable().filter(pk=fact_id).exists()
    event = AuditEvent.objects.get(verb="fact.challenged", target_id=fact_id)
    assert event.detail["reason"] == "failed_replay"
    assert reload(candidate).promotion_status == "active"  # the decision stands; the fact is in question


def test_a_passing_replay_revalidates_a_challenged_promoted_fact(world):
    candidate = submit(world)
    replay(world, candidate, passed=True)
    fact_id = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True).fact_id
    replay(world, candidate, passed=False)
    validated_before = Fact.objects.get(pk=fact_id).last_validated_at
    replay(world, candidate, passed=True)
    fact = Fact.objects.get(pk=fact_id)
    assert fact.status == "active"
    assert fact.last_validated_at > validated_before
    assert AuditEvent.objects.filter(verb="fact.revalidated", target_id=fact_id).exists()


def test_a_passing_replay_keeps_a_promoted_fact_from_going_stale(world):
    """A passing replay is validation (issue 20): it sets last_validated_at, and stale detection
    measures the window from it."""
    import importlib
    from datetime import timedelta

    from django.apps import apps
    from django.utils import timezone

    from memory.models import DecayProfile
    from memory.services.lifecycle import detect_stale

    # The default windows come from a data migration a transactional test may have truncated.
    importlib.import_module("memory.migrations.0002_default_decay_profiles").forwards(apps, None)
    candidate = submit(world)
    replay(world, candidate, passed=True)
    fact_id = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True).fact_id
    fact = Fact.objects.get(pk=fact_id)
    window = DecayProfile.objects.get(memory_type=fact.memory_type).stale_after_days
    long_ago = timezone.now() - timedelta(days=window + 30)
    age = {"created_at": long_ago, "last_mentioned_at": long_ago, "last_validated_at": long_ago}
    Fact.objects.filter(pk=fact_id).update(**age)

    replay(world, candidate, passed=True)
    fact = Fact.objects.get(pk=fact_id)
    assert fact.last_validated_at > long_ago + timedelta(days=window)
    assert fact.validated_by == "replay"
    assert detect_stale() == {}
    assert Fact.objects.get(pk=fact_id).status == "active"

    Fact.objects.filter(pk=fact_id).update(**age)  # the same fact without that replay goes stale
    assert detect_stale() == {fact.memory_type: 1}
    assert Fact.objects.get(pk=fact_id).status == "challenged"


def test_a_replay_needs_a_probe(world):
    candidate = submit(world)
    with pytest.raises(InvalidInput) as caught:
        replay(world, candidate, probe="  ")
    assert "probe" in caught.value.fields
    assert not Replay.objects.exists()


# --- Demo ---------------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_seed_demo_loads_candidates_through_the_gate(settings, tmp_path):
    import io

    from django.core.management import call_command

    settings.ENGRAM_HOME = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    demo = {c.candidate_id: c for c in Candidate.objects.filter(workspace__slug="demo")}
    review = demo["memcand-demo-contract"]
    assert review.promotion_status == "candidate"
    assert review.applies_to and review.does_not_apply_to
    assert {k: v["status"] for k, v in compute_gates(review).items()}["human_review"] == "pending"
    assert review.replays.filter(passed=True, recorded_by_agent__is_verifier=True).exists()
    assert "verifier agent verifier-1" in compute_gates(review)["evidence"]["reason"]
    assert demo["memcand-demo-e2e-browser"].promotion_status == "blocked"
    assert demo["memcand-demo-migrations"].promotion_status == "held"


def test_promotion_beside_a_fact_it_may_contradict_leaves_both_for_a_person(world):
    existing = propose_fact(
        domain=world.architecture,
        data=FactInput(topic="team", content="Mia leads the platform team.", memory_type="profile"),
        by=Actor.of_agent(world.coder2),
    ).fact
    candidate = submit(world, topic="team", proposed_memory="Omar leads the platform team.")
    replay(world, candidate, passed=True)
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert decision.outcome == "possible_conflict"
    assert f"may contradict fact {existing.pk}" in decision.reason
    promoted = Fact.objects.get(pk=decision.fact_id)
    assert promoted.is_live and Fact.objects.get(pk=existing.pk).is_live
    assert promoted.conflicts_as_proposed.get().status == "open"
