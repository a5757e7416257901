"""XSS payloads stored in the text fields agents and people write render escaped on every page."""

import pytest
from guardian.shortcuts import assign_perm

from memory.actors import Actor
from memory.models import Candidate, Fact, Policy
from memory.services.facts import FactInput, propose_fact
from memory.services.lifecycle import challenge_fact
from tests.conftest import client_for

PAYLOAD = '<script>alert("xss")</script><img src=x onerror=alert(1)>'
ESCAPED = "&lt;script&gt;alert("


@pytest.fixture
def poisoned(world):
    api = client_for(world.coder)
    by = Actor.of_agent(world.coder)
    fact = propose_fact(
        domain=world.architecture,
        by=by,
        data=FactInput(topic=f"topic {PAYLOAD}", content=f"Fact {PAYLOAD}", memory_type="decision"),
    ).fact
    other = propose_fact(
        domain=world.architecture,
        by=by,
        data=FactInput(topic="cache", content=f"Cache {PAYLOAD} rule", memory_type="decision"),
    ).fact
    challenge_fact(fact=other, by=Actor.of_user(world.admin_user), reason="stale")
    from memory.services.policies import propose_policy

    propose_policy(domain=world.architecture, rule=f"Policy {PAYLOAD}", by=Actor.of_user(world.admin_user))
    candidate = api.post(
        "/api/v1/candidates/",
        {
            "schema": "awtl.memory_candidate.v2",
            "candidate_id": "xss",
            "failure_class": "agent_failure",
            "failure_type": PAYLOAD,
            "source_action_ids": ["a"],
            "root_cause_summary": PAYLOAD,
            "proposed_memory": f"Rule {PAYLOAD}",
            "scope": {"applies_to": [PAYLOAD], "does_not_apply_to": [PAYLOAD]},
            "evidence_refs": [PAYLOAD],
            "verification_probe_candidate": "probe",
            "promotion_status": "candidate",
            "requires_human_review": True,
            "domain": "architecture",
            "topic": "xss",
        },
        format="json",
    ).json()
    review = api.post(
        "/api/v1/reviews/",
        {
            "session_id": f"s {PAYLOAD}",
            "output": '```json\n{"recommendations": [{"path": "x.md", "recommended_layer": '
            '"project/context", "rationale": "'
            + PAYLOAD.replace('"', "'")
            + '", "suggested_memory_content": "'
            + PAYLOAD.replace('"', "'")
            + '"}]}\n```',
            "files": {"x.md": PAYLOAD},
        },
        format="json",
    ).json()
    run = api.post("/api/v1/runs/", {"task": f"Task {PAYLOAD}"}, format="json").json()
    api.post(
        f"/api/v1/runs/{run['id']}/bank/knowledge/", {"id": "k", "content": PAYLOAD, "tags": [PAYLOAD]}, format="json"
    )
    api.post(f"/api/v1/runs/{run['id']}/interventions/", {"step": 1, "reminder": PAYLOAD}, format="json")
    assign_perm("memory.review_domain", world.reviewer, world.architecture)
    assert Candidate.objects.filter(pk=candidate["id"]).exists() and Policy.objects.exists()
    return {
        "fact": fact.pk,
        "challenged": other.pk,
        "candidate": candidate["id"],
        "review": review["id"],
        "run": run["id"],
    }


def test_every_page_escapes_stored_payloads(world, client, poisoned):
    client.force_login(world.admin_user)
    pages = [
        "/",
        "/review/",
        f"/review/candidate/{poisoned['candidate']}/",
        f"/review/challenged/{poisoned['challenged']}/",
        f"/review/remember/{poisoned['review']}/",
        f"/review/runs/{poisoned['run']}/",
        "/memory/acme/",
        "/memory/acme/?q=fact",
        f"/memory/acme/facts/{poisoned['fact']}/",
        "/memory/acme/policies/",
        "/memory/acme/graph/",
        "/access/acme/",
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert PAYLOAD not in html, url
        assert "<script>alert(" not in html, url
    assert ESCAPED in client.get(f"/memory/acme/facts/{poisoned['fact']}/").content.decode()
    # JSON answers carry the text as data; the graph page inserts it with Cytoscape labels (text, not HTML).
    assert client.get("/memory/acme/graph.json")["Content-Type"] == "application/json"


def test_admin_changelists_escape_stored_payloads(world, client, poisoned):
    from tests.factories import UserFactory

    client.force_login(UserFactory(username="root-xss", is_superuser=True))
    for url in [
        "/admin/memory/fact/",
        "/admin/memory/policy/",
        "/admin/memory/candidate/",
        f"/admin/memory/fact/{poisoned['fact']}/change/",
    ]:
        html = client.get(url).content.decode()
        assert "<script>alert(" not in html, url


def test_memory_browser_query_count_is_bounded(world, client, django_assert_max_num_queries):
    by = Actor.of_agent(world.coder)
    for i in range(30):
        propose_fact(
            domain=world.architecture,
            by=by,
            data=FactInput(topic=f"t{i}", content=f"Service {i} listens on port {9000 + i}.", memory_type="decision"),
        )
    client.force_login(world.admin_user)
    with django_assert_max_num_queries(12):
        response = client.get("/memory/acme/")
    assert len(response.context["facts"]) == 30
    assert Fact.objects.count() == 30
