"""One operation per use case (issue 17): every API endpoint with an MCP tool and that tool call
the same function of agents.operations, lists page the same way, and the tools' enumerations
are the models' choices."""

import ast
import asyncio
from pathlib import Path
from typing import get_args
from unittest import mock

import anyio.to_thread
import pytest
from django.db import connections
from django.urls import resolve

from agents import mcp_server
from agents import operations as ops
from agents.api import urls as api_urls
from agents.api.errors import json_404
from memory.models import BankKind, Conflict, FactStatus, FailureClass, MemoryType, PromotionStatus, Veracity
from memory.search.hybrid import MODES
from memory.selectors import CONFLICT_CLOSED
from tests.conftest import client_for
from tests.factories import CandidateFactory, FactFactory, PolicyFactory
from tests.review.samples import FILES, OUTPUT

pytestmark = pytest.mark.django_db(transaction=True)  # sync MCP tools run in a worker thread

SITE = "http://testserver"
RUN = "/api/v1/runs/7"
# MCP tool → (its operation, its arguments, the API twin: method, path, body)
TWINS = {
    "get_preamble": ("get_preamble", {"task": "t"}, ("post", "/api/v1/preamble/", {"task": "t"})),
    "search_memory": ("search", {"query": "q"}, ("post", "/api/v1/search/", {"query": "q"})),
    "propose_fact": (
        "propose_fact",
        {"domain": "architecture", "topic": "t", "content": "c", "memory_type": "decision"},
        ("post", "/api/v1/facts/", {"domain": "architecture", "topic": "t", "content": "c"}),
    ),
    "propose_facts": (
        "propose_facts_batch",
        {"items": [{"domain": "architecture", "topic": "t", "content": "c", "memory_type": "decision"}]},
        ("post", "/api/v1/facts/batch/", {"items": [{"domain": "architecture", "topic": "t", "content": "c"}]}),
    ),
    "supersede_fact": ("supersede_fact", {"fact_id": 3, "content": "c"}, ("post", "/api/v1/facts/3/supersede/", {})),
    "propose_policy": ("propose_policy", {"domain": "architecture", "rule": "r"}, ("post", "/api/v1/policies/", {})),
    "list_memory_conflicts": ("list_conflicts", {}, ("get", "/api/v1/conflicts/", None)),
    "update_my_notes": ("update_notes", {"notes": "n"}, ("put", "/api/v1/me/notes/", {"notes": "n"})),
    "record_observation": ("record_observation", {"text": "x"}, ("post", "/api/v1/me/observations/", {})),
    "remember": ("remember", {"session_id": "s", "content": "c"}, ("post", "/api/v1/remember/", {})),
    "consolidate_memory": ("consolidate", {}, ("post", "/api/v1/consolidate/", {})),
    "submit_remember_review": (
        "submit_review",
        {"session_id": "s", "output": "o"},
        ("post", "/api/v1/reviews/", {"session_id": "s", "output": "o"}),
    ),
    "record_meeting_decisions": (
        "record_meeting_decisions",
        {"title": "t", "date": "2026-01-05", "decisions": ["d"]},
        ("post", "/api/v1/decisions/", {"title": "t", "date": "2026-01-05", "decisions": ["d"]}),
    ),
    "create_memory_run": ("create_run", {"task": "t"}, ("post", "/api/v1/runs/", {"task": "t"})),
    "memory_get_bank": ("get_bank", {"run_id": 7}, ("get", f"{RUN}/bank/", None)),
    "memory_update_status": ("update_status", {"run_id": 7, "content": "c"}, ("post", f"{RUN}/bank/status/", {})),
    "memory_save_knowledge": (
        "save_knowledge",
        {"run_id": 7, "id": "k", "content": "c"},
        ("post", f"{RUN}/bank/knowledge/", {}),
    ),
    "memory_save_procedural": (
        "save_procedural",
        {"run_id": 7, "id": "p", "content": "c", "outcome": "worked"},
        ("post", f"{RUN}/bank/procedural/", {}),
    ),
    "memory_delete": ("delete_item", {"run_id": 7, "id": "k"}, ("delete", f"{RUN}/bank/items/k/", None)),
    "memory_log_decision": ("intervene", {"run_id": 7, "step": 1}, ("post", f"{RUN}/interventions/", {"step": 1})),
    "finish_memory_run": ("finish_run", {"run_id": 7}, ("post", f"{RUN}/finish/", {})),
    "whoami": ("me", {}, ("get", "/api/v1/me/", None)),
    "list_facts": ("list_facts", {}, ("get", "/api/v1/facts/", None)),
    "get_fact": ("get_fact", {"fact_id": 3}, ("get", "/api/v1/facts/3/", None)),
    "create_episode": ("create_episode", {"kind": "session"}, ("post", "/api/v1/episodes/", {"kind": "session"})),
    "list_policies": ("list_policies", {}, ("get", "/api/v1/policies/", None)),
    "supersede_policy": (
        "supersede_policy",
        {"policy_id": 4, "rule": "r"},
        ("post", "/api/v1/policies/4/supersede/", {"rule": "r"}),
    ),
    "get_my_notes": ("get_notes", {}, ("get", "/api/v1/me/notes/", None)),
    "harmonize_memory": ("harmonize", {}, ("post", "/api/v1/harmonize/", {})),
    "get_remember_review": ("get_review", {"review_id": 5, "wait": 1}, ("get", "/api/v1/reviews/5/?wait=1", None)),
    "consume_remember_review": ("consume_review", {"review_id": 5}, ("post", "/api/v1/reviews/5/consume/", None)),
    "list_candidates": ("list_candidates", {}, ("get", "/api/v1/candidates/", None)),
    "submit_candidate": (
        "submit_candidate",
        {
            "domain": "architecture",
            "topic": "t",
            "candidate_id": "c",
            "failure_class": "agent_failure",
            "proposed_memory": "m",
        },
        ("post", "/api/v1/candidates/", {"domain": "architecture"}),
    ),
    "get_candidate": ("get_candidate", {"candidate_pk": 6}, ("get", "/api/v1/candidates/6/", None)),
    "record_replay": (
        "record_replay",
        {"candidate_pk": 6, "probe": "p", "passed": True},
        ("post", "/api/v1/candidates/6/replays/", {}),
    ),
    "promote_candidate": ("promote_candidate", {"candidate_pk": 6}, ("post", "/api/v1/candidates/6/promote/", {})),
    "deny_candidate": ("deny_candidate", {"candidate_pk": 6}, ("post", "/api/v1/candidates/6/deny/", {})),
}
# Routes of the API that are not agent tools: the OpenAPI schema and its browsable docs, and the
# people-only erasure API (issue 21: signed-in workspace admins; every agent is refused).
NOT_TOOLS = {"api-schema", "api-docs", "api-admin-erasure-preview", "api-admin-erasures"}


