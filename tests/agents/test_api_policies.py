"""Policy and conflict endpoints: write grants, supersession, visibility and input errors."""

import pytest

from memory.actors import Actor
from memory.models import AuditEvent, Conflict, Policy
from memory.services.policies import deactivate_policy
from memory.services.tenancy import set_grant
from tests.conftest import client_for
from tests.factories import DomainFactory, FactFactory, PolicyFactory

SYSTEM = Actor.system("test")


@pytest.fixture
def writable(world):
    set_grant(role=world.coder_role, domain=world.architecture, level="write", by=SYSTEM)
    set_grant(role=world.coder_role, domain=world.repo_context, level="write", by=SYSTEM)
    return world


def _counts():
    return Policy.objects.count(), AuditEvent.objects.count()


def _conflict(domain, topic="deploys"):
    winner = FactFactory(domain=domain, topic=topic, veracity="human_stated")
    loser = FactFactory(domain=domain, topic=topic, superseded_by=winner, superseded_at=winner.created_at)
    return Conflict.objects.create(
        workspace=domain.workspace,
        domain=domain,
        topic=topic,
        existing=winner,
        proposed=loser,
        winner=winner,
        loser=loser,
        rule="veracity",
        similarity=0.8,
    )


# --- POST policies/ --------------------------------------------------------------------------
def test_propose_policy_without_write_is_403_and_writes_nothing(world):
    set_grant(role=world.coder_role, domain=world.architecture, level="read", by=SYSTEM)
    before = _counts()
    response = client_for(world.coder).post(
        "/api/v1/policies/", {"domain": "architecture", "rule": "UTC."}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_memory_permission"
    assert set(response.json()) == {"code", "detail", "fields"}
    assert _counts() == before


def test_propose_policy_with_write_is_201_with_the_policy(writable):
    fact = FactFactory(domain=writable.architecture)
    before = AuditEvent.objects.count()
    response = client_for(writable.coder).post(
        "/api/v1/policies/",
        {
            "domain": "context",
            "repo": "web",
            "rule": "Run make lint.",
            "required_role": "planner",
            "derived_from": [fact.pk],
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["domain"] == "repo:web/context"
    assert body["repo"] == "web"
    assert body["rule"] == "Run make lint."
    assert body["required_role"] == "planner"  # advisory: kept and shown, hides nothing
    assert body["active"] is True
    assert body["superseded_by"] is None
    assert body["derived_from"] == [fact.pk]
    assert AuditEvent.objects.count() == before + 1
    assert AuditEvent.objects.filter(verb="policy.proposed", target_id=body["id"]).exists()


def test_required_role_is_advisory_every_agent_still_lists_the_policy(writable):
    client_for(writable.coder).post(
        "/api/v1/policies/",
        {"domain": "architecture", "rule": "Plan first.", "required_role": "planner"},
        format="json",
    )
    results = client_for(writable.coder2).get("/api/v1/policies/").json()["results"]
    assert [(p["rule"], p["required_role"]) for p in results] == [("Plan first.", "planner")]


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"domain": "nowhere", "rule": "x"}, "domain", "unknown_domain"),
        ({"domain": "not a label!", "rule": "x"}, "domain", "invalid_domain"),
        ({"domain": "architecture", "rule": "x" * 2001}, "rule", "invalid_input"),
        ({"domain": "architecture", "rule": ""}, "rule", "invalid_input"),
        ({"domain": "architecture", "rule": ["a", "list"]}, "rule", "invalid_input"),
        ({"domain": "architecture"}, "rule", "invalid_input"),
        ({"domain": "architecture", "rule": "x", "required_role": "nobody"}, "required_role", "unknown_role"),
        ({"domain": "architecture", "rule": "x", "derived_from": "1,2"}, "derived_from", "invalid_input"),
        ({"domain": "architecture", "rule": "x", "derived_from": [999999]}, "derived_from", "unknown_fact"),
        ({"domain": 12, "rule": {"no": "dict"}}, "rule", "invalid_input"),
    ],
)
def test_propose_policy_bad_input_is_400_with_field_errors_and_writes_nothing(writable, body, field, code):
    before = _counts()
    response = client_for(writable.coder).post("/api/v1/policies/", body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == code
    assert field in response.json()["fields"]
    assert _counts() == before


def test_propose_policy_in_a_none_domain_is_an_unknown_domain(writable):
    set_grant(role=writable.coder_role, domain=writable.conventions, level="none", by=SYSTEM)
    response = client_for(writable.coder).post(
        "/api/v1/policies/", {"domain": "conventions", "rule": "x"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "unknown_domain"


def test_propose_policy_malformed_json_is_400(writable):
    before = _counts()
    response = client_for(writable.coder).post("/api/v1/policies/", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_json"
    assert _counts() == before


# --- POST policies/{id}/supersede/ -----------------------------------------------------------
def test_supersede_policy_is_201_then_409_on_the_old_one(writable):
    client = client_for(writable.coder)
    old = client.post("/api/v1/policies/", {"domain": "architecture", "rule": "v1"}, format="json").json()
    response = client.post(
        f"/api/v1/policies/{old['id']}/supersede/", {"rule": "v2", "reason": "clearer"}, format="json"
    )
    assert response.status_code == 201, response.json()
    new = response.json()
    assert new["rule"] == "v2" and new["active"] is True
    listed = {p["id"]: p for p in client.get("/api/v1/policies/").json()["results"]}
    assert listed[old["id"]]["superseded_by"] == new["id"]
    assert listed[old["id"]]["active"] is False
    assert listed[old["id"]]["supersede_reason"] == "clearer"

    before = _counts()
    again = client.post(f"/api/v1/policies/{old['id']}/supersede/", {"rule": "v2b"}, format="json")
    assert again.status_code == 409
    assert again.json()["code"] == "policy_not_live"
    assert _counts() == before


def test_supersede_policy_without_write_is_403(writable):
    policy = PolicyFactory(domain=writable.conventions)  # no grant row: read
    before = _counts()
    response = client_for(writable.coder).post(
        f"/api/v1/policies/{policy.pk}/supersede/", {"rule": "v2"}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_memory_permission"
    assert _counts() == before


def test_supersede_policy_of_another_workspace_or_none_domain_is_404(writable):
    foreign = PolicyFactory(domain=DomainFactory(workspace=writable.other_workspace, name="architecture"))
    set_grant(role=writable.coder_role, domain=writable.conventions, level="none", by=SYSTEM)
    hidden = PolicyFactory(domain=writable.conventions)
    before = _counts()
    for policy in (foreign, hidden):
        response = client_for(writable.coder).post(
            f"/api/v1/policies/{policy.pk}/supersede/", {"rule": "v2"}, format="json"
        )
        assert response.status_code == 404
        assert response.json()["code"] == "policy_not_found"
    assert _counts() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "rule"),
        ({"rule": ""}, "rule"),
        ({"rule": "x" * 2001}, "rule"),
        ({"rule": "x", "reason": "r" * 501}, "reason"),
    ],
)
def test_supersede_policy_bad_input_is_400_and_writes_nothing(writable, body, field):
    policy = PolicyFactory(domain=writable.architecture)
    before = _counts()
    response = client_for(writable.coder).post(f"/api/v1/policies/{policy.pk}/supersede/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert _counts() == before


# --- GET policies/ ---------------------------------------------------------------------------
def test_list_policies_hides_none_domains_and_other_workspaces(world):
    visible = PolicyFactory(domain=world.architecture, rule="Visible.")
    PolicyFactory(domain=world.conventions, rule="Hidden by none.")
    PolicyFactory(domain=DomainFactory(workspace=world.other_workspace, name="architecture"), rule="Foreign.")
    set_grant(role=world.coder_role, domain=world.conventions, level="none", by=SYSTEM)
    body = client_for(world.coder).get("/api/v1/policies/").json()
    assert [p["id"] for p in body["results"]] == [visible.pk]
    assert body["count"] == 1
    planner_rules = {p["rule"] for p in client_for(world.planner).get("/api/v1/policies/").json()["results"]}
    assert planner_rules == {"Visible.", "Hidden by none."}


def test_list_policies_filters_on_active(world):
    live = PolicyFactory(domain=world.architecture)
    off = PolicyFactory(domain=world.architecture)
    deactivate_policy(policy=off, by=Actor.of_user(world.admin_user))
    client = client_for(world.coder)
    assert [p["id"] for p in client.get("/api/v1/policies/?active=true").json()["results"]] == [live.pk]
    assert [p["id"] for p in client.get("/api/v1/policies/?active=false").json()["results"]] == [off.pk]
    assert len(client.get("/api/v1/policies/").json()["results"]) == 2
    bad = client.get("/api/v1/policies/?active=maybe")
    assert bad.status_code == 400
    assert "active" in bad.json()["fields"]


def test_list_policies_shows_only_derived_from_facts_the_agent_can_see(world):
    seen = FactFactory(domain=world.architecture)
    hidden = FactFactory(domain=world.conventions)
    set_grant(role=world.coder_role, domain=world.conventions, level="none", by=SYSTEM)
    policy = PolicyFactory(domain=world.architecture)
    policy.derived_from.add(seen, hidden)
    body = client_for(world.coder).get("/api/v1/policies/").json()
    assert body["results"][0]["derived_from"] == [seen.pk]


def test_list_policies_query_count_is_flat(world, django_assert_max_num_queries):
    for _ in range(8):
        policy = PolicyFactory(domain=world.architecture, required_role=world.planner_role)
        policy.derived_from.add(FactFactory(domain=world.architecture))
    client = client_for(world.coder)
    with django_assert_max_num_queries(6):
        response = client.get("/api/v1/policies/")
    assert len(response.json()["results"]) == 8


# --- GET conflicts/ --------------------------------------------------------------------------
def test_list_conflicts_hides_none_domains_and_other_workspaces(world):
    shown = _conflict(world.architecture)
    _conflict(world.conventions)
    _conflict(DomainFactory(workspace=world.other_workspace, name="architecture"))
    set_grant(role=world.coder_role, domain=world.conventions, level="none", by=SYSTEM)
    response = client_for(world.coder).get("/api/v1/conflicts/")
    assert response.status_code == 200
    body = response.json()
    assert [c["id"] for c in body["results"]] == [shown.pk]
    assert body["results"][0]["winner"] == shown.winner_id
    assert body["results"][0]["loser"] == shown.loser_id
    assert body["results"][0]["rule"] == "veracity"
    assert body["results"][0]["domain"] == "architecture"


def test_list_conflicts_filters_on_domain_and_topic(world):
    a = _conflict(world.architecture, topic="deploys")
    b = _conflict(world.architecture, topic="naming")
    c = _conflict(world.repo_context, topic="deploys")
    client = client_for(world.coder)
    assert [x["id"] for x in client.get("/api/v1/conflicts/?topic=deploys").json()["results"]] == [c.pk, a.pk]
    assert [x["id"] for x in client.get("/api/v1/conflicts/?domain=architecture").json()["results"]] == [b.pk, a.pk]
    assert [x["id"] for x in client.get("/api/v1/conflicts/?domain=repo:web/context").json()["results"]] == [c.pk]
    unknown = client.get("/api/v1/conflicts/?domain=nowhere")
    assert unknown.status_code == 400
    assert unknown.json()["code"] == "unknown_domain"


def test_list_conflicts_query_count_is_flat(world, django_assert_max_num_queries):
    for i in range(6):
        _conflict(world.architecture, topic=f"t{i}")
    with django_assert_max_num_queries(5):
        response = client_for(world.coder).get("/api/v1/conflicts/")
    assert response.json()["count"] == 6


def test_schema_documents_the_new_operations(world):
    schema = client_for(None).get("/api/v1/schema/?format=json").json()
    operation_ids = {op["operationId"] for path in schema["paths"].values() for op in path.values()}
    assert {
        "propose_policy",
        "supersede_policy",
        "list_policies",
        "list_memory_conflicts",
        "get_my_notes",
        "update_my_notes",
        "record_observation",
    } <= operation_ids
