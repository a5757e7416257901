"""The Write and fact-reading endpoints of API.md, including bad input and `none` domains."""

import pytest

from memory.actors import Actor
from memory.models import AuditEvent, Fact, HotMemory
from memory.services.tenancy import set_grant
from tests.conftest import client_for
from tests.factories import AgentFactory

GOOD = {
    "domain": "architecture",
    "topic": "deploys",
    "content": "Production deploys happen on Tuesdays.",
    "memory_type": "convention",
}


def test_propose_returns_201_with_the_fact_and_outcome(world, api):
    response = api.post("/api/v1/facts/", GOOD, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["outcome"] == "created"
    assert body["fact"]["domain"] == "architecture"
    assert body["fact"]["confidence"] == 0.7
    again = api.post(
        "/api/v1/facts/", {**GOOD, "content": "Deploys to production happen on Tuesdays."}, format="json"
    ).json()
    assert again["outcome"] == "re_mentioned"
    assert again["fact"]["id"] == body["fact"]["id"]
    assert again["fact"]["mention_count"] == 2


def test_repo_scoped_domain_by_label_or_by_repo_field(world, api):
    a = api.post("/api/v1/facts/", {**GOOD, "domain": "repo:web/context"}, format="json").json()
    b = api.post(
        "/api/v1/facts/",
        {**GOOD, "domain": "context", "repo": "web", "content": "Deploys need a green CI run."},
        format="json",
    ).json()
    assert a["fact"]["domain"] == b["fact"]["domain"] == "repo:web/context"
    assert a["fact"]["repo"] == "web"


@pytest.mark.parametrize(
    "patch,field",
    [
        ({"domain": "nowhere"}, "domain"),
        ({"domain": "repo:web/nowhere"}, "domain"),
        ({"memory_type": "rumour"}, "memory_type"),
        ({"veracity": "divine"}, "veracity"),
        ({"content": "x" * 20_001}, "content"),
        ({"content": ""}, "content"),
        ({"topic": "t" * 201}, "topic"),
        ({"observed_at": "yesterday"}, "observed_at"),
        ({"source_observation_ids": "1,2"}, "source_observation_ids"),
        ({"source_observation_ids": [424242]}, "source_observation_ids"),
        ({"episode_id": 424242}, "episode_id"),
        ({"episode_id": "one"}, "episode_id"),
        ({"valid_until": "2001-01-01T00:00:00Z"}, "valid_until"),
    ],
)
def test_bad_input_gets_400_with_field_errors_and_writes_nothing(world, api, patch, field):
    before = (Fact.objects.count(), AuditEvent.objects.count())
    response = api.post("/api/v1/facts/", {**GOOD, **patch}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert field in body["fields"]
    assert isinstance(body["code"], str) and body["detail"]
    assert (Fact.objects.count(), AuditEvent.objects.count()) == before


def test_malformed_json_and_wrong_body_type_are_400(world, api):
    response = api.generic("POST", "/api/v1/facts/", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_json"
    assert api.post("/api/v1/facts/", [1, 2], format="json").status_code == 400


def test_none_grant_hides_the_domain_from_list_detail_and_writes(world, api):
    created = api.post("/api/v1/facts/", GOOD, format="json").json()["fact"]
    set_grant(role=world.coder_role, domain=world.architecture, level="none", by=Actor.system("t"))
    assert api.get("/api/v1/facts/").json()["results"] == []
    assert api.get(f"/api/v1/facts/{created['id']}/").status_code == 404
    assert api.post("/api/v1/facts/", GOOD, format="json").json()["code"] == "unknown_domain"
    # the planner role is unaffected
    planner = client_for(world.planner)
    assert [f["id"] for f in planner.get("/api/v1/facts/").json()["results"]] == [created["id"]]


def test_another_workspace_never_sees_facts(world, api):
    created = api.post("/api/v1/facts/", GOOD, format="json").json()["fact"]
    intruder = client_for(world.foreign_agent)
    assert intruder.get("/api/v1/facts/").json()["results"] == []
    assert intruder.get(f"/api/v1/facts/{created['id']}/").status_code == 404
    assert (
        intruder.post(f"/api/v1/facts/{created['id']}/supersede/", {"content": "x"}, format="json").status_code == 404
    )
    assert intruder.post("/api/v1/facts/", GOOD, format="json").status_code == 400  # no such domain there


def relay_client(world):
    """An agent a workspace admin marked as relaying people's words: it may state human_stated."""
    relay = AgentFactory(workspace=world.workspace, role=world.coder_role, name="chat-relay", relays_human_words=True)
    return client_for(relay)


def test_detail_shows_history_and_conflicts(world, api):
    human = relay_client(world).post("/api/v1/facts/", {**GOOD, "veracity": "human_stated"}, format="json")
    human = human.json()["fact"]
    lost = api.post(
        "/api/v1/facts/", {**GOOD, "content": "Production deploys happen on Fridays."}, format="json"
    ).json()
    assert lost["outcome"] == "conflict_lost"
    assert lost["fact"]["superseded_by"] == human["id"]
    detail = api.get(f"/api/v1/facts/{human['id']}/").json()
    assert {h["id"] for h in detail["history"]} == {human["id"], lost["fact"]["id"]}
    assert detail["conflicts"][0]["rule"] == "veracity"
    assert detail["conflicts"][0]["winner"] == human["id"]


def test_supersede_endpoint_and_409_on_the_second_time(world, api):
    fact = api.post("/api/v1/facts/", GOOD, format="json").json()["fact"]
    response = api.post(
        f"/api/v1/facts/{fact['id']}/supersede/",
        {"content": "Production deploys happen on Wednesdays.", "reason": "moved"},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["content"] == "Production deploys happen on Wednesdays."
    again = api.post(f"/api/v1/facts/{fact['id']}/supersede/", {"content": "Thursdays."}, format="json")
    assert again.status_code == 409
    assert again.json()["code"] == "fact_not_live"
    assert (
        api.post(f"/api/v1/facts/{response.json()['id']}/supersede/", {"content": ""}, format="json").status_code == 400
    )


def test_list_filters_and_current_only_by_default(world, api):
    stated = relay_client(world).post("/api/v1/facts/", {**GOOD, "veracity": "human_stated"}, format="json")
    assert stated.status_code == 201
    api.post("/api/v1/facts/", {**GOOD, "content": "Production deploys happen on Fridays."}, format="json")
    api.post("/api/v1/facts/", {**GOOD, "topic": "other", "content": "Backups run nightly."}, format="json")
    assert len(api.get("/api/v1/facts/").json()["results"]) == 2
    assert len(api.get("/api/v1/facts/?current=false").json()["results"]) == 3
    assert len(api.get("/api/v1/facts/?topic=deploys").json()["results"]) == 1
    assert api.get("/api/v1/facts/?status=bogus").status_code == 400


def test_list_query_count_is_bounded(world, api, django_assert_max_num_queries):
    for i in range(15):
        api.post(
            "/api/v1/facts/",
            {**GOOD, "topic": f"t{i}", "content": f"Service {i} listens on port {8000 + i}."},
            format="json",
        )
    with django_assert_max_num_queries(4):
        assert len(api.get("/api/v1/facts/").json()["results"]) == 15


def test_episodes_link_proposed_facts(world, api):
    episode = api.post("/api/v1/episodes/", {"kind": "session", "title": "deploy work"}, format="json")
    assert episode.status_code == 201
    fact = api.post("/api/v1/facts/", {**GOOD, "episode_id": episode.json()["id"]}, format="json")
    assert fact.status_code == 201
    assert api.post("/api/v1/episodes/", {"kind": ""}, format="json").status_code == 400


def test_remember_consolidate_harmonize_endpoints(world, api):
    r = api.post(
        "/api/v1/remember/",
        {
            "session_id": "s1",
            "content": "Deploy keys rotate every 90 days.",
            "domain": "architecture",
            "topic": "secrets",
        },
        format="json",
    )
    assert r.status_code == 201
    assert api.post("/api/v1/remember/", {"session_id": "s1", "content": ""}, format="json").status_code == 400
    assert (
        api.post("/api/v1/remember/", {"session_id": "s1", "content": "x", "domain": "nope"}, format="json").status_code
        == 400
    )
    report = api.post("/api/v1/consolidate/", {"session_id": "s1"}, format="json").json()
    assert report["status"] == "done" and report["promoted"] == 1
    assert HotMemory.objects.get().consolidated_fact_id is not None
    h = api.post("/api/v1/harmonize/", {"domain": "architecture"}, format="json").json()
    assert h["status"] == "done" and h["resolved"] == 0
