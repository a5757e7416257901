"""`python manage.py mcp` over stdio with the official `mcp` client: the tools by their SPEC names,
answering exactly what the HTTP API answers for the same input."""

import asyncio
import os
import subprocess
import sys

import pytest
from django.db import connection
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from memory.services.embedding import embed_missing
from tests.conftest import client_for
from tests.factories import FactFactory
from tests.procs import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SPEC_TOOLS = {
    "get_preamble",
    "search_memory",
    "propose_fact",
    "supersede_fact",
    "propose_policy",
    "list_memory_conflicts",
    "update_my_notes",
    "record_observation",
    "remember",
    "consolidate_memory",
    "submit_remember_review",
    "memory_update_status",
    "memory_save_knowledge",
    "memory_save_procedural",
    "memory_delete",
    "create_memory_run",
    "finish_memory_run",
}
# Differ between two writes of the same input by nature: row ids, clocks, the episode opened.
VOLATILE = {"id", "created_at", "observed_at", "last_mentioned_at", "status_changed_at", "episode_id"}


def _env(key: str) -> dict[str, str]:
    return {
        **os.environ,
        "ENGRAM_DB_NAME": connection.settings_dict["NAME"],
        "ENGRAM_AGENT_KEY": key,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ENGRAM_RECALL_MODE": "sync",  # like this test process: recalls are written before the answer
    }


def _session(key: str, script):
    """Run `script(client)` against a fresh `manage.py mcp` subprocess; return what it returns."""
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp"], env=_env(key), cwd=str(ROOT))

    async def main():
        async with Client(params) as client:
            return await script(client)

    return asyncio.run(main())


def _stable(value, *also):
    if isinstance(value, dict):
        return {k: _stable(v, *also) for k, v in value.items() if k not in VOLATILE and k not in also}
    if isinstance(value, list):
        return [_stable(v, *also) for v in value]
    return value


@pytest.fixture
def facts(world):
    FactFactory(domain=world.architecture, topic="deploys", content="Production deploys happen on Tuesdays.")
    FactFactory(domain=world.architecture, topic="ci", content="CI runs the whole suite on every push to main.")
    FactFactory(domain=world.conventions, topic="reviews", content="Every pull request needs one approving review.")
    embed_missing()


def test_mcp_lists_the_tools_and_answers_like_the_api(world, facts):
    api = client_for(world.coder)
    search_input = {"query": "when do production deploys happen?", "mode": "keyword", "limit": 5}
    hybrid_input = {"query": "when do production deploys happen?", "limit": 5}
    fact_input = {
        "topic": "release-train",
        "content": "Release candidates are cut every second Monday.",
        "memory_type": "convention",
    }

    async def script(client):
        listed = await client.list_tools()
        keyword = await client.call_tool("search_memory", search_input)
        hybrid = await client.call_tool("search_memory", hybrid_input)
        proposed = await client.call_tool("propose_fact", {"domain": "architecture", **fact_input})
        refused = await client.call_tool("propose_fact", {"domain": "nope", **fact_input})
        return listed, keyword, hybrid, proposed, refused

    api_keyword = api.post("/api/v1/search/", search_input, format="json").json()
    api_hybrid = api.post("/api/v1/search/", hybrid_input, format="json").json()
    listed, keyword, hybrid, proposed, refused = _session(world.coder.plain_key, script)

    names = {tool.name for tool in listed.tools}
    assert names >= SPEC_TOOLS
    schema = next(t for t in listed.tools if t.name == "search_memory").input_schema
    assert {"query", "mode", "repo", "domain", "limit"} <= set(schema["properties"])

    # search_memory: the very same answer (only the recall episode opened per call differs).
    assert not keyword.is_error
    assert keyword.structured_content["results"], "the keyword search found nothing"
    assert _stable(keyword.structured_content, "score") == _stable(api_keyword, "score")
    # Scores carry each fact's decay at the moment of the call; the calls are seconds apart.
    assert [r["score"] for r in keyword.structured_content["results"]] == pytest.approx(
        [r["score"] for r in api_keyword["results"]], rel=1e-4
    )
    assert [r["id"] for r in keyword.structured_content["results"]] == [r["id"] for r in api_keyword["results"]]
    assert [r["id"] for r in hybrid.structured_content["results"]] == [r["id"] for r in api_hybrid["results"]]
    assert hybrid.structured_content["intent"] == api_hybrid["intent"]

    # propose_fact: the MCP answer is the API's serialisation of the row it wrote...
    assert not proposed.is_error
    body = proposed.structured_content
    assert body["outcome"] == "created"
    detail = api.get(f"/api/v1/facts/{body['fact']['id']}/").json()
    assert {k: detail[k] for k in body["fact"]} == body["fact"]
    # ...and the API answers the same input (in a sibling domain) with the same document.
    api_body = api.post("/api/v1/facts/", {"domain": "conventions", **fact_input}, format="json").json()
    assert api_body["outcome"] == "created"
    assert _stable({**body, "fact": {**body["fact"], "domain": "conventions"}}) == _stable(api_body)

    # Refusals carry the API's error body.
    api_refused = api.post("/api/v1/facts/", {"domain": "nope", **fact_input}, format="json")
    assert refused.is_error
    assert refused.structured_content == api_refused.json()
    assert refused.structured_content["code"] == "unknown_domain"


