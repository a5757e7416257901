"""Trust boundary of the promotion gate (issue 13, point 2): the agent that proposed a rule cannot
certify it alone. A replay counts only when a person, or a verifier agent that did not submit the
candidate, recorded it; a candidate must point back at its trace (source actions or evidence).
Attacks first, through the API, against real PostgreSQL; then the legitimate paths."""

from __future__ import annotations

from typing import Any

import pytest

from agents.services import revoke_agent
from memory.actors import Actor
from memory.models import AuditEvent, Candidate, Fact, PromotionDecision, Replay
from memory.services.promotion import approve_candidate, compute_gates, record_replay
from tests.agents.samples import PROBE, candidate_document
from tests.conftest import client_for
from tests.factories import AgentFactory

# People decide candidates of the domains they review (issue 16).
pytestmark = pytest.mark.usefixtures("reviewer_reviews_world_domains")

DOC: dict[str, Any] = candidate_document(
    candidate_id="memcand-trust",
    scope={"applies_to": ["public_api"], "does_not_apply_to": ["internal_refactor"]},
    evidence_refs=["judge:contract-verifier"],
)
del DOC["promotion_status"]
AUTO_WRITE = {"write": True, "auto": True}


@pytest.fixture
def verifier(world):
    return AgentFactory(workspace=world.workspace, role=world.coder_role, name="verifier-v", is_verifier=True)


