"""Held candidates in the review queue (issue 18): completed in place, kept listed after an
approval until their gates pass, and every candidate that needs a person or a replay is listed."""

from __future__ import annotations

import json

import pytest
from guardian.shortcuts import assign_perm

from memory.actors import Actor
from memory.models import AuditEvent, Candidate
from memory.services.facts import FactInput, propose_fact
from memory.services.promotion import promote
from tests.memory.test_services_promotion import reload, replay, submit


def listed(client, **params) -> dict[int, str]:
    """Candidate pk → its `waiting on` label, as the queue lists them."""
    page = client.get("/review/", {"kind": "candidate", **params})
    assert page.status_code == 200
    return {e.obj.pk: e.obj.waiting_label for e in page.context["entries"] if e.kind == "candidate"}


def complete(client, candidate: Candidate, **data):
    return client.post(f"/review/candidate/{candidate.pk}/complete/", data, HTTP_HX_REQUEST="true")


@pytest.fixture
def reviewer(world, client, reviewer_reviews_world_domains):
    client.force_login(world.reviewer)
    return client


def test_the_completion_form_is_shown_only_for_held_candidates(world, reviewer):
    held = submit(world, requires_human_review=True, scope={"applies_to": ["public_api"]})
    ready = submit(world, candidate_id="memcand-ready", requires_human_review=True)
    html = reviewer.get(f"/review/candidate/{held.pk}/").content.decode()
    assert 'data-testid="completion-form"' in html
    assert 'name="does_not_apply_to"' in html and 'name="evidence_refs"' not in html  # only what is missing
    assert "Waiting on scope / anti-scope" in html
    other = reviewer.get(f"/review/candidate/{ready.pk}/").content.decode()
    assert 'data-testid="completion-form"' not in other


def test_posting_the_completion_stores_it_and_redraws_the_gates(world, reviewer):
    held = submit(world, requires_human_review=True, scope={"applies_to": ["public_api"]})
    response = complete(reviewer, held, does_not_apply_to="internal_refactor\n\ndocs\n", note="seen in run 12")
    assert response.status_code == 200
    assert "queue-changed" in response["HX-Trigger"]
    html = response.content.decode()
    assert 'data-testid="completion-done"' in html
    assert "<strong>scope</strong>: passed" in html
    assert 'data-testid="completion-form"' not in html  # nothing left to complete
    fresh = reload(held)
    assert fresh.does_not_apply_to == ["internal_refactor", "docs"] and fresh.promotion_status == "candidate"
    event = AuditEvent.objects.get(verb="candidate.completed")
    assert event.detail["note"] == "seen in run 12"
    assert event.detail["added"] == {"does_not_apply_to": ["internal_refactor", "docs"]}


def test_a_nul_character_is_refused_before_anything_is_written(world, reviewer):
    held = submit(world, requires_human_review=True, scope={"applies_to": ["public_api"]})
    response = complete(reviewer, held, does_not_apply_to="docs\x00")
    assert response.status_code in (400, 422)  # the malformed-request middleware, else the form
    assert reload(held).does_not_apply_to == []
    assert not AuditEvent.objects.filter(verb="candidate.completed").exists()


@pytest.mark.parametrize(
    "data",
    [
        {"does_not_apply_to": "   \n  "},  # nothing to add
        {"does_not_apply_to": "docs", "note": "n" * 501},
        {"does_not_apply_to": "x" * 201},
        {"evidence_refs": "ci:1"},  # traceability already passes: not held on it
    ],
)
def test_bad_input_answers_422_with_the_input_kept_and_writes_nothing(world, reviewer, data):
    held = submit(world, requires_human_review=True, scope={"applies_to": ["public_api"]})
    events = AuditEvent.objects.count()
    response = complete(reviewer, held, **data)
    assert response.status_code == 422
    html = response.content.decode()
    assert 'data-testid="completion-error"' in html and 'data-testid="gates"' in html
    if "x" * 201 in data.get("does_not_apply_to", ""):
        assert "x" * 201 in html  # the reviewer's input is kept
    fresh = reload(held)
    assert fresh.does_not_apply_to == [] and fresh.evidence_refs == ["judge:contract-verifier"]
    assert AuditEvent.objects.count() == events


def test_a_held_candidate_stays_listed_after_approval_until_completed_then_approved(world, reviewer):
    held = submit(world, requires_human_review=True, scope={"applies_to": ["public_api"]})
    assert held.pk in listed(reviewer)
    approved = reviewer.post(f"/review/candidate/{held.pk}/decide/", {"action": "approve"}, HTTP_HX_REQUEST="true")
    assert approved.status_code == 200
    fresh = reload(held)
    assert fresh.human_approved_at is not None and fresh.fact_id is None
    assert listed(reviewer)[held.pk] == "approved, waiting on scope / anti-scope"
    detail = reviewer.get(f"/review/candidate/{held.pk}/").content.decode()
    assert 'data-testid="completion-form"' in detail and "Approved, waiting on scope" in detail
    assert complete(reviewer, held, does_not_apply_to="internal_refactor").status_code == 200
    assert listed(reviewer)[held.pk] == "approved, ready to promote"
    reviewer.post(f"/review/candidate/{held.pk}/decide/", {"action": "approve"}, HTTP_HX_REQUEST="true")
    promoted = reload(held)
    assert promoted.promotion_status == "active" and promoted.fact.not_valid_for == ["internal_refactor"]
    assert held.pk not in listed(reviewer)


