"""Promotion-candidate endpoints (API.md "Promotion candidates"): submission, idempotency, bad
documents, replays, dry runs and decisions read back with their scorecards, isolation."""

from __future__ import annotations

from typing import Any

import pytest

from memory.actors import Actor
from memory.models import AuditEvent, Candidate, Fact, PromotionDecision, Replay
from memory.services.promotion import approve_candidate
from memory.services.tenancy import set_grant
from tests.agents.samples import RULE, candidate_document
from tests.conftest import client_for
from tests.factories import AgentFactory, DomainFactory

# People decide candidates of the domains they review (issue 16).
pytestmark = pytest.mark.usefixtures("reviewer_reviews_world_domains")

DOC: dict[str, Any] = candidate_document()
GATE_NAMES = {
    "failure_class",
    "evidence",
    "provenance",
    "scope",
    "traceability",
    "human_review",
    "write_flag",
    "auto_promotion",
}


def submit(api, **patch: Any) -> dict[str, Any]:
    response = api.post("/api/v1/candidates/", {**DOC, **patch}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def replay(api, candidate_id: int, passed: bool = True) -> dict[str, Any]:
    response = api.post(
        f"/api/v1/candidates/{candidate_id}/replays/",
        {"probe": "public-contract-regression", "passed": passed, "details": "ran in CI"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.fixture
def verifier_api(world):
    """A verifier agent of the workspace: its replays count for candidates it did not submit."""
    return client_for(
        AgentFactory(workspace=world.workspace, role=world.coder_role, name="verifier-v", is_verifier=True)
    )


def counts() -> tuple[int, int, int, int]:
    return Fact.objects.count(), PromotionDecision.objects.count(), AuditEvent.objects.count(), Replay.objects.count()


# --- POST candidates/ ------------------------------------------------------------------------------
def test_submit_answers_201_with_id_status_and_gates(world, api):
    body = submit(api)
    assert isinstance(body["id"], int)
    assert body["candidate_id"] == "memcand-demo-a"
    assert body["promotion_status"] == "candidate"
    assert body["domain"] == "repo:web/context" and body["repo"] == "web" and body["topic"] == "contracts"
    assert body["scope"] == {
        "applies_to": ["public_api", "contract_change"],
        "does_not_apply_to": ["internal_refactor"],
    }
    assert set(body["gates"]) == GATE_NAMES
    assert all(set(g) == {"status", "reason"} for g in body["gates"].values())
    assert body["gates"]["evidence"]["status"] == "pending"
    assert body["gates"]["scope"]["status"] == "passed"
    assert body["replays"] == [] and body["decisions"] == []
    assert body["submitted_by"] == "agent:coder-a"


def test_resubmitting_the_same_candidate_id_is_idempotent(world, api):
    first = submit(api)
    before = (Candidate.objects.count(), AuditEvent.objects.count())
    again = api.post("/api/v1/candidates/", {**DOC, "proposed_memory": "Something else."}, format="json")
    assert again.status_code == 200
    assert again.json() == first
    assert (Candidate.objects.count(), AuditEvent.objects.count()) == before


def test_a_candidate_id_taken_in_a_domain_the_agent_cannot_see_is_a_409_that_shows_nothing(world, api):
    submit(client_for(world.planner), domain="architecture", repo=None)
    set_grant(role=world.coder_role, domain=world.architecture, level="none", by=Actor.system("t"))
    response = api.post("/api/v1/candidates/", DOC, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "candidate_id_taken"
    assert RULE not in response.content.decode()


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"schema": "awtl.memory_candidate.v1"}, "schema"),
        ({"schema_version": "v3"}, "schema_version"),
        ({"failure_class": "network_failure"}, "failure_class"),
        ({"candidate_id": ""}, "candidate_id"),
        ({"proposed_memory": ""}, "proposed_memory"),
        ({"scope": {"applies_to": "public_api"}}, "scope"),
        ({"scope": "everywhere"}, "scope"),
        ({"source_action_ids": "action-12"}, "source_action_ids"),
        ({"requires_human_review": "maybe"}, "requires_human_review"),
        ({"promotion_status": "active"}, "promotion_status"),
        ({"origin": "Not A Token"}, "origin"),
        ({"topic": ""}, "topic"),
        ({"domain": "nowhere"}, "domain"),
    ],
)
def test_bad_documents_get_400_naming_the_field_and_write_nothing(world, api, patch, field):
    before = (Candidate.objects.count(), AuditEvent.objects.count())
    response = api.post("/api/v1/candidates/", {**DOC, **patch}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert set(body) == {"code", "detail", "fields"}
    assert field in body["fields"], body
    assert (Candidate.objects.count(), AuditEvent.objects.count()) == before


def test_missing_fields_and_wrong_body_types_are_400(world, api):
    response = api.post("/api/v1/candidates/", {"topic": "x"}, format="json")
    assert response.status_code == 400
    assert {"domain", "candidate_id", "failure_class", "proposed_memory"} <= set(response.json()["fields"])
    assert api.post("/api/v1/candidates/", [1, 2], format="json").status_code == 400


def test_unknown_schema_version_has_its_own_code(world, api):
    response = api.post("/api/v1/candidates/", {**DOC, "schema": "awtl.memory_candidate.v9"}, format="json")
    assert response.json()["code"] == "unknown_schema_version"


# --- GET candidates/ -------------------------------------------------------------------------------
def test_list_filters_by_status_and_failure_class(world, api):
    submit(api)
    submit(api, candidate_id="b", failure_class="environment_blocker")
    submit(api, candidate_id="c", scope={"applies_to": ["public_api"]})
    statuses = {c["candidate_id"]: c["promotion_status"] for c in api.get("/api/v1/candidates/").json()["results"]}
    assert statuses == {"memcand-demo-a": "candidate", "b": "blocked", "c": "held"}
    held = api.get("/api/v1/candidates/?promotion_status=held").json()["results"]
    assert [c["candidate_id"] for c in held] == ["c"]
    blockers = api.get("/api/v1/candidates/?failure_class=environment_blocker").json()["results"]
    assert [c["candidate_id"] for c in blockers] == ["b"]
    assert api.get("/api/v1/candidates/?promotion_status=nonsense").status_code == 400


def test_list_query_count_is_flat(world, api, verifier_api, django_assert_max_num_queries):
    for i in range(6):
        body = submit(api, candidate_id=f"c{i}")
        replay(verifier_api, body["id"])
        api.post(f"/api/v1/candidates/{body['id']}/promote/", {"write": True}, format="json")
    with django_assert_max_num_queries(8):
        response = api.get("/api/v1/candidates/")
    assert response.json()["count"] == 6
    assert all(len(c["decisions"]) == 1 for c in response.json()["results"])


# --- Replays ---------------------------------------------------------------------------------------
def test_a_replay_is_201_and_the_gates_are_recomputed(world, api, verifier_api):
    created = submit(api)
    body = replay(verifier_api, created["id"])
    assert body["passed"] is True
    assert body["counts_as_evidence"] is True and body["standing"] == "recorded by verifier agent verifier-v"
    assert body["probe"] == "public-contract-regression"
    assert body["candidate"] == created["id"]
    assert body["gates"]["evidence"]["status"] == "passed"
    assert body["gates"]["auto_promotion"]["status"] == "passed"
    assert body["fact_status"] is None
    detail = api.get(f"/api/v1/candidates/{created['id']}/").json()
    assert [r["id"] for r in detail["replays"]] == [body["id"]]


def test_a_replay_without_probe_or_passed_is_400(world, api):
    created = submit(api)
    response = api.post(f"/api/v1/candidates/{created['id']}/replays/", {"details": "x"}, format="json")
    assert response.status_code == 400
    assert {"probe", "passed"} <= set(response.json()["fields"])


def test_a_failed_replay_on_a_promoted_candidate_challenges_its_fact(world, api, verifier_api):
    created = submit(api)
    replay(verifier_api, created["id"])
    fact = api.post(f"/api/v1/candidates/{created['id']}/promote/", {"write": True}, format="json").json()["fact"]
    body = replay(verifier_api, created["id"], passed=False)
    assert body["fact_status"] == "challenged"
    assert api.get(f"/api/v1/facts/{fact['id']}/").json()["status"] == "challenged"
    found = api.post(
        "/api/v1/search/", {"query": "public API response schema contract", "mode": "keyword"}, format="json"
    )
    assert fact["id"] not in [r["id"] for r in found.json()["results"]]


# --- Promote -----------------------------------------------------------------------------------------
def test_promote_without_write_is_a_dry_run_that_changes_nothing(world, api, verifier_api):
    created = submit(api)
    replay(verifier_api, created["id"])
    before = counts()
    for body in ({}, {"write": False}):
        response = api.post(f"/api/v1/candidates/{created['id']}/promote/", body, format="json")
        assert response.status_code == 200
        decision = response.json()
        assert decision["id"] is None
        assert decision["decision"] == "dry_run"
        assert decision["dry_run"] is True and decision["recorded"] is False
        assert decision["fact"] is None and decision["fact_id"] is None
        assert decision["scorecard"]["write_flag"]["status"] == "failed"
        assert "would promote" in decision["reason"]
    assert counts() == before
    assert api.get(f"/api/v1/candidates/{created['id']}/").json()["promotion_status"] == "candidate"


def test_promote_with_write_and_every_gate_passed_writes_the_fact(world, api, verifier_api):
    created = submit(api)
    replay(verifier_api, created["id"])
    response = api.post(f"/api/v1/candidates/{created['id']}/promote/", {"write": True}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["decision"] == "promote" and body["recorded"] is True and body["dry_run"] is False
    assert body["outcome"] == "created"
    assert body["promotion_status"] == "active"
    assert all(g["status"] == "passed" for g in body["scorecard"].values())
    fact = body["fact"]
    assert fact["id"] == body["fact_id"]
    assert fact["content"] == RULE
    assert fact["domain"] == "repo:web/context"
    assert fact["status"] == "active"
    assert fact["origin"] == "promotion"
    assert fact["validated_by"] == "replay"
    assert fact["valid_for"] == ["public_api", "contract_change"]
    assert fact["not_valid_for"] == ["internal_refactor"]
    assert fact["verification"] == "public-contract-regression"
    assert fact["last_validated_at"] is not None
    assert fact["verification_contract_version"] == "awtl.memory_candidate.v2"


def test_a_promoted_fact_is_recalled_with_its_scope(world, api, verifier_api):
    created = submit(api)
    replay(verifier_api, created["id"])
    api.post(f"/api/v1/candidates/{created['id']}/promote/", {"write": True}, format="json")
    preamble = api.post(
        "/api/v1/preamble/", {"task": "Change the public API response schema", "repo": "web"}, format="json"
    )
    facts = preamble.json()["facts"]
    assert len(facts) == 1
    assert facts[0]["scope"] == (
        "applies to: public_api, contract_change; not for: internal_refactor; verify: public-contract-regression"
    )
    assert "not for: internal_refactor" in preamble.json()["text"]
    found = api.post("/api/v1/search/", {"query": "public API response schema", "mode": "keyword"}, format="json")
    assert found.json()["results"][0]["scope"] == facts[0]["scope"]


def test_promote_refuses_when_a_gate_has_not_passed_and_the_candidate_stays_open(world, api):
    created = submit(api)
    response = api.post(f"/api/v1/candidates/{created['id']}/promote/", {"write": True}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["decision"] == "refused"
    assert body["fact"] is None
    assert body["scorecard"]["evidence"]["status"] == "pending"
    assert body["promotion_status"] == "candidate"
    assert Fact.objects.count() == 0


def test_auto_promotion_refuses_an_unverified_candidate(world, api):
    created = submit(api)
    approve_candidate(candidate=Candidate.objects.get(pk=created["id"]), by=Actor.of_user(world.reviewer))
    body = api.post(f"/api/v1/candidates/{created['id']}/promote/", {"write": True, "auto": True}, format="json").json()
    assert body["decision"] == "refused"
    assert body["auto"] is True
    assert body["scorecard"]["auto_promotion"]["status"] == "failed"
    assert body["fact"] is None


def test_an_environment_blocker_is_never_promoted_through_the_api(world, api, verifier_api):
    created = submit(api, failure_class="environment_blocker", proposed_memory="e2e fails often; skip it.")
    replay(verifier_api, created["id"])
    approve_candidate(candidate=Candidate.objects.get(pk=created["id"]), by=Actor.of_user(world.admin_user))
    body = api.post(f"/api/v1/candidates/{created['id']}/promote/", {"write": True}, format="json").json()
    assert body["decision"] == "refused"
    assert body["scorecard"]["failure_class"]["status"] == "failed"
    assert body["promotion_status"] == "blocked"
    assert not Fact.objects.exists()


def test_a_decided_candidate_answers_409(world, api, verifier_api):
    created = submit(api)
    replay(verifier_api, created["id"])
    assert api.post(f"/api/v1/candidates/{created['id']}/promote/", {"write": True}, format="json").status_code == 201
    before = counts()
    for body in ({"write": True}, {}):
        response = api.post(f"/api/v1/candidates/{created['id']}/promote/", body, format="json")
        assert response.status_code == 409
        assert response.json()["code"] == "candidate_decided"
    assert api.post(f"/api/v1/candidates/{created['id']}/deny/", {}, format="json").status_code == 409
    assert counts() == before


def test_deny_is_201_and_final(world, api):
    created = submit(api)
    response = api.post(f"/api/v1/candidates/{created['id']}/deny/", {"reason": "Too broad."}, format="json")
    assert response.status_code == 201
    assert response.json()["decision"] == "deny"
    assert response.json()["promotion_status"] == "denied"
    assert api.post(f"/api/v1/candidates/{created['id']}/promote/", {"write": True}, format="json").status_code == 409


def test_each_decision_is_read_back_with_the_scorecard_it_was_made_on(world, api, verifier_api):
    created = submit(api)
    refused = api.post(f"/api/v1/candidates/{created['id']}/promote/", {"write": True}, format="json").json()
    replay(verifier_api, created["id"])
    promoted = api.post(f"/api/v1/candidates/{created['id']}/promote/", {"write": True}, format="json").json()
    detail = api.get(f"/api/v1/candidates/{created['id']}/").json()
    decisions = detail["decisions"]
    assert [d["id"] for d in decisions] == [refused["id"], promoted["id"]]
    assert [d["decision"] for d in decisions] == ["refused", "promote"]
    assert decisions[0]["scorecard"] == refused["scorecard"]
    assert decisions[1]["scorecard"] == promoted["scorecard"]
    assert decisions[0]["scorecard"]["evidence"]["status"] == "pending"
    assert decisions[1]["scorecard"]["evidence"]["status"] == "passed"
    assert decisions[1]["fact_id"] == detail["fact_id"] == promoted["fact"]["id"]
    assert decisions[0]["decided_by"] == "agent:coder-a"


# --- Isolation -----------------------------------------------------------------------------------------
def test_another_workspace_never_sees_or_touches_candidates(world, api):
    created = submit(api)
    intruder = client_for(world.foreign_agent)
    assert intruder.get("/api/v1/candidates/").json()["results"] == []
    before = counts()
    assert intruder.get(f"/api/v1/candidates/{created['id']}/").status_code == 404
    for path, body in (
        ("replays/", {"probe": "p", "passed": True}),
        ("promote/", {"write": True}),
        ("promote/", {}),
        ("deny/", {}),
    ):
        response = intruder.post(f"/api/v1/candidates/{created['id']}/{path}", body, format="json")
        assert response.status_code == 404, path
        assert response.json()["code"] == "candidate_not_found"
    assert counts() == before
    # Its own candidate with the same candidate_id is its own.
    DomainFactory(workspace=world.other_workspace, name="architecture")
    response = intruder.post("/api/v1/candidates/", {**DOC, "domain": "architecture", "repo": None}, format="json")
    assert response.status_code == 201
    assert response.json()["id"] != created["id"]


def test_a_none_domain_hides_its_candidates(world, api):
    created = submit(api)
    set_grant(role=world.coder_role, domain=world.repo_context, level="none", by=Actor.system("t"))
    assert api.get("/api/v1/candidates/").json()["results"] == []
    assert api.get(f"/api/v1/candidates/{created['id']}/").status_code == 404
    assert api.post(f"/api/v1/candidates/{created['id']}/promote/", {}, format="json").status_code == 404
    assert api.post("/api/v1/candidates/", {**DOC, "candidate_id": "new"}, format="json").status_code == 400
    planner = client_for(world.planner)
    assert planner.get(f"/api/v1/candidates/{created['id']}/").status_code == 200


def test_schema_documents_the_candidate_operations(world):
    schema = client_for(None).get("/api/v1/schema/?format=json").json()
    operation_ids = {op["operationId"] for path in schema["paths"].values() for op in path.values()}
    assert {
        "list_candidates",
        "submit_candidate",
        "get_candidate",
        "record_replay",
        "promote_candidate",
        "deny_candidate",
    } <= operation_ids