def submit(client, **patch: Any) -> dict[str, Any]:
    response = client.post("/api/v1/candidates/", {**DOC, **patch}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def replay(client, pk: int, *, passed: bool = True) -> dict[str, Any]:
    response = client.post(f"/api/v1/candidates/{pk}/replays/", {"probe": PROBE, "passed": passed}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def promote(client, pk: int, body: dict[str, Any] = AUTO_WRITE) -> dict[str, Any]:
    response = client.post(f"/api/v1/candidates/{pk}/promote/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def state(pk: int) -> tuple[int, str, int | None]:
    candidate = Candidate.objects.get(pk=pk)
    return Fact.objects.count(), candidate.promotion_status, candidate.fact_id


def promoted_by_verifier(api, verifier) -> tuple[dict[str, Any], int]:
    created = submit(api)
    replay(client_for(verifier), created["id"])
    body = promote(api, created["id"])
    assert body["decision"] == "promote", body["reason"]
    return created, body["fact"]["id"]


# --- Attacks ------------------------------------------------------------------------------------------
def test_the_submitter_cannot_certify_its_own_candidate_in_three_calls(world, api):
    created = submit(api)
    facts_before = Fact.objects.count()
    own = replay(api, created["id"])
    assert own["counts_as_evidence"] is False
    assert own["standing"] == f"replay #{own['id']} was recorded by the candidate's submitter (agent:coder-a); " + (
        "it does not count"
    )
    assert own["gates"]["evidence"]["status"] == "pending"

    decision = promote(api, created["id"])
    assert decision["decision"] == "refused"
    assert decision["fact"] is None
    evidence = decision["scorecard"]["evidence"]
    assert evidence["status"] == "pending"
    assert "recorded by the candidate's submitter" in evidence["reason"]
    assert "it does not count" in evidence["reason"]
    assert decision["scorecard"]["auto_promotion"]["status"] == "failed"
    assert "verifier" in decision["scorecard"]["auto_promotion"]["reason"]
    assert PromotionDecision.objects.get(pk=decision["id"]).scorecard["evidence"] == evidence
    # A deliberate (non-automatic) write is refused on the same evidence gate.
    assert promote(api, created["id"], {"write": True})["decision"] == "refused"
    assert state(created["id"]) == (facts_before, "candidate", None)


def test_a_non_verifier_third_agents_replay_does_not_count(world, api):
    created = submit(api)
    other = replay(client_for(world.coder2), created["id"])
    assert other["counts_as_evidence"] is False
    assert "agent coder-b, which is not a verifier" in other["standing"]
    decision = promote(api, created["id"])
    assert decision["decision"] == "refused"
    assert "agent coder-b, which is not a verifier; it does not count" in decision["scorecard"]["evidence"]["reason"]
    assert state(created["id"]) == (0, "candidate", None)


def test_a_verifier_that_submitted_the_candidate_cannot_certify_it_either(world, verifier):
    as_verifier = client_for(verifier)
    created = submit(as_verifier)
    assert replay(as_verifier, created["id"])["counts_as_evidence"] is False
    assert promote(as_verifier, created["id"])["decision"] == "refused"
    assert state(created["id"]) == (0, "candidate", None)


def test_a_self_recorded_pass_after_a_verifiers_failure_does_not_flip_the_gate(world, api, verifier):
    created = submit(api)
    failed = replay(client_for(verifier), created["id"], passed=False)
    replay(api, created["id"], passed=True)
    replay(client_for(world.coder2), created["id"], passed=True)
    decision = promote(api, created["id"])
    assert decision["decision"] == "refused"
    evidence = decision["scorecard"]["evidence"]
    assert evidence["status"] == "failed"
    assert f"the latest counting replay #{failed['id']}" in evidence["reason"]
    assert "submitter" in evidence["reason"] and "not a verifier" in evidence["reason"]
    assert state(created["id"]) == (0, "candidate", None)


def test_a_non_counting_failed_replay_after_an_approval_does_not_undo_it(world, api):
    created = submit(api)
    approve_candidate(candidate=Candidate.objects.get(pk=created["id"]), by=Actor.of_user(world.reviewer))
    replay(client_for(world.coder2), created["id"], passed=False)
    assert compute_gates(Candidate.objects.get(pk=created["id"]))["evidence"]["status"] == "passed"


@pytest.mark.parametrize("empty", [True, False], ids=["empty-lists", "absent"])
def test_a_candidate_without_trace_is_held_and_not_promoted_even_with_a_verifier_replay_and_approval(
    world, api, verifier, empty
):
    body = {key: value for key, value in DOC.items() if key not in ("source_action_ids", "evidence_refs")}
    if empty:
        body |= {"source_action_ids": [], "evidence_refs": []}
    response = api.post("/api/v1/candidates/", body, format="json")
    assert response.status_code == 201, response.json()
    created = response.json()
    assert created["promotion_status"] == "held"
    assert created["gates"]["traceability"]["status"] == "failed"
    assert created["gates"]["traceability"]["reason"].startswith("held: no source_action_ids and no evidence_refs")
    assert replay(client_for(verifier), created["id"])["counts_as_evidence"] is True
    approve_candidate(candidate=Candidate.objects.get(pk=created["id"]), by=Actor.of_user(world.reviewer))
    for call in (AUTO_WRITE, {"write": True}):
        decision = promote(api, created["id"], call)
        assert decision["decision"] == "refused"
        assert decision["scorecard"]["traceability"]["status"] == "failed"
        assert decision["scorecard"]["evidence"]["status"] == "passed"
    assert state(created["id"]) == (0, "held", None)


def test_a_non_verifiers_failed_replay_does_not_challenge_a_promoted_fact(world, api, verifier):
    created, fact_id = promoted_by_verifier(api, verifier)
    before = AuditEvent.objects.filter(verb="fact.challenged").count()
    body = replay(client_for(world.coder2), created["id"], passed=False)
    assert body["counts_as_evidence"] is False
    assert body["fact_status"] == "active"
    assert Fact.objects.recallable().filter(pk=fact_id).exists()
    assert AuditEvent.objects.filter(verb="fact.challenged").count() == before
    event = AuditEvent.objects.filter(verb="candidate.replayed", target_id=created["id"]).latest("id")
    assert (event.detail["counts"], event.detail["effect"]) == (False, "ignored")
    assert Replay.objects.filter(candidate_id=created["id"], passed=False).count() == 1  # kept, as a record


def test_the_submitters_passing_replay_does_not_bring_back_a_challenged_fact(world, api, verifier):
    created, fact_id = promoted_by_verifier(api, verifier)
    assert replay(client_for(verifier), created["id"], passed=False)["fact_status"] == "challenged"
    assert replay(api, created["id"], passed=True)["fact_status"] == "challenged"
    assert not Fact.objects.recallable().filter(pk=fact_id).exists()
    assert replay(client_for(verifier), created["id"], passed=True)["fact_status"] == "active"


def test_the_submitters_own_failed_replay_may_withdraw_its_promoted_fact(world, api, verifier):
    created, fact_id = promoted_by_verifier(api, verifier)
    body = replay(api, created["id"], passed=False)
    assert body["counts_as_evidence"] is False
    assert body["fact_status"] == "challenged"
    assert not Fact.objects.recallable().filter(pk=fact_id).exists()


def test_a_revoked_verifiers_replay_stops_counting_for_an_open_candidate(world, api, verifier):
    created = submit(api)
    replay(client_for(verifier), created["id"])
    revoke_agent(agent=verifier, by=Actor.of_user(world.admin_user))
    decision = promote(api, created["id"])
    assert decision["decision"] == "refused"
    assert "whose key was revoked" in decision["scorecard"]["evidence"]["reason"]
    assert state(created["id"]) == (0, "candidate", None)


# --- The legitimate paths ------------------------------------------------------------------------------
def test_a_verifier_agents_replay_promotes_with_auto_and_write(world, api, verifier):
    created = submit(api)
    body = replay(client_for(verifier), created["id"])
    assert body["counts_as_evidence"] is True
    assert body["standing"] == "recorded by verifier agent verifier-v"
    assert body["gates"]["auto_promotion"]["status"] == "passed"
    decision = promote(api, created["id"])
    assert decision["decision"] == "promote"
    assert decision["auto"] is True
    assert "recorded by verifier agent verifier-v" in decision["scorecard"]["evidence"]["reason"]
    assert decision["fact"]["validated_by"] == "replay"
    assert state(created["id"]) == (1, "active", decision["fact"]["id"])
    detail = client_for(world.coder).get(f"/api/v1/candidates/{created['id']}/").json()
    assert [r["counts_as_evidence"] for r in detail["replays"]] == [True]


def test_a_persons_approval_still_promotes(world, api):
    created = submit(api)
    approve_candidate(candidate=Candidate.objects.get(pk=created["id"]), by=Actor.of_user(world.reviewer))
    decision = promote(api, created["id"], {"write": True})
    assert decision["decision"] == "promote"
    assert decision["fact"]["validated_by"] == "human"
    assert state(created["id"]) == (1, "active", decision["fact"]["id"])


def test_a_persons_replay_counts_and_allows_automatic_promotion(world, api):
    created = submit(api)
    stored = record_replay(
        candidate=Candidate.objects.get(pk=created["id"]), by=Actor.of_user(world.reviewer), probe=PROBE, passed=True
    )
    assert stored.recorded_by_user == world.reviewer
    decision = promote(api, created["id"])
    assert decision["decision"] == "promote"
    assert "recorded by user:reviewer, a person" in decision["scorecard"]["evidence"]["reason"]


def test_evidence_refs_alone_are_enough_trace(world, api, verifier):
    created = submit(api, source_action_ids=[])
    assert created["promotion_status"] == "candidate"
    assert created["gates"]["traceability"] == {"status": "passed", "reason": "0 source actions, 1 evidence ref"}
    replay(client_for(verifier), created["id"])
    assert promote(api, created["id"])["decision"] == "promote"


def test_the_review_page_says_which_replays_count(world, api, verifier, client):
    from django.urls import reverse

    created = submit(api, domain="architecture", repo=None, requires_human_review=True)
    own = replay(api, created["id"])
    counted = replay(client_for(verifier), created["id"])
    client.force_login(world.admin_user)
    page = client.get(reverse("review:queue-detail", args=["candidate", created["id"]])).content.decode()
    assert f"replay #{own['id']} was recorded by the candidate&#x27;s submitter (agent:coder-a)" in page
    assert f"#{counted['id']} {PROBE}: passed" in page and "counts — recorded by verifier agent verifier-v" in page


def test_a_verifier_of_another_workspace_does_not_count(world, api):
    created = submit(api)
    foreign = AgentFactory(workspace=world.other_workspace, role=world.foreign_agent.role, is_verifier=True)
    record_replay(
        candidate=Candidate.objects.get(pk=created["id"]), by=Actor.of_agent(foreign), probe=PROBE, passed=True
    )
    evidence = compute_gates(Candidate.objects.get(pk=created["id"]))["evidence"]
    assert evidence["status"] == "pending"
    assert "of another workspace; it does not count" in evidence["reason"]
