"""Bounded pushes and reads over the API (issue 13.5, 13.6): the policy budget and the per-policy
length answer 409/400 and write nothing; every list has one documented maximum page size."""

import pytest
from django.test import override_settings

from agents import operations
from memory.actors import Actor
from memory.models import AuditEvent, Conflict, Policy, Workspace
from memory.services.policies import policy_line, rule_max
from memory.services.tenancy import set_grant
from tests.conftest import client_for
from tests.factories import CandidateFactory, FactFactory, PolicyFactory

SYSTEM = Actor.system("test")
LISTS = ["/api/v1/facts/", "/api/v1/policies/", "/api/v1/conflicts/", "/api/v1/candidates/"]
HUGE = "99999999999999999999"


@pytest.fixture
def writable(world):
    set_grant(role=world.coder_role, domain=world.architecture, level="write", by=SYSTEM)
    return world


def _state():
    active = sorted(Policy.objects.active().values_list("pk", flat=True))
    return Policy.objects.count(), active, AuditEvent.objects.count()


# --- Bounded pushes ----------------------------------------------------------------------------
def test_propose_policy_past_the_budget_is_409_with_the_numbers_and_writes_nothing(writable):
    existing = PolicyFactory(domain=writable.architecture, rule="Use UTC everywhere.")
    now = len(policy_line(existing))
    Workspace.objects.filter(pk=writable.workspace.pk).update(policy_budget_chars=now + 10)
    before = _state()
    response = client_for(writable.coder).post(
        "/api/v1/policies/", {"domain": "architecture", "rule": "Deploy only on Tuesdays."}, format="json"
    )
    assert response.status_code == 409, response.json()
    body = response.json()
    assert body["code"] == "policy_budget_exceeded"
    assert {"code", "detail", "fields"} <= set(body)
    after = now + 1 + len("- [architecture] Deploy only on Tuesdays.")
    assert body["budget"] == {"chars": now, "chars_after": after, "budget": now + 10}
    assert _state() == before


def test_supersede_policy_past_the_budget_is_409_and_the_old_version_stays_live(writable):
    policy = PolicyFactory(domain=writable.architecture, rule="Short.")
    Workspace.objects.filter(pk=writable.workspace.pk).update(policy_budget_chars=len(policy_line(policy)))
    before = _state()
    response = client_for(writable.coder).post(
        f"/api/v1/policies/{policy.pk}/supersede/", {"rule": "A longer revision of the rule."}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["code"] == "policy_budget_exceeded"
    assert _state() == before
    ok = client_for(writable.coder).post(f"/api/v1/policies/{policy.pk}/supersede/", {"rule": "Brief."}, format="json")
    assert ok.status_code == 201


@pytest.mark.parametrize("path", ["/api/v1/policies/", "supersede"])
def test_a_rule_past_the_per_policy_limit_is_400_on_rule(writable, path):
    policy = PolicyFactory(domain=writable.architecture)
    url = f"/api/v1/policies/{policy.pk}/supersede/" if path == "supersede" else path
    body = {"rule": "x" * (rule_max() + 1)} | ({} if path == "supersede" else {"domain": "architecture"})
    before = _state()
    response = client_for(writable.coder).post(url, body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert "rule" in response.json()["fields"]
    assert _state() == before


def test_a_legitimate_proposal_within_the_budget_is_201(writable):
    response = client_for(writable.coder).post(
        "/api/v1/policies/", {"domain": "architecture", "rule": "x" * rule_max()}, format="json"
    )
    assert response.status_code == 201
    preamble = client_for(writable.planner).post("/api/v1/preamble/", {"task": "hi"}, format="json").json()
    assert len("\n".join(preamble["policies"])) <= writable.workspace.policy_budget_chars


# --- Bounded reads ------------------------------------------------------------------------------
@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize(
    ("query", "field"),
    [
        (f"limit={HUGE}", "limit"),
        ("limit=1000000", "limit"),
        ("limit=201", "limit"),
        ("limit=0", "limit"),
        ("limit=-5", "limit"),
        ("limit=ten", "limit"),
        ("limit=1.5", "limit"),
        (f"offset={HUGE}", "offset"),
        ("offset=-1", "offset"),
        ("offset=x", "offset"),
    ],
)
def test_out_of_range_pages_are_400_on_that_field(world, api, path, query, field):
    response = api.get(f"{path}?{query}")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_input"
    assert set(response.json()["fields"]) == {field}


@pytest.mark.parametrize("path", LISTS)
def test_the_largest_page_and_offset_are_accepted(world, api, path):
    assert api.get(f"{path}?limit=200&offset=1000000").status_code == 200
    assert api.get(f"{path}?limit=1").status_code == 200


@override_settings(ENGRAM_API_MAX_PAGE_SIZE=3)
def test_no_list_returns_more_than_the_maximum_page(world, api):
    for i in range(5):
        FactFactory(domain=world.architecture, topic=f"t{i}")
        PolicyFactory(domain=world.architecture)
        CandidateFactory(domain=world.architecture)
        winner = FactFactory(domain=world.architecture, topic=f"c{i}")
        loser = FactFactory(
            domain=world.architecture, topic=f"c{i}", superseded_by=winner, superseded_at=winner.created_at
        )
        Conflict.objects.create(
            workspace=world.workspace,
            domain=world.architecture,
            topic=f"c{i}",
            existing=winner,
            proposed=loser,
            winner=winner,
            loser=loser,
            rule="veracity",
            similarity=0.8,
        )
    for path in LISTS:
        page = api.get(f"{path}?limit=3").json()
        assert len(page["results"]) == 3 and page["count"] >= 5 and page["next"]
        assert api.get(f"{path}?limit=4").status_code == 400


def test_the_mcp_conflict_list_follows_the_same_page_rule(world):
    for limit, offset in ((10**20, 0), (0, 0), (10, -1), (10, 10**20)):
        with pytest.raises(Exception) as caught:
            operations.list_conflicts(world.coder, {}, limit=limit, offset=offset)
        result = operations.error_result(caught.value)
        assert result is not None and result.status == 400
        assert result.body["code"] == "invalid_input"
    assert operations.list_conflicts(world.coder, {}, limit=200).status == 200


def test_the_schema_documents_the_page_bounds(world, api):
    schema = api.get("/api/v1/schema/?format=json").json()
    for path in LISTS:
        params = {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}
        assert "1–200" in params["limit"]["description"]
        assert "offset" in params


def test_a_memory_bank_holds_a_bounded_number_of_items(world, api, monkeypatch):
    monkeypatch.setattr("agents.runs.BANK_ITEMS_MAX", 3)
    run = api.post("/api/v1/runs/", {"task": "a long task"}, format="json").json()["id"]
    knowledge = f"/api/v1/runs/{run}/bank/knowledge/"
    for i in range(3):
        assert api.post(knowledge, {"id": f"k{i}", "content": "x"}, format="json").status_code == 201
    before = AuditEvent.objects.count()
    full = api.post(knowledge, {"id": "k3", "content": "x"}, format="json")
    assert full.status_code == 409 and full.json()["code"] == "bank_full" and "id" in full.json()["fields"]
    assert AuditEvent.objects.count() == before
    assert api.post(knowledge, {"id": "k0", "content": "replaced"}, format="json").status_code == 200
    procedural = {"id": "p0", "content": "ran make", "outcome": "worked"}
    assert api.post(f"/api/v1/runs/{run}/bank/procedural/", procedural, format="json").status_code == 201
    bank = api.get(f"/api/v1/runs/{run}/bank/").json()
    assert len(bank["knowledge"]) == 3 and len(bank["procedural"]) == 1
