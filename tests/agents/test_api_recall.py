"""The Recall endpoints of API.md."""

from memory.actors import Actor
from memory.services.tenancy import set_grant
from tests.factories import FactFactory


def test_preamble_endpoint_returns_the_contract(world, api):
    FactFactory(domain=world.architecture, topic="deploys", content="The deploy pipeline retries flaky steps twice.")
    body = api.post("/api/v1/preamble/", {"task": "Fix the flaky deploy pipeline today"}, format="json").json()
    assert set(body) >= {"text", "policies", "working_memory", "facts", "episode_id"}
    assert body["facts"][0]["domain"] == "architecture"
    assert body["facts"][0]["content"] in body["text"]


def test_preamble_and_search_bad_input(world, api):
    assert api.post("/api/v1/preamble/", {}, format="json").status_code == 400
    assert api.post("/api/v1/preamble/", {"task": 5, "repo": "not a slug!"}, format="json").status_code == 400
    for body in [
        {},
        {"query": ""},
        {"query": "x", "mode": "fuzzy"},
        {"query": "x", "limit": 0},
        {"query": "x", "limit": 51},
        {"query": "x", "domain": "nope"},
        {"query": "x" * 3000},
    ]:
        response = api.post("/api/v1/search/", body, format="json")
        assert response.status_code == 400, body
        assert response.json()["fields"]


def test_search_endpoint_reports_mode_intent_and_voices(world, api):
    FactFactory(domain=world.architecture, topic="deploys", content="Production deploys happen on Tuesdays.")
    from memory.services.embedding import embed_missing

    embed_missing()
    body = api.post("/api/v1/search/", {"query": "when do we deploy to production?"}, format="json").json()
    assert body["mode"] == "hybrid"
    assert body["intent"] in {"general", "lookup", "recent", "relational"}
    hit = body["results"][0]
    assert set(hit["voices"]) == {"lexical", "semantic", "recency", "graph"}
    assert hit["voices"]["semantic"] == 1
    assert {"id", "domain", "topic", "content", "confidence", "memory_type", "score"} <= set(hit)
    keyword = api.post("/api/v1/search/", {"query": "Tuesdays", "mode": "keyword"}, format="json").json()
    assert keyword["results"][0]["voices"]["semantic"] is None


def test_search_hides_none_domains_and_other_workspaces(world, api):
    FactFactory(domain=world.architecture, topic="deploys", content="Production deploys happen on Tuesdays.")
    from memory.services.embedding import embed_missing
    from tests.conftest import client_for

    embed_missing()
    for mode in ("keyword", "semantic", "hybrid"):
        assert api.post("/api/v1/search/", {"query": "deploys Tuesdays", "mode": mode}, format="json").json()["results"]
        assert (
            client_for(world.foreign_agent)
            .post("/api/v1/search/", {"query": "deploys Tuesdays", "mode": mode}, format="json")
            .json()["results"]
            == []
        )
    set_grant(role=world.coder_role, domain=world.architecture, level="none", by=Actor.system("t"))
    for mode in ("keyword", "semantic", "hybrid"):
        assert (
            api.post("/api/v1/search/", {"query": "deploys Tuesdays", "mode": mode}, format="json").json()["results"]
            == []
        )
