"""Provenance served, and the session key (issue 20, point 4): GET facts/ and facts/{id}/ answer
where a fact came from (file, layer, rationale, review, candidate, session key); `session_key` is set
by a review's approval, by consolidation and by POST facts/, and filters search in every mode."""

from __future__ import annotations

import pytest

from memory.actors import Actor
from memory.models import Fact, WorkspaceMembership
from memory.services.facts import FactInput, propose_fact
from memory.services.promotion import parse_candidate_document, promote, record_replay, submit_candidate
from review.models import RememberReview
from review.services import approve_review
from tests.conftest import client_for
from tests.factories import AgentFactory, FactFactory
from tests.review.samples import FILES, OUTPUT

pytestmark = pytest.mark.usefixtures("reviewer_reviews_world_domains")

PROVENANCE_KEYS = {"source", "file", "layer", "rationale", "review_id", "candidate_id", "session_key"}


def _approved_review(world, api, session_id: str = "turn-7") -> RememberReview:
    WorkspaceMembership.objects.filter(workspace=world.workspace, user=world.reviewer).update(is_admin=True)
    body = {"session_id": session_id, "repo": "web", "output": OUTPUT, "files": FILES}
    submitted = api.post("/api/v1/reviews/", body, format="json")
    assert submitted.status_code == 201, submitted.content
    review = RememberReview.objects.get(pk=submitted.json()["id"])
    return approve_review(review=review, by=Actor.of_user(world.reviewer))


def test_a_fact_stored_by_a_review_serves_its_file_layer_rationale_review_and_session(world, api):
    review = _approved_review(world, api)
    stored = review.resolution["stored"]
    assert stored, review.resolution
    item = review.items.get(path=stored[0]["path"])
    answer = api.get(f"/api/v1/facts/{stored[0]['fact_id']}/")
    assert answer.status_code == 200, answer.content
    fact = answer.json()
    assert fact["session_key"] == "turn-7"
    assert set(fact["provenance"]) == PROVENANCE_KEYS
    assert fact["provenance"] == {
        "source": "remember_agent_human_approved",
        "file": item.path,
        "layer": item.layer,
        "rationale": item.effective_rationale,
        "review_id": review.pk,
        "candidate_id": None,
        "session_key": "turn-7",
    }


def test_the_fact_list_serves_provenance_without_a_query_per_fact(world, api, django_assert_max_num_queries):
    _approved_review(world, api)
    for i in range(20):
        FactFactory(domain=world.architecture, topic=f"t{i}", session_key="s-1")
    with django_assert_max_num_queries(8):
        answer = api.get("/api/v1/facts/?limit=50")
    results = answer.json()["results"]
    assert len(results) >= 22
    from_reviews = [r for r in results if r["provenance"]["review_id"] is not None]
    assert from_reviews and all(r["provenance"]["file"] for r in from_reviews)
    assert all(r["provenance"]["review_id"] is None for r in results if r["session_key"] == "s-1")


def test_a_promoted_fact_serves_its_candidate(world, api):
    document = {
        "schema": "awtl.memory_candidate.v2",
        "candidate_id": "memcand-prov",
        "failure_class": "agent_failure",
        "failure_type": "contract_mismatch",
        "source_action_ids": ["action-12"],
        "root_cause_summary": "Public response shape changed without updating contract evidence.",
        "proposed_memory": "When a public API response changes, update the contract artifact too.",
        "scope": {"applies_to": ["public_api"], "does_not_apply_to": ["internal_refactor"]},
        "evidence_refs": ["judge:contract-verifier"],
        "verification_probe_candidate": "public-contract-regression",
        "promotion_status": "candidate",
        "requires_human_review": False,
    }
    candidate, _ = submit_candidate(
        domain=world.architecture,
        topic="contracts",
        document=parse_candidate_document(document),
        by=Actor.of_agent(world.coder),
    )
    verifier = AgentFactory(workspace=world.workspace, role=world.coder_role, name="verifier-v", is_verifier=True)
    record_replay(candidate=candidate, by=Actor.of_agent(verifier), probe="public-contract-regression", passed=True)
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert decision.fact_id is not None
    fact = api.get(f"/api/v1/facts/{decision.fact_id}/").json()
    assert fact["provenance"]["candidate_id"] == candidate.pk
    assert fact["provenance"]["review_id"] is None
    assert fact["origin"] == "promotion"
    listed = api.get("/api/v1/facts/", {"topic": "contracts"}).json()["results"]
    assert [r["provenance"]["candidate_id"] for r in listed] == [candidate.pk]