def _api_endpoints():
    """Every (route name, HTTP method) the agent API serves, read from its URL conf: a new view,
    or a new method on one, shows up here without anyone listing it."""
    endpoints = []
    for pattern in api_urls.urlpatterns:
        if pattern.callback is json_404 or pattern.name in NOT_TOOLS:
            continue
        view = getattr(pattern.callback, "view_class", None)
        if view is None:  # a function view: it must be listed here, or be made a tool
            endpoints.append((pattern.name, "any"))
            continue
        for method in view.http_method_names:
            if method not in ("options", "head") and hasattr(view, method):
                endpoints.append((pattern.name, method))
    return endpoints


API_ENDPOINTS = _api_endpoints()


def _endpoint_of(twin):
    method, path, _ = twin
    return resolve(path.split("?")[0]).url_name, method


def _call_tool(server, name, arguments):
    async def call():
        try:
            return await server.call_tool(name, arguments)
        finally:  # the tool ran in an idle worker thread, reused here: free its connection
            await anyio.to_thread.run_sync(connections.close_all)

    return asyncio.run(call())


@pytest.mark.parametrize(("route", "method"), API_ENDPOINTS, ids=[f"{m} {r}" for r, m in API_ENDPOINTS])
def test_every_api_endpoint_has_exactly_one_mcp_tool(route, method):
    tools = [tool for tool, (_, _, twin) in TWINS.items() if _endpoint_of(twin) == (route, method)]
    assert len(tools) == 1, f"{method.upper()} {route}: MCP tools {tools}; add the tool and its TWINS entry"


def test_every_twin_is_an_endpoint_of_the_url_conf():
    assert len(API_ENDPOINTS) > 30  # the URL conf was read
    assert {
        tool: _endpoint_of(twin) for tool, (_, _, twin) in TWINS.items() if _endpoint_of(twin) not in API_ENDPOINTS
    } == {}


def test_every_mcp_tool_has_an_api_twin_listed_here(world):
    server = mcp_server.build_server(world.coder.plain_key)
    assert {tool.name for tool in asyncio.run(server.list_tools())} == set(TWINS)


@pytest.mark.parametrize("tool", sorted(TWINS))
def test_the_endpoint_and_the_mcp_tool_call_the_same_operation(world, tool):
    operation, arguments, (method, path, body) = TWINS[tool]
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    answer = ops.Result(200, {"answered_by": operation})
    with mock.patch.object(ops, operation, autospec=True, return_value=answer) as patched:
        over_http = getattr(client_for(world.coder), method)(path, body, format="json")
        over_mcp = _call_tool(server, tool, arguments)
    assert patched.call_count == 2
    assert [call.args[0].pk for call in patched.call_args_list] == [world.coder.pk, world.coder.pk]
    assert (over_http.status_code, over_http.json()) == (200, {"answered_by": operation})
    assert not over_mcp.is_error and over_mcp.structured_content == {"answered_by": operation}