def test_mcp_memory_bank_tools_act_as_the_key_holder_only(world):
    other_run = client_for(world.coder2).post("/api/v1/runs/", {"task": "coder2's run"}, format="json").json()["id"]

    async def script(client):
        run = (await client.call_tool("create_memory_run", {"task": "Fix the flaky checkout test"})).structured_content
        run_id = run["id"]
        await client.call_tool("memory_update_status", {"run_id": run_id, "content": "reading tests"})
        await client.call_tool(
            "memory_save_knowledge", {"run_id": run_id, "id": "db", "content": "needs `make testdb`", "tags": ["ci"]}
        )
        await client.call_tool(
            "memory_save_procedural", {"run_id": run_id, "id": "p1", "content": "`pytest` failed", "outcome": "failed"}
        )
        deleted = await client.call_tool("memory_delete", {"run_id": run_id, "id": "p1"})
        silent = await client.call_tool("memory_log_decision", {"run_id": run_id, "step": 2})
        bank = await client.call_tool("memory_get_bank", {"run_id": run_id})
        foreign = await client.call_tool("memory_get_bank", {"run_id": other_run})
        finished = await client.call_tool("finish_memory_run", {"run_id": run_id, "offer_candidates": True})
        return run_id, deleted, silent, bank, foreign, finished

    run_id, deleted, silent, bank, foreign, finished = _session(world.coder.plain_key, script)
    assert deleted.structured_content == {"deleted": [{"kind": "procedural", "id": "p1"}]}
    assert silent.structured_content["intervened"] is False
    api_bank = client_for(world.coder).get(f"/api/v1/runs/{run_id}/bank/").json()
    [candidate] = finished.structured_content["candidates"]
    assert api_bank["knowledge"][0]["candidate_id"] == candidate["id"]  # offered after the MCP read
    assert _stable(bank.structured_content, "run_status", "candidate_id") == _stable(
        api_bank, "run_status", "candidate_id"
    )
    assert bank.structured_content["status"] == "reading tests"
    assert foreign.is_error
    assert foreign.structured_content["code"] == "run_not_found"
    assert candidate["origin"] == "memory_agent"


def test_mcp_refuses_to_start_without_a_valid_key(world):
    for key in ("", "engram_not-a-key"):
        proc = subprocess.run(
            [sys.executable, "manage.py", "mcp"],
            cwd=ROOT,
            env=_env(key),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode != 0
        assert proc.stdout == ""
        assert "ENGRAM_AGENT_KEY" in proc.stderr


def test_mcp_passes_a_possible_conflict_on_as_the_api_answers_it(world):
    api = client_for(world.coder)
    team = {"domain": "architecture", "topic": "team", "memory_type": "convention"}
    first = api.post("/api/v1/facts/", {**team, "content": "Mia leads the platform team."}, format="json").json()

    async def script(client):
        proposed = await client.call_tool("propose_fact", {**team, "content": "Omar leads the platform team."})
        listed = await client.call_tool("list_memory_conflicts", {"status": "open"})
        return proposed, listed

    proposed, listed = _session(world.coder.plain_key, script)
    assert not proposed.is_error
    body = proposed.structured_content
    assert (body["outcome"], body["compared_with"]) == ("possible_conflict", first["fact"]["id"])
    assert body["conflict_id"] and body["reason"].startswith("unsure")
    rows = listed.structured_content["results"]
    assert [(r["id"], r["status"], r["winner"]) for r in rows] == [(body["conflict_id"], "open", None)]
