"""`python manage.py mcp` over stdio with the official `mcp` client: the tools by their SPEC names,
answering exactly what the HTTP API answers for the same input."""

import asyncio
import json
import os
import re
import subprocess
import sys
import time

import pytest
from django.db import connection, connections
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from agents import prompts
from memory.actors import Actor
from memory.models import WorkspaceMembership
from memory.search import voices
from memory.services.embedding import embed_missing
from memory.services.tenancy import set_grant
from review.models import RememberReview
from review.services import approve_review
from tests.agents.test_api_candidates import DOC
from tests.conftest import client_for
from tests.factories import FactFactory, PolicyFactory
from tests.procs import ROOT
from tests.review.samples import FILES, OUTPUT

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
    "harmonize_memory",
    "supersede_policy",
    "get_remember_review",
    "consume_remember_review",
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
        "ENGRAM_SITE_URL": "http://testserver",  # links absolute as the test client's are
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

    # Keyword scores weigh terms by PostgreSQL's statistics, which each process reads once every 5
    # minutes (voices.lexeme_frequencies): this process may hold ones read before an autoanalyze
    # the MCP server's fresh process sees (it failed so, now and then). Both read them anew here.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_fact")
    voices.forget_statistics()
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
    assert _stable(bank.structured_content, "run_status", "run_end_reason", "candidate_id") == _stable(
        api_bank, "run_status", "run_end_reason", "candidate_id"
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


# --- remember reviews: submit, wait, consume (issue 20) ------------------------------------------
def test_mcp_waits_on_a_remember_review_and_consumes_its_resolution(world):
    # Approved items land in domains created on approval, which only workspace admins decide (issue 16).
    WorkspaceMembership.objects.filter(workspace=world.workspace, user=world.reviewer).update(is_admin=True)

    def person_approves(review_id):
        try:
            approve_review(review=RememberReview.objects.get(pk=review_id), by=Actor.of_user(world.reviewer))
        finally:
            connections.close_all()  # this worker thread's connection

    async def script(client):
        submitted = await client.call_tool(
            "submit_remember_review", {"session_id": "turn-7", "repo": "web", "output": OUTPUT, "files": FILES}
        )
        review_id = submitted.structured_content["id"]
        early = await client.call_tool("consume_remember_review", {"review_id": review_id})
        started = time.monotonic()
        held = await client.call_tool("get_remember_review", {"review_id": review_id, "wait": 1})
        held_for = time.monotonic() - started
        waiting = asyncio.create_task(client.call_tool("get_remember_review", {"review_id": review_id, "wait": 25}))
        await asyncio.to_thread(person_approves, review_id)
        decided = time.monotonic()
        resolved = await waiting
        answered_after = time.monotonic() - decided
        consumed = await client.call_tool("consume_remember_review", {"review_id": review_id})
        again = await client.call_tool("consume_remember_review", {"review_id": review_id})
        too_long = await client.call_tool("get_remember_review", {"review_id": review_id, "wait": 31})
        return submitted, early, held, held_for, resolved, answered_after, consumed, again, too_long

    submitted, early, held, held_for, resolved, answered_after, consumed, again, too_long = _session(
        world.coder.plain_key, script
    )
    assert not submitted.is_error and submitted.structured_content["status"] == "pending"
    review_id = submitted.structured_content["id"]
    assert early.is_error and early.structured_content["code"] == "review_pending"

    # A wait holds for the whole second asked while the review is pending; a 25 s wait answers
    # soon after the person decides, whether the decision found it waiting or came first.
    assert not held.is_error and held.structured_content["status"] == "pending"
    assert held_for >= 0.9
    assert answered_after < 10
    body = resolved.structured_content
    assert not resolved.is_error and body["status"] == "approved"
    resolution = body["resolution"]
    assert resolution["approved"] is True
    assert resolution["selected_paths"] == ["docs/architecture.md", "CONTRIBUTING.md", "billing/rules.py"]
    assert len(resolution["stored_ids"]) == 3

    api = client_for(world.coder)
    assert not consumed.is_error and consumed.structured_content["status"] == "consumed"
    assert consumed.structured_content == api.get(f"/api/v1/reviews/{review_id}/").json()
    assert {k: v for k, v in consumed.structured_content.items() if k not in ("status", "consumed_at")} == {
        k: v for k, v in body.items() if k not in ("status", "consumed_at")
    }
    api_again = api.post(f"/api/v1/reviews/{review_id}/consume/")
    assert api_again.status_code == 409
    assert again.is_error and again.structured_content == api_again.json()
    assert again.structured_content["code"] == "review_already_consumed"
    assert too_long.is_error and too_long.structured_content == api.get(f"/api/v1/reviews/{review_id}/?wait=31").json()
    assert RememberReview.objects.get(pk=review_id).status == "consumed"


def test_mcp_offers_the_remember_prompt_with_the_clients_text(world):
    from engram_client import render_remember_prompt

    arguments = {
        "task": "Document how the ingest worker is deployed",
        "turn_summary": "Wrote the deployment notes and a helper script.",
        "artifacts": "docs/deploy.md, ./scripts/deploy.sh\nREADME.md",
    }

    async def script(client):
        return await client.list_prompts(), await client.get_prompt("remember", arguments)

    listed, got = _session(world.coder.plain_key, script)
    [remember] = [p for p in listed.prompts if p.name == "remember"]
    assert {(a.name, a.required) for a in remember.arguments} == {
        ("task", True),
        ("artifacts", True),
        ("turn_summary", False),
    }
    [message] = got.messages
    expected = render_remember_prompt(
        arguments["task"], arguments["turn_summary"], ["docs/deploy.md", "scripts/deploy.sh", "README.md"]
    )
    assert message.role == "user" and message.content.text == expected
    assert "remember.v1" in expected and "- scripts/deploy.sh\n- README.md" in expected and "$" not in expected


@pytest.mark.parametrize(
    ("task", "summary", "artifacts", "paths"),
    [
        ("t", "", "a.md", ["a.md"]),
        ("  a task  ", "  did things ", "a.md,a.md, ./b/c.py ,\n\n d.txt", ["a.md", "b/c.py", "d.txt"]),
        ("x" * 5000, "y" * 9000, ",".join(f"f{i}.md" for i in range(230)), [f"f{i}.md" for i in range(230)]),
    ],
)
def test_the_servers_remember_prompt_renders_as_the_client_renders_it(task, summary, artifacts, paths):
    from engram_client import render_remember_prompt

    assert prompts.render_remember_prompt(task, summary, artifacts) == render_remember_prompt(task, summary, paths)


def test_the_remember_prompt_needs_a_task_and_an_artifact():
    with pytest.raises(ValueError, match="artifact"):
        prompts.render_remember_prompt("a task", "", " , \n")
    with pytest.raises(ValueError, match="task"):
        prompts.render_remember_prompt("  ", "", "a.md")


# --- the tools issue 20 added answer what the API answers ----------------------------------------
def test_mcp_candidate_policy_and_harmonize_tools_answer_like_the_api(world, reviewer_reviews_world_domains):
    set_grant(role=world.coder_role, domain=world.architecture, level="write", by=Actor.system("test"))
    api = client_for(world.coder)
    policies = [PolicyFactory(domain=world.architecture, rule="Deploy on Tuesdays.") for _ in range(2)]
    twin_doc = {**DOC, "candidate_id": "memcand-over-http"}
    api_submitted = api.post("/api/v1/candidates/", twin_doc, format="json").json()
    api_replay = api.post(
        f"/api/v1/candidates/{api_submitted['id']}/replays/",
        {"probe": "public-contract-regression", "passed": True, "details": "ran in CI"},
        format="json",
    ).json()
    api_dry_run = api.post(f"/api/v1/candidates/{api_submitted['id']}/promote/", {}, format="json")
    api_policy = api.post(
        f"/api/v1/policies/{policies[1].pk}/supersede/", {"rule": "Deploy on Wednesdays.", "reason": "r"}, format="json"
    ).json()
    api_harmonized = api.post("/api/v1/harmonize/", {"domain": "architecture"}, format="json").json()

    async def script(client):
        submitted = (await client.call_tool("submit_candidate", DOC)).structured_content
        pk = submitted["id"]
        replay = await client.call_tool(
            "record_replay",
            {"candidate_pk": pk, "probe": "public-contract-regression", "passed": True, "details": "ran in CI"},
        )
        dry_run = await client.call_tool("promote_candidate", {"candidate_pk": pk})
        got = await client.call_tool("get_candidate", {"candidate_pk": pk})
        listed = await client.call_tool("list_candidates", {"limit": 1})
        policy = await client.call_tool(
            "supersede_policy", {"policy_id": policies[0].pk, "rule": "Deploy on Wednesdays.", "reason": "r"}
        )
        harmonized = await client.call_tool("harmonize_memory", {"domain": "architecture"})
        return submitted, replay, dry_run, got, listed, policy, harmonized

    submitted, replay, dry_run, got, listed, policy, harmonized = _session(world.coder.plain_key, script)
    twin = ("candidate", "candidate_id", "task_id", "updated_at")

    def same(value):  # the two candidates' replays differ by their row numbers only ("replay #3 …")
        return json.loads(re.sub(r"#\d+", "#N", json.dumps(_stable(value, *twin))))

    # The same document again over HTTP answers the candidate the MCP tools stored and replayed.
    again = api.post("/api/v1/candidates/", DOC, format="json")
    assert again.status_code == 200 and again.json() == got.structured_content
    assert [r["probe"] for r in again.json()["replays"]] == ["public-contract-regression"]
    assert _stable(submitted, *twin) == _stable(api_submitted, *twin)
    assert same(replay.structured_content) == same(api_replay)
    assert replay.structured_content["fact_status"] is None
    assert api_dry_run.status_code == 200
    assert not dry_run.is_error and dry_run.structured_content["dry_run"] is True
    assert same(dry_run.structured_content) == same(api_dry_run.json())
    assert got.structured_content == api.get(f"/api/v1/candidates/{submitted['id']}/").json()
    assert listed.structured_content == api.get("/api/v1/candidates/", {"limit": 1}).json()

    assert not policy.is_error
    assert _stable(policy.structured_content, *twin) == _stable(api_policy, *twin)
    assert api.get("/api/v1/policies/", {"active": "false"}).json()["count"] == 2  # both old versions replaced

    assert not harmonized.is_error and harmonized.structured_content["status"] == "done"
    assert _stable(harmonized.structured_content, *twin) == _stable(api_harmonized, *twin)


def test_mcp_cannot_reach_another_workspaces_review_candidate_or_policy(world, reviewer_reviews_world_domains):
    api = client_for(world.coder)
    review = api.post(
        "/api/v1/reviews/", {"session_id": "turn-7", "repo": "web", "output": OUTPUT, "files": FILES}, format="json"
    ).json()
    candidate = api.post("/api/v1/candidates/", DOC, format="json").json()
    policy = PolicyFactory(domain=world.architecture)
    calls = {
        "get_remember_review": ({"review_id": review["id"]}, ("get", f"/api/v1/reviews/{review['id']}/", None)),
        "consume_remember_review": (
            {"review_id": review["id"]},
            ("post", f"/api/v1/reviews/{review['id']}/consume/", None),
        ),
        "get_candidate": ({"candidate_pk": candidate["id"]}, ("get", f"/api/v1/candidates/{candidate['id']}/", None)),
        "record_replay": (
            {"candidate_pk": candidate["id"], "probe": "p", "passed": False},
            ("post", f"/api/v1/candidates/{candidate['id']}/replays/", {"probe": "p", "passed": False}),
        ),
        "promote_candidate": (
            {"candidate_pk": candidate["id"], "write": True},
            ("post", f"/api/v1/candidates/{candidate['id']}/promote/", {"write": True}),
        ),
        "deny_candidate": (
            {"candidate_pk": candidate["id"]},
            ("post", f"/api/v1/candidates/{candidate['id']}/deny/", {}),
        ),
        "supersede_policy": (
            {"policy_id": policy.pk, "rule": "mine now"},
            ("post", f"/api/v1/policies/{policy.pk}/supersede/", {"rule": "mine now"}),
        ),
    }

    async def script(client):
        answers = {name: await client.call_tool(name, arguments) for name, (arguments, _) in calls.items()}
        lists = {name: await client.call_tool(name, {}) for name in ("list_candidates", "list_policies")}
        return answers, lists

    answers, lists = _session(world.foreign_agent.plain_key, script)
    intruder = client_for(world.foreign_agent)
    for name, (_, (method, path, body)) in calls.items():
        over_http = getattr(intruder, method)(path, body, format="json")
        assert over_http.status_code == 404, name
        assert answers[name].is_error, name
        assert answers[name].structured_content == over_http.json(), name
    assert {name: answer.structured_content["count"] for name, answer in lists.items()} == {
        "list_candidates": 0,
        "list_policies": 0,
    }
    assert RememberReview.objects.get(pk=review["id"]).status == "pending"
    assert api.get(f"/api/v1/candidates/{candidate['id']}/").json()["replays"] == []
    assert api.get("/api/v1/policies/", {"active": "true"}).json()["count"] == 1