def _conflicts(world, n):
    for i in range(n):
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


@pytest.mark.parametrize(
    ("query", "arguments"),
    [
        ({"limit": 2}, {"limit": 2}),
        ({"limit": 2, "offset": 2}, {"limit": 2, "offset": 2}),
        ({"limit": 2, "offset": 3}, {"limit": 2, "offset": 3}),
        ({"limit": 2, "offset": 1, "status": "decided"}, {"limit": 2, "offset": 1, "status": "decided"}),
        ({"offset": 4, "domain": "architecture"}, {"offset": 4, "domain": "architecture"}),
    ],
)
def test_the_conflict_list_pages_alike_over_http_and_mcp(world, query, arguments):
    _conflicts(world, 5)
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    over_http = client_for(world.coder).get("/api/v1/conflicts/", query).json()
    over_mcp = _call_tool(server, "list_memory_conflicts", arguments).structured_content
    assert over_http["count"] == over_mcp["count"] == 5
    assert (over_mcp["next"], over_mcp["previous"]) == (over_http["next"], over_http["previous"])
    assert [r["id"] for r in over_mcp["results"]] == [r["id"] for r in over_http["results"]]
    assert over_http["next"] or over_http["previous"]


def _rows(world, n):
    for i in range(n):
        FactFactory(domain=world.architecture, topic=f"f{i}")
        PolicyFactory(domain=world.architecture)
        CandidateFactory(domain=world.architecture)


@pytest.mark.parametrize(
    ("tool", "path", "query"),
    [
        ("list_facts", "/api/v1/facts/", {"limit": 2, "offset": 1}),
        ("list_facts", "/api/v1/facts/", {"domain": "architecture", "current": "true", "limit": 2, "offset": 3}),
        ("list_policies", "/api/v1/policies/", {"active": "true", "limit": 2, "offset": 2}),
        ("list_candidates", "/api/v1/candidates/", {"limit": 2}),
        ("list_candidates", "/api/v1/candidates/", {"failure_class": "agent_failure", "limit": 3, "offset": 3}),
    ],
)
def test_every_list_pages_alike_over_http_and_mcp(world, tool, path, query):
    _rows(world, 5)
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    arguments = {k: (v == "true" if v in ("true", "false") else v) for k, v in query.items()}
    over_http = client_for(world.coder).get(path, query).json()
    over_mcp = _call_tool(server, tool, arguments).structured_content
    assert over_http["count"] == over_mcp["count"] == 5
    assert (over_mcp["next"], over_mcp["previous"]) == (over_http["next"], over_http["previous"])
    assert over_http["next"] or over_http["previous"]
    assert over_mcp["results"] == over_http["results"]


def test_a_refused_review_wait_says_retry_after_over_http_and_mcp(world, settings):
    settings.ENGRAM_MAX_WAITERS = 0  # this process already holds its share of long-polls
    api = client_for(world.coder)
    body = {"session_id": "turn-7", "repo": "web", "output": OUTPUT, "files": FILES}
    review = api.post("/api/v1/reviews/", body, format="json").json()
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    over_http = api.get(f"/api/v1/reviews/{review['id']}/?wait=30")
    over_mcp = _call_tool(server, "get_remember_review", {"review_id": review["id"], "wait": 30})
    assert over_http["Retry-After"] == "2"
    assert over_mcp.meta == {"headers": {"Retry-After": "2"}}
    assert not over_mcp.is_error and over_mcp.structured_content == over_http.json()
    assert over_mcp.structured_content["status"] == "pending"
    assert _call_tool(server, "get_remember_review", {"review_id": review["id"]}).meta is None  # no wait asked


def test_the_operations_do_not_import_the_api():
    package = Path(ops.__file__).parent
    for source in package.glob("*.py"):
        tree = ast.parse(source.read_text())
        imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imported if m == "agents.api" or m.startswith("agents.api.")], source.name


def test_the_mcp_enumerations_are_the_model_choices():
    assert set(get_args(mcp_server.SearchMode)) == set(MODES)
    assert list(get_args(mcp_server.MemoryType)) == MemoryType.values
    assert set(get_args(mcp_server.RelayVeracity)) == set(Veracity.values)
    assert set(get_args(mcp_server.AgentVeracity)) == set(Veracity.values) - {Veracity.HUMAN_STATED}
    assert list(get_args(mcp_server.ConflictStatus)) == [*Conflict.Status.values, CONFLICT_CLOSED]
    assert list(get_args(mcp_server.FailureClass)) == FailureClass.values
    assert set(get_args(mcp_server.BankItemKind)) == set(BankKind.values) - {BankKind.STATUS}
    assert list(get_args(mcp_server.FactStatus)) == FactStatus.values
    assert list(get_args(mcp_server.PromotionStatus)) == PromotionStatus.values
