"""Decisions as one use case (issue 17): the queue's candidate decision is one transaction, model
inference happens before any transaction opens, and approvals lock topics in one order."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from memory import embeddings
from memory.actors import Actor
from memory.errors import InvalidInput
from memory.models import AuditEvent, Candidate, Fact, PromotionDecision
from memory.services import promotion
from memory.services.promotion import decide_candidate, parse_candidate_document, submit_candidate
from review import services as review_services
from review.models import ReviewItem
from review.services import approve_review, submit_review

pytestmark = pytest.mark.usefixtures("reviewer_reviews_world_domains", "reviewer_is_workspace_admin")

RULE = "When a public API response schema changes, update the contract artifact and its evidence together."


def _candidate(world: Any, **overrides: Any) -> Candidate:
    document = {
        "candidate_id": "memcand-txn",
        "failure_class": "agent_failure",
        "source_action_ids": ["action-1"],
        "proposed_memory": RULE,
        "scope": {"applies_to": ["public_api"], "does_not_apply_to": ["internal_refactor"]},
        "evidence_refs": ["judge:contract"],
        "verification_probe_candidate": "contract-regression",
        "requires_human_review": True,
        **overrides,
    }
    candidate, _ = submit_candidate(
        domain=world.architecture,
        topic="contracts",
        document=parse_candidate_document(document),
        by=Actor.of_agent(world.coder),
    )
    return candidate


def _review(world: Any, paths: list[str]) -> Any:
    output = "```json\n" + json.dumps(
        {
            "recommendations": [
                {"path": path, "recommended_layer": "project/context", "suggested_memory_content": f"Note on {path}."}
                for path in paths
            ]
        }
    )
    return submit_review(agent=world.coder, session_id="turn-txn", output=output + "\n```", repo="web")


@pytest.fixture
def embeddings_outside_transactions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every embedding must run with no transaction open beyond the test's own (pytest-django's
    `db` wraps each test in one); returns the list of texts counts embedded, for assertions."""
    baseline = len(connection.atomic_blocks)
    real = embeddings.get_encoder
    calls: list[int] = []

    def guarded(*args: Any, **kwargs: Any) -> Any:
        assert len(connection.atomic_blocks) == baseline, "model inference inside a transaction"
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(embeddings, "get_encoder", guarded)
    return calls


