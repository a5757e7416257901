"""The candidate admin (SPEC §7): gate columns, filters, and actions that go through the gate's
services — approve (a person's approval), deny, dry-run promote (writes nothing), promote."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from memory.actors import Actor
from memory.models import AuditEvent, Candidate, Fact, PromotionDecision
from memory.services.promotion import parse_candidate_document, record_replay, submit_candidate
from tests.factories import AgentFactory

CHANGELIST = "admin:memory_candidate_changelist"


@pytest.fixture
def admin_client_of(world) -> Client:
    world.admin_user.is_superuser = True
    world.admin_user.save()
    client = Client()
    client.force_login(world.admin_user)
    return client


def candidate(world, candidate_id: str, **overrides) -> Candidate:
    doc = {
        "candidate_id": candidate_id,
        "failure_class": "agent_failure",
        "proposed_memory": f"Rule of {candidate_id}: update the contract artifact with the schema.",
        "scope": {"applies_to": ["public_api"], "does_not_apply_to": ["internal_refactor"]},
        "verification_probe_candidate": "contract-regression",
        "source_action_ids": ["action-1"],
        **overrides,
    }
    created, _ = submit_candidate(
        domain=world.architecture,
        topic="contracts",
        document=parse_candidate_document(doc),
        by=Actor.of_agent(world.coder),
    )
    return created


def act(client: Client, action: str, *candidates: Candidate) -> list[str]:
    response = client.post(
        reverse(CHANGELIST), {"action": action, "_selected_action": [c.pk for c in candidates]}, follow=True
    )
    assert response.status_code == 200
    return [str(m) for m in response.context["messages"]]


def test_changelist_shows_gate_columns_and_filters(world, admin_client_of):
    candidate(world, "held-one", scope={"applies_to": ["public_api"]})
    candidate(world, "blocked-one", failure_class="environment_blocker")
    page = admin_client_of.get(reverse(CHANGELIST)).content.decode()
    assert "held-one" in page and "blocked-one" in page
    assert "✗ failed" in page and "… pending" in page
    assert "held: no anti-scope" in page  # the reason is the badge's title
    for gate, header in [
        ("failure_class", "Class gate"),
        ("evidence", "Evidence"),
        ("provenance", "Provenance"),
        ("scope", "Scope"),
        ("human_review", "Human review"),
    ]:
        column = page[page.index(f'<th scope="col" class="column-gate_{gate}">') :]
        assert f"<span>{header}</span>" in column[: column.index("</th>")], gate
    filtered = admin_client_of.get(reverse(CHANGELIST), {"promotion_status__exact": "held"}).content.decode()
    assert "held-one" in filtered and "blocked-one" not in filtered
    by_class = admin_client_of.get(reverse(CHANGELIST), {"failure_class__exact": "environment_blocker"})
    assert "blocked-one" in by_class.content.decode() and "held-one" not in by_class.content.decode()


def test_approve_action_records_a_human_approval(world, admin_client_of):
    c = candidate(world, "c1")
    messages = act(admin_client_of, "approve_selected", c)
    c.refresh_from_db()
    assert c.human_approved_by == world.admin_user
    assert any("approved; every gate passes" in m for m in messages)
    assert AuditEvent.objects.filter(verb="candidate.approved", target_id=c.pk, actor_user=world.admin_user).exists()


def test_dry_run_action_shows_the_decision_and_writes_nothing(world, admin_client_of):
    c = candidate(world, "c1")
    before = (Fact.objects.count(), PromotionDecision.objects.count(), AuditEvent.objects.count())
    messages = act(admin_client_of, "dry_run_selected", c)
    assert any("Dry run, nothing written: would not promote: evidence" in m for m in messages)
    assert (Fact.objects.count(), PromotionDecision.objects.count(), AuditEvent.objects.count()) == before


def test_deny_action_denies_and_reports_refusals(world, admin_client_of):
    c = candidate(world, "c1")
    act(admin_client_of, "deny_selected", c)
    c.refresh_from_db()
    assert c.promotion_status == "denied"
    messages = act(admin_client_of, "deny_selected", c)
    assert any("already decided" in m for m in messages)
    assert PromotionDecision.objects.filter(candidate=c).count() == 1


def test_promote_action_writes_the_fact_when_every_gate_passes(world, admin_client_of):
    c = candidate(world, "c1")
    verifier = AgentFactory(workspace=world.workspace, role=world.coder_role, name="verifier-v", is_verifier=True)
    record_replay(candidate=c, by=Actor.of_agent(verifier), probe="contract-regression", passed=True)
    messages = act(admin_client_of, "promote_selected", c)
    c.refresh_from_db()
    assert c.promotion_status == "active" and c.fact_id is not None
    assert any("promoted as fact" in m for m in messages)
    page = admin_client_of.get(reverse("admin:memory_candidate_change", args=[c.pk])).content.decode()
    assert "replay #" in page  # the decision's scorecard, read back on the change page


def test_an_environment_blocker_stays_blocked_through_every_admin_action(world, admin_client_of):
    c = candidate(world, "env", failure_class="environment_blocker")
    act(admin_client_of, "approve_selected", c)
    act(admin_client_of, "promote_selected", c)
    c.refresh_from_db()
    assert c.promotion_status == "blocked"
    assert c.fact_id is None
    assert not Fact.objects.exists()