def test_consolidation_sets_the_session_key_to_the_hot_tier_session(world, api):
    for content in ("The deploy script lives in bin/deploy.", "Staging deploys need a green CI run."):
        api.post("/api/v1/remember/", {"session_id": "sess-42", "content": content}, format="json")
    report = api.post("/api/v1/consolidate/", {"session_id": "sess-42"}, format="json").json()
    assert report["promoted"] == 2, report
    facts = Fact.objects.filter(origin="hot_tier")
    assert sorted(f.session_key for f in facts) == ["sess-42", "sess-42"]
    listed = api.get("/api/v1/facts/", {"session_key": "sess-42"}).json()
    assert listed["count"] == 2
    assert {r["session_key"] for r in listed["results"]} == {"sess-42"}


def test_post_facts_stores_the_session_key_stripped_and_a_batch_item_its_own(world, api):
    body = {
        "domain": "architecture",
        "topic": "queues",
        "content": "Jobs go through Celery.",
        "memory_type": "decision",
    }
    answer = api.post("/api/v1/facts/", {**body, "session_key": "  run-9  "}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["fact"]["session_key"] == "run-9"
    assert answer.json()["fact"]["provenance"]["session_key"] == "run-9"
    assert Fact.objects.get(pk=answer.json()["fact"]["id"]).session_key == "run-9"
    batch = api.post(
        "/api/v1/facts/batch/",
        {"items": [{**body, "topic": "cache", "content": "Redis caches sessions.", "session_key": "run-10"}]},
        format="json",
    ).json()
    assert batch["results"][0]["fact"]["session_key"] == "run-10"
    without = api.post("/api/v1/facts/", {**body, "topic": "db", "content": "PostgreSQL 16."}, format="json")
    assert without.json()["fact"]["session_key"] == ""


@pytest.mark.parametrize("session_key", ["x" * 201, 7, ["run-9"], {"a": 1}, True])
def test_a_bad_session_key_is_400_invalid_input_and_writes_nothing(world, api, session_key):
    before = Fact.objects.count()
    body = {"domain": "architecture", "topic": "q", "content": "Jobs go through Celery.", "memory_type": "decision"}
    answer = api.post("/api/v1/facts/", {**body, "session_key": session_key}, format="json")
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == "invalid_input"
    assert "session_key" in answer.json()["fields"]
    assert Fact.objects.count() == before
    searched = api.post("/api/v1/search/", {"query": "celery", "session_key": session_key}, format="json")
    assert searched.status_code == 400
    assert searched.json()["code"] == "invalid_input"
    assert "session_key" in searched.json()["fields"]
    batch = api.post("/api/v1/facts/batch/", {"items": [{**body, "session_key": session_key}]}, format="json").json()
    assert batch["results"][0]["status"] == 400 and "session_key" in batch["results"][0]["error"]["fields"]
    assert Fact.objects.count() == before


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_search_with_a_session_key_returns_only_that_sessions_facts_in_every_mode(world, api, mode):
    by = Actor.of_agent(world.coder)
    mine = propose_fact(
        domain=world.architecture,
        by=by,
        data=FactInput(
            topic="deploys", content="Deploys run from the release branch.", memory_type="decision", session_key="q-1"
        ),
    ).fact
    other = propose_fact(
        domain=world.conventions,
        by=by,
        data=FactInput(topic="deploy freeze", content="Deploys freeze on Fridays after noon.", memory_type="decision"),
    ).fact
    unscoped = api.post("/api/v1/search/", {"query": "deploys", "mode": mode}, format="json").json()
    assert {mine.pk, other.pk} <= {r["id"] for r in unscoped["results"]}
    scoped = api.post("/api/v1/search/", {"query": "deploys", "mode": mode, "session_key": "q-1"}, format="json")
    assert scoped.status_code == 200, scoped.content
    assert [r["id"] for r in scoped.json()["results"]] == [mine.pk]
    nothing = api.post(
        "/api/v1/search/", {"query": "deploys", "mode": mode, "session_key": "q-2"}, format="json"
    ).json()
    assert nothing["results"] == []


def test_a_session_key_filter_never_reaches_another_workspace(world):
    FactFactory(domain=world.architecture, topic="deploys", content="Deploys run from main.", session_key="shared")
    intruder = client_for(world.foreign_agent)
    assert intruder.get("/api/v1/facts/", {"session_key": "shared"}).json()["count"] == 0
    searched = intruder.post("/api/v1/search/", {"query": "deploys", "session_key": "shared"}, format="json").json()
    assert searched["results"] == []
