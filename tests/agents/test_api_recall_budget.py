"""Issue 22, point 1: the recall endpoints' round trips. A preamble or a search reads what it needs
in a few queries and writes nothing on the request path (its episode, counters and exposures go
through the recall buffer), and every access rule still holds on the very next request: nothing
about a key, its grants, the policies or the notes is cached between requests."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.services import revoke_agent, rotate_key
from memory import recalls
from memory.actors import Actor
from memory.models import Episode, Exposure
from memory.services.embedding import embed_missing
from memory.services.notes import update_notes
from memory.services.policies import deactivate_policy
from memory.services.tenancy import set_grant
from tests.conftest import client_for
from tests.factories import FactFactory, PolicyFactory

TASK = "Fix the flaky deploy pipeline for the billing service"
# Steady state (term statistics cached, the key's last use noted within the minute):
# auth · context (policies, notes, episode id) · lexical ranking with its facts.
PREAMBLE_QUERIES = 3
# auth · lexical ranking with its facts and the episode id.
KEYWORD_QUERIES = 2
# auth · lexical · semantic · recency · graph · the hits with the episode id · MMR similarities.
HYBRID_QUERIES = 7


@pytest.fixture
def deferred_recalls(settings, monkeypatch):
    """The recall buffer as served in production (background mode), except that nothing flushes it
    behind the test's back: the test calls `flush()` itself, inside its transaction."""
    settings.ENGRAM_RECALL_MODE = "background"
    fresh = recalls.RecallBuffer()
    monkeypatch.setattr(recalls, "buffer", fresh)
    monkeypatch.setattr(recalls.RecallBuffer, "_run", lambda self: None)
    return fresh


@pytest.fixture
def facts(world):
    made = [
        FactFactory(
            domain=world.architecture, topic="deploys", content="The deploy pipeline retries flaky steps twice."
        ),
        FactFactory(
            domain=world.architecture, topic="deploys", content="Billing service deploys need a second approver."
        ),
        FactFactory(
            domain=world.conventions, topic="pipelines", content="Flaky pipeline steps get a ticket, not a retry."
        ),
    ]
    embed_missing()
    return made


def _measure(api, path, body):
    api.post(path, body, format="json")  # warms the per-process caches (term statistics, lexemes)
    with CaptureQueriesContext(connection) as queries:
        response = api.post(path, body, format="json")
    assert response.status_code == 200, response.content
    return response.json(), [q["sql"] for q in queries.captured_queries]


def _writes(sql: list[str]) -> list[str]:
    return [q for q in sql if q.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))]


def test_the_preamble_stays_within_its_query_budget_and_writes_nothing(world, api, facts, deferred_recalls):
    PolicyFactory(domain=world.conventions, rule="Never edit an issued invoice.")
    update_notes(agent=world.coder, notes="remember the billing freeze", by=Actor.of_agent(world.coder))
    body, sql = _measure(api, "/api/v1/preamble/", {"task": TASK})
    assert len(sql) <= PREAMBLE_QUERIES, sql
    assert _writes(sql) == []
    assert body["facts"] and body["policies"] and "billing freeze" in body["working_memory"]
    # The episode the answer names is written by the buffer's flush, with what was served.
    assert not Episode.objects.filter(pk=body["episode_id"]).exists()
    deferred_recalls.flush()
    episode = Episode.objects.get(pk=body["episode_id"])
    assert (episode.agent_id, episode.kind, episode.title) == (world.coder.pk, "dispatch", TASK)
    assert Exposure.objects.filter(episode_id=episode.pk).count() == len(body["facts"]) + len(body["policies"])


@pytest.mark.parametrize(("mode", "budget"), [("keyword", KEYWORD_QUERIES), ("hybrid", HYBRID_QUERIES)])
def test_search_stays_within_its_query_budget_and_writes_nothing(world, api, facts, deferred_recalls, mode, budget):
    body, sql = _measure(api, "/api/v1/search/", {"query": "flaky deploy pipeline", "mode": mode})
    assert len(sql) <= budget, sql
    assert _writes(sql) == []
    assert body["results"]
    deferred_recalls.flush()
    episode = Episode.objects.get(pk=body["episode_id"])
    assert (episode.agent_id, episode.kind) == (world.coder.pk, "search")
    assert set(episode.links.values_list("fact_id", flat=True)) == {hit["id"] for hit in body["results"]}


def test_a_search_without_hits_opens_no_episode(world, api, facts, deferred_recalls):
    body = api.post("/api/v1/search/", {"query": "zebra quasar", "mode": "keyword"}, format="json").json()
    assert body["results"] == [] and body["episode_id"] is None
    deferred_recalls.flush()
    assert not Episode.objects.filter(kind="search").exists()


def test_a_revoked_key_is_refused_on_the_very_next_request(world, api, facts):
    assert api.post("/api/v1/preamble/", {"task": TASK}, format="json").status_code == 200
    revoke_agent(agent=world.coder, by=Actor.system("test"))
    response = api.post("/api/v1/preamble/", {"task": TASK}, format="json")
    assert response.status_code == 401 and response.json()["code"] == "key_revoked"
    assert api.post("/api/v1/search/", {"query": "flaky deploy"}, format="json").status_code == 401