# --- The queue's candidate decision ------------------------------------------------------------
def test_approving_from_the_queue_embeds_before_any_transaction_opens(world, embeddings_outside_transactions):
    candidate = _candidate(world)
    client = Client()
    client.force_login(world.reviewer)
    response = client.post(
        f"/review/candidate/{candidate.pk}/decide/", {"action": "approve", "reason": "checked"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    candidate.refresh_from_db()
    assert candidate.fact is not None and candidate.fact.content == RULE
    assert embeddings_outside_transactions  # the rule was embedded, outside the transaction


def test_edit_and_approve_stores_the_edited_text_embedded_outside_the_transaction(
    world, embeddings_outside_transactions
):
    candidate = _candidate(world)
    decision = decide_candidate(
        candidate=candidate, by=Actor.of_user(world.reviewer), action="edit_approve", edited_text="  Edited rule.  "
    )
    assert decision.decision == PromotionDecision.Kind.PROMOTE
    assert Fact.objects.get(pk=decision.fact_id).content == "Edited rule."
    assert embeddings_outside_transactions


def test_deny_without_a_reason_is_refused_by_the_service_and_writes_nothing(world):
    candidate = _candidate(world)
    before = (PromotionDecision.objects.count(), AuditEvent.objects.count())
    with pytest.raises(InvalidInput) as refused:
        decide_candidate(candidate=candidate, by=Actor.of_user(world.reviewer), action="deny", reason="   ")
    assert refused.value.code == "reason_required"
    assert (PromotionDecision.objects.count(), AuditEvent.objects.count()) == before
    assert not Candidate.objects.get(pk=candidate.pk).is_decided


def test_the_queue_answers_422_with_the_message_when_a_deny_has_no_reason(world):
    candidate = _candidate(world)
    client = Client()
    client.force_login(world.reviewer)
    response = client.post(f"/review/candidate/{candidate.pk}/decide/", {"action": "deny"})
    assert response.status_code == 422
    assert "Say why you deny it" in response.content.decode()


def test_the_queue_answers_400_to_an_action_the_item_does_not_have(world):
    candidate = _candidate(world)
    client = Client()
    client.force_login(world.reviewer)
    response = client.post(f"/review/candidate/{candidate.pk}/decide/", {"action": "restore"})
    assert response.status_code == 400 and response.content == b"Unknown action for this item."


def test_revise_approve_and_promote_commit_together_or_not_at_all(world, monkeypatch):
    candidate = _candidate(world)

    def refuse(**kwargs: Any) -> Any:
        raise InvalidInput("The write path refused it.", code="refused_for_the_test")

    monkeypatch.setattr(promotion, "propose_fact_locked", refuse)
    with pytest.raises(InvalidInput):
        decide_candidate(
            candidate=candidate, by=Actor.of_user(world.reviewer), action="edit_approve", edited_text="Edited rule."
        )
    fresh = Candidate.objects.get(pk=candidate.pk)
    assert fresh.proposed_memory == RULE and fresh.human_approved_at is None  # no half-decision left
    assert not AuditEvent.objects.filter(verb__in=["candidate.revised", "candidate.approved"]).exists()


def test_a_text_changed_after_it_was_embedded_is_embedded_again_outside_the_lock(
    world, monkeypatch, embeddings_outside_transactions
):
    candidate = _candidate(world, requires_human_review=False)
    promotion.approve_candidate(candidate=candidate, by=Actor.of_user(world.reviewer))
    real_plan = promotion._plan_vector
    planned_texts: list[str] = []

    def plan_then_revise(candidate: Candidate, text: str) -> Any:
        planned = real_plan(candidate, text)
        planned_texts.append(text)
        if len(planned_texts) == 1:  # a reviser slips in between the embedding and the lock
            Candidate.objects.filter(pk=candidate.pk).update(proposed_memory="Revised meanwhile.")
        return planned

    monkeypatch.setattr(promotion, "_plan_vector", plan_then_revise)
    decision = promotion.promote(candidate=candidate, by=Actor.of_user(world.reviewer), write=True)
    assert planned_texts == [RULE, "Revised meanwhile."]
    fact = Fact.objects.get(pk=decision.fact_id)
    assert fact.content == "Revised meanwhile."
    assert embeddings.cosine(list(fact.embedding), embeddings.embed_text("contracts: Revised meanwhile.")) > 0.999


# --- Remember review approval ------------------------------------------------------------------
def test_approving_a_remember_review_embeds_before_any_transaction_opens(world, embeddings_outside_transactions):
    review = _review(world, ["zeta.md", "alpha.md"])
    approved = approve_review(review=review, by=Actor.of_user(world.reviewer))
    assert len(approved.resolution["stored_ids"]) == 2
    assert embeddings_outside_transactions


def test_an_edit_between_embedding_and_approval_is_embedded_again_outside_the_lock(
    world, monkeypatch, embeddings_outside_transactions
):
    review = _review(world, ["alpha.md"])
    real_prepare = review_services._prepare_vectors
    rounds: list[int] = []

    def prepare_then_edit(review: Any, by: Actor) -> Any:
        planned = real_prepare(review, by)
        rounds.append(1)
        if len(rounds) == 1:  # the reviewer's autosave lands after the embedding
            ReviewItem.objects.filter(review=review).update(edited_content="Edited meanwhile.")
        return planned

    monkeypatch.setattr(review_services, "_prepare_vectors", prepare_then_edit)
    approved = approve_review(review=review, by=Actor.of_user(world.reviewer))
    assert len(rounds) == 2
    assert Fact.objects.get(pk=approved.resolution["stored_ids"][0]).content == "Edited meanwhile."


def test_an_approval_locks_the_domains_it_writes_in_sorted_order_before_writing(world):
    review = _review(world, ["zeta.md", "alpha.md", "mid.md"])
    assert list(review.items.order_by("order").values_list("path", flat=True)) == ["zeta.md", "alpha.md", "mid.md"]
    with CaptureQueriesContext(connection) as queries:
        approve_review(review=review, by=Actor.of_user(world.reviewer))
    locked: list[int] = []
    first_insert = None
    for n, query in enumerate(queries.captured_queries):
        for domain_id in re.findall(r"fact-domain:(\d+)'", query["sql"]):
            if int(domain_id) not in locked:
                locked.append(int(domain_id))
        if first_insert is None and query["sql"].startswith('INSERT INTO "memory_fact"'):
            first_insert = n
    # issue 34: a write reads its domain's nearest facts whatever their topic, so it locks the domain
    assert locked and locked == sorted(locked)
    assert first_insert is not None