def test_candidates_without_human_review_are_listed_while_they_wait_on_a_person_or_a_replay(world, reviewer):
    unverified = submit(world, candidate_id="memcand-unverified")
    self_replayed = submit(world, candidate_id="memcand-self")
    replay(world, self_replayed, passed=True, by=Actor.of_agent(world.coder))  # the submitter's: does not count
    verified = submit(world, candidate_id="memcand-verified")
    replay(world, verified, passed=True)  # a verifier's: the agent may promote it, no person needed
    held = submit(world, candidate_id="memcand-held", scope={"applies_to": ["public_api"]})
    replay(world, held, passed=True)
    failed = submit(world, candidate_id="memcand-failed")
    replay(world, failed, passed=False)
    blocked = submit(world, candidate_id="memcand-blocked", failure_class="environment_blocker")
    labels = listed(reviewer)
    assert labels[unverified.pk] == "waiting on a replay or a person's approval"
    assert labels[self_replayed.pk] == "waiting on a replay or a person's approval"
    assert labels[held.pk] == "waiting on scope / anti-scope"
    assert labels[failed.pk] == "waiting on a replay or a person's approval"
    assert verified.pk not in labels and blocked.pk not in labels
    html = reviewer.get("/review/").content.decode()
    assert 'data-testid="entry-waiting">waiting on scope / anti-scope<' in html  # the list says what it waits on
    # A person's approval is evidence where the rules say so: approving the unverified one promotes it.
    reviewer.post(f"/review/candidate/{unverified.pk}/decide/", {"action": "approve"}, HTTP_HX_REQUEST="true")
    assert reload(unverified).promotion_status == "active"


def test_a_reviewer_of_another_domain_cannot_complete_it(world, client):
    assign_perm("memory.review_domain", world.reviewer, world.architecture)
    held = submit(world, domain=world.conventions, scope={"applies_to": ["public_api"]})
    for user in (world.reviewer, world.outsider_reviewer):
        client.force_login(user)
        assert held.pk not in listed(client)
        assert client.get(f"/review/candidate/{held.pk}/").status_code == 404
        assert complete(client, held, does_not_apply_to="docs").status_code == 404
    client.logout()
    assert client.post(f"/review/candidate/{held.pk}/complete/", {"does_not_apply_to": "docs"}).status_code == 302
    assert reload(held).does_not_apply_to == []
    assert not AuditEvent.objects.filter(verb="candidate.completed").exists()


def test_completing_a_candidate_decided_meanwhile_answers_409(world, reviewer):
    held = submit(world, requires_human_review=True, scope={"applies_to": ["public_api"]})
    reviewer.post(f"/review/candidate/{held.pk}/decide/", {"action": "deny", "reason": "no"}, HTTP_HX_REQUEST="true")
    response = complete(reviewer, held, does_not_apply_to="docs")
    assert response.status_code == 409 and "already decided" in response.content.decode()
    assert reload(held).does_not_apply_to == []


def test_a_plain_form_post_completes_and_returns_to_the_item_page(world, reviewer):
    held = submit(world, requires_human_review=True, scope={"applies_to": ["public_api"]})
    response = reviewer.post(f"/review/candidate/{held.pk}/complete/", {"does_not_apply_to": "docs"})
    assert response.status_code == 302 and response["Location"] == f"/review/candidate/{held.pk}/"
    page = reviewer.get(response["Location"]).content.decode()
    assert "Added anti-scope" in page and "<strong>scope</strong>" in page
    assert reload(held).does_not_apply_to == ["docs"]


def test_a_candidate_waiting_on_no_person_is_not_completed(world, reviewer):
    ready = submit(world)
    replay(world, ready, passed=True)  # verified independently: the agent's to promote
    response = complete(reviewer, ready, does_not_apply_to="docs")
    assert response.status_code == 422 and "Nothing holds this candidate back" in response.content.decode()
    assert reload(ready).does_not_apply_to == ["internal_refactor"]


def test_a_possible_conflict_left_by_a_promotion_is_a_queue_item(world, reviewer):
    existing = propose_fact(
        domain=world.architecture,
        data=FactInput(topic="team", content="Mia leads the platform team.", memory_type="profile"),
        by=Actor.of_agent(world.coder2),
    ).fact
    candidate = submit(world, topic="team", proposed_memory="Omar leads the platform team.")
    replay(world, candidate, passed=True)
    decision = promote(candidate=candidate, by=Actor.of_agent(world.coder), write=True)
    assert decision.outcome == "possible_conflict"
    page = reviewer.get("/review/", {"kind": "possible"})
    conflicts = [e.obj for e in page.context["entries"]]
    assert [(c.existing_id, c.proposed_id) for c in conflicts] == [(existing.pk, decision.fact_id)]
    assert json.loads(json.dumps(page.context["counts"]))["possible"] == 1