def test_a_rotated_key_stops_working_on_the_very_next_request(world, api, facts):
    assert api.post("/api/v1/search/", {"query": "flaky deploy"}, format="json").status_code == 200
    new_key = rotate_key(agent=world.coder, by=Actor.system("test"))
    assert api.post("/api/v1/search/", {"query": "flaky deploy"}, format="json").status_code == 401
    fresh = client_for(None)
    fresh.credentials(HTTP_AUTHORIZATION=f"Bearer {new_key}")
    assert fresh.post("/api/v1/search/", {"query": "flaky deploy"}, format="json").status_code == 200


def test_a_new_none_grant_hides_the_domain_on_the_very_next_request(world, api, facts):
    rule = PolicyFactory(domain=world.architecture, rule="Ask before adding a datastore.")
    before = api.post("/api/v1/preamble/", {"task": TASK}, format="json").json()
    assert any(f["domain"] == "architecture" for f in before["facts"])
    assert any(rule.rule in line for line in before["policies"])
    set_grant(role=world.coder_role, domain=world.architecture, level="none", by=Actor.system("test"))
    after = api.post("/api/v1/preamble/", {"task": TASK}, format="json").json()
    assert all(f["domain"] != "architecture" for f in after["facts"])
    assert not any(rule.rule in line for line in after["policies"])
    for mode in ("keyword", "semantic", "hybrid"):
        results = api.post("/api/v1/search/", {"query": "deploy pipeline", "mode": mode}, format="json").json()
        assert all(hit["domain"] != "architecture" for hit in results["results"]), mode
    # Another role of the same workspace still sees it.
    planner = client_for(world.planner).post("/api/v1/preamble/", {"task": TASK}, format="json").json()
    assert any(f["domain"] == "architecture" for f in planner["facts"])


def test_policy_and_notes_changes_show_on_the_very_next_preamble(world, api, facts):
    assert api.post("/api/v1/preamble/", {"task": TASK}, format="json").json()["policies"] == []
    rule = PolicyFactory(domain=world.conventions, rule="Never edit an issued invoice.")
    assert api.post("/api/v1/preamble/", {"task": TASK}, format="json").json()["policies"] == [
        "- [conventions] Never edit an issued invoice."
    ]
    deactivate_policy(policy=rule, by=Actor.system("test"))
    assert api.post("/api/v1/preamble/", {"task": TASK}, format="json").json()["policies"] == []
    update_notes(agent=world.coder, notes="first draft", by=Actor.of_agent(world.coder))
    assert api.post("/api/v1/preamble/", {"task": TASK}, format="json").json()["working_memory"] == "first draft"
    update_notes(agent=world.coder, notes="second draft", by=Actor.of_agent(world.coder))
    assert api.post("/api/v1/preamble/", {"task": TASK}, format="json").json()["working_memory"] == "second draft"


def test_policies_keep_the_preamble_order_with_repo_labels_and_roles(world, api):
    later = PolicyFactory(domain=world.conventions, rule="Second conventions rule.")
    first = PolicyFactory(domain=world.conventions, rule="First conventions rule.", required_role=world.planner_role)
    first.created_at = later.created_at.replace(year=later.created_at.year - 1)
    first.save(update_fields=["created_at"])
    PolicyFactory(domain=world.repo_context, rule="Web rule.")
    PolicyFactory(domain=world.architecture, rule="Architecture rule.")
    assert api.post("/api/v1/preamble/", {"task": "short"}, format="json").json()["policies"] == [
        "- [architecture] Architecture rule.",
        "- [repo:web/context] Web rule.",
        "- [conventions] First conventions rule. (role: planner)",
        "- [conventions] Second conventions rule.",
    ]


def test_recall_items_render_exactly_as_drf_would(world, facts):
    """RecalledFactOut and SearchHitOut build their JSON directly (issue 22): field for field what
    DRF's generic rendering of their declared fields answers."""
    from rest_framework import serializers

    from agents.operations.serializers import RecalledFactOut, SearchHitOut
    from memory.search.hybrid import search_memory

    promoted = FactFactory(
        domain=world.repo_context,
        topic="deploys",
        content="Deploy the web app with the blue-green script.",
        valid_for=["web"],
        not_valid_for=["batch jobs"],
        verification="run scripts/check-deploy",
    )
    embed_missing()
    hits = search_memory(agent=world.coder, query="deploy pipeline web blue-green", record=False).hits
    assert promoted.pk in {h.fact.pk for h in hits} and len(hits) > 1
    for hit in hits:
        assert SearchHitOut().to_representation(hit) == serializers.Serializer.to_representation(SearchHitOut(), hit)
        fact = hit.fact
        assert RecalledFactOut().to_representation(fact) == serializers.Serializer.to_representation(
            RecalledFactOut(), fact
        )
