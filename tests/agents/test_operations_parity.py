"""One operation per use case (issue 17): every API endpoint with an MCP tool and that tool call
the same function of agents.operations with the same arguments, every one of them (issue 36),
lists page the same way, an argument an operation does not take is refused alike on both, the
served schema names each operation as its tool, and the tools' enumerations are the models'
choices."""

import ast
import asyncio
import json
import re
from collections.abc import Mapping
from pathlib import Path
from unittest import mock
from urllib.parse import urlencode

import anyio.to_thread
import pytest
from django.apps import apps
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections
from django.urls import resolve

from agents import mcp_server
from agents import operations as ops
from agents.api import urls as api_urls
from agents.api.errors import json_404
from agents.operations import serializers as s
from agents.operations import serializers_as_of as sa
from agents.operations import serializers_candidates as sc
from agents.operations import serializers_decisions as sd
from agents.operations import serializers_reviews as rs
from agents.operations import serializers_runs as sr
from agents.operations.catalog import TOOLS
from agents.operations.declaration import field_schema
from agents.operations.declaration import plain_default as field_schema_default
from agents.operations.inputs import refuse_unknown, validated
from agents.operations.pages import page_bounds
from memory.models import BankKind, Conflict, FactStatus, FailureClass, MemoryType, PromotionStatus, Veracity
from memory.search.hybrid import MODES
from memory.selectors import CONFLICT_CLOSED
from tests.conftest import client_for
from tests.factories import AgentFactory, CandidateFactory, FactFactory, PolicyFactory
from tests.review.samples import FILES, OUTPUT

pytestmark = pytest.mark.django_db(transaction=True)  # sync MCP tools run in a worker thread

SITE = "http://testserver"
AS_OF, VALID_AT = "2026-01-02T03:04:05Z", "2026-01-01T00:00:00Z"
SCOPE = {"applies_to": ["public_api"], "does_not_apply_to": ["internal_refactor"]}
A_FACT = {
    "domain": "architecture",
    "repo": "web",
    "topic": "deploys",
    "content": "Deploys run on Tuesdays.",
    "memory_type": "decision",
    "veracity": "tool_generated",
    "observed_at": VALID_AT,
    "valid_until": AS_OF,
    "source_observation_ids": [1, 2],
    "episode_id": 9,
    "session_key": "s-1",
}
# MCP tool → its operation, the operation's input serializer (None: it takes no input), and its
# API twin called with every argument the tool takes: `{name}` in the path is the tool's argument
# of that name; a GET's or DELETE's other arguments go in the query string, a POST's or PUT's in
# the body.
TWINS = {
    "whoami": ("me", None, "get", "/api/v1/me/", {}),
    "get_preamble": (
        "get_preamble",
        s.PreambleIn,
        "post",
        "/api/v1/preamble/",
        {"task": "deploy", "repo": "web", "as_of": AS_OF, "valid_at": VALID_AT},
    ),
    "search_memory": (
        "search",
        s.SearchIn,
        "post",
        "/api/v1/search/",
        {
            "query": "deploys",
            "mode": "keyword",
            "repo": "web",
            "domain": "architecture",
            "limit": 5,
            "session_key": "s-1",
            "as_of": AS_OF,
            "valid_at": VALID_AT,
        },
    ),
    "list_facts": (
        "list_facts",
        s.FactListQuery,
        "get",
        "/api/v1/facts/",
        {
            "domain": "architecture",
            "repo": "web",
            "topic": "deploys",
            "status": "challenged",
            "current": False,
            "session_key": "s-1",
            "limit": 2,
            "offset": 1,
        },
    ),
    "get_fact": ("get_fact", sa.FactDetailQuery, "get", "/api/v1/facts/{fact_id}/", {"fact_id": 3, "as_of": AS_OF}),
    "propose_fact": ("propose_fact", s.FactProposeIn, "post", "/api/v1/facts/", A_FACT),
    "propose_facts": ("propose_facts_batch", s.FactBatchIn, "post", "/api/v1/facts/batch/", {"items": [A_FACT]}),
    "supersede_fact": (
        "supersede_fact",
        s.FactSupersedeIn,
        "post",
        "/api/v1/facts/{fact_id}/supersede/",
        {"fact_id": 3, "content": "Deploys run on Wednesdays.", "reason": "moved"},
    ),
    "create_episode": (
        "create_episode",
        s.EpisodeIn,
        "post",
        "/api/v1/episodes/",
        {"kind": "session", "title": "a session", "started_at": VALID_AT},
    ),
    "propose_policy": (
        "propose_policy",
        s.PolicyProposeIn,
        "post",
        "/api/v1/policies/",
        {"domain": "architecture", "repo": "web", "rule": "Test first.", "required_role": "coder", "derived_from": [1]},
    ),
    "supersede_policy": (
        "supersede_policy",
        s.PolicySupersedeIn,
        "post",
        "/api/v1/policies/{policy_id}/supersede/",
        {"policy_id": 4, "rule": "Test everything first.", "reason": "tightened"},
    ),
    "list_policies": (
        "list_policies",
        s.PolicyListQuery,
        "get",
        "/api/v1/policies/",
        {"active": False, "limit": 2, "offset": 1},
    ),
    "list_memory_conflicts": (
        "list_conflicts",
        s.ConflictListQuery,
        "get",
        "/api/v1/conflicts/",
        {"domain": "architecture", "repo": "web", "topic": "deploys", "status": "open", "limit": 2, "offset": 1},
    ),
    "get_my_notes": ("get_notes", None, "get", "/api/v1/me/notes/", {}),
    "update_my_notes": ("update_notes", s.NotesIn, "put", "/api/v1/me/notes/", {"notes": "my notes"}),
    "record_observation": (
        "record_observation",
        s.ObservationIn,
        "post",
        "/api/v1/me/observations/",
        {"text": "the build was slow"},
    ),
    "remember": (
        "remember",
        s.RememberIn,
        "post",
        "/api/v1/remember/",
        {"session_id": "s-1", "content": "Deploy day.", "domain": "architecture", "repo": "web", "topic": "deploys"},
    ),
    "consolidate_memory": ("consolidate", s.ConsolidateIn, "post", "/api/v1/consolidate/", {"session_id": "s-1"}),
    "harmonize_memory": (
        "harmonize",
        s.HarmonizeIn,
        "post",
        "/api/v1/harmonize/",
        {"domain": "architecture", "repo": "web"},
    ),
    "record_meeting_decisions": (
        "record_meeting_decisions",
        sd.MeetingDecisionsIn,
        "post",
        "/api/v1/decisions/",
        {"title": "weekly", "date": "2026-01-05", "decisions": ["Ship on Tuesdays."], "topic": "shipping"},
    ),
    "submit_remember_review": (
        "submit_review",
        rs.ReviewSubmitIn,
        "post",
        "/api/v1/reviews/",
        {"session_id": "s-1", "output": "see docs/a.md", "files": {"docs/a.md": "# A"}, "repo": "web"},
    ),
    "list_remember_reviews": (
        "list_reviews",
        rs.ReviewListQuery,
        "get",
        "/api/v1/reviews/",
        {"session": "s-1", "status": "pending", "limit": 2, "offset": 1},
    ),
    "get_remember_review": (
        "get_review",
        rs.ReviewWaitQuery,
        "get",
        "/api/v1/reviews/{review_id}/",
        {"review_id": 5, "wait": 1.5},
    ),
    "consume_remember_review": (
        "consume_review",
        None,
        "post",
        "/api/v1/reviews/{review_id}/consume/",
        {"review_id": 5},
    ),
    "list_candidates": (
        "list_candidates",
        sc.CandidateListQuery,
        "get",
        "/api/v1/candidates/",
        {
            "promotion_status": "held",
            "failure_class": "harness_blocker",
            "domain": "architecture",
            "repo": "web",
            "limit": 2,
            "offset": 1,
        },
    ),
    "submit_candidate": (
        "submit_candidate",
        sc.CandidateIn,
        "post",
        "/api/v1/candidates/",
        {
            "domain": "architecture",
            "repo": "web",
            "topic": "contracts",
            "schema": "awtl.memory_candidate.v2",
            "schema_version": "awtl.memory_candidate.v2",
            "candidate_id": "memcand-1",
            "failure_class": "verification_failure",
            "failure_type": "contract_mismatch",
            "source_action_ids": ["action-12"],
            "root_cause_summary": "The response shape changed.",
            "proposed_memory": "Update the contract evidence with the response.",
            "scope": SCOPE,
            "evidence_refs": ["judge:contract-verifier"],
            "verification_probe_candidate": "contract-regression",
            "promotion_status": "candidate",
            "requires_human_review": True,
            "origin": "agent",
            "memory_type": "convention",
        },
    ),
    "get_candidate": ("get_candidate", None, "get", "/api/v1/candidates/{candidate_pk}/", {"candidate_pk": 6}),
    "record_replay": (
        "record_replay",
        sc.ReplayIn,
        "post",
        "/api/v1/candidates/{candidate_pk}/replays/",
        {"candidate_pk": 6, "probe": "contract-regression", "passed": False, "details": "red"},
    ),
    "promote_candidate": (
        "promote_candidate",
        sc.PromoteIn,
        "post",
        "/api/v1/candidates/{candidate_pk}/promote/",
        {"candidate_pk": 6, "write": True, "auto": True},
    ),
    "deny_candidate": (
        "deny_candidate",
        sc.DenyIn,
        "post",
        "/api/v1/candidates/{candidate_pk}/deny/",
        {"candidate_pk": 6, "reason": "too narrow"},
    ),
    "create_memory_run": ("create_run", sr.RunIn, "post", "/api/v1/runs/", {"task": "fix the build"}),
    "memory_get_bank": ("get_bank", None, "get", "/api/v1/runs/{run_id}/bank/", {"run_id": 7}),
    "memory_update_status": (
        "update_status",
        sr.StatusIn,
        "post",
        "/api/v1/runs/{run_id}/bank/status/",
        {"run_id": 7, "content": "working"},
    ),
    "memory_save_knowledge": (
        "save_knowledge",
        sr.KnowledgeIn,
        "post",
        "/api/v1/runs/{run_id}/bank/knowledge/",
        {"run_id": 7, "id": "k1", "content": "the build uses make", "tags": ["applies_to:web"]},
    ),
    "memory_save_procedural": (
        "save_procedural",
        sr.ProceduralIn,
        "post",
        "/api/v1/runs/{run_id}/bank/procedural/",
        {"run_id": 7, "id": "p1", "content": "run make test", "outcome": "worked"},
    ),
    "memory_delete": (
        "delete_item",
        sr.DeleteQuery,
        "delete",
        "/api/v1/runs/{run_id}/bank/items/{id}/",
        {"run_id": 7, "id": "k1", "kind": "procedural"},
    ),
    "memory_log_decision": (
        "intervene",
        sr.InterventionIn,
        "post",
        "/api/v1/runs/{run_id}/interventions/",
        {
            "run_id": 7,
            "step": 3,
            "reminder": "run the linter first",
            "rationale": "it failed twice",
            "window": [{"step": 2, "command": "make", "thought": "build", "ok": False, "output": "lint"}],
        },
    ),
    "finish_memory_run": (
        "finish_run",
        sr.FinishIn,
        "post",
        "/api/v1/runs/{run_id}/finish/",
        {
            "run_id": 7,
            "offer_candidates": True,
            "items": ["k1"],
            "domain": "architecture",
            "repo": "web",
            "topic": "builds",
            "failure_class": "environment_blocker",
            "scope": SCOPE,
        },
    ),
}
LISTS = {"list_facts", "list_policies", "list_memory_conflicts", "list_candidates", "list_remember_reviews"}
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


def _endpoint_of(tool):
    """The (route name, HTTP method) of `tool`'s API twin."""
    _, _, method, template, arguments = TWINS[tool]
    return resolve(template.format(**arguments)).url_name, method


def _call_tool(server, name, arguments):
    async def call():
        try:
            return await server.call_tool(name, arguments)
        finally:  # the tool ran in an idle worker thread, reused here: free its connection
            await anyio.to_thread.run_sync(connections.close_all)

    return asyncio.run(call())


@pytest.mark.parametrize(("route", "method"), API_ENDPOINTS, ids=[f"{m} {r}" for r, m in API_ENDPOINTS])
def test_every_api_endpoint_has_exactly_one_mcp_tool(route, method):
    tools = [tool for tool in TWINS if _endpoint_of(tool) == (route, method)]
    assert len(tools) == 1, f"{method.upper()} {route}: MCP tools {tools}; add the tool and its TWINS entry"


def test_every_twin_is_an_endpoint_of_the_url_conf():
    assert len(API_ENDPOINTS) > 30  # the URL conf was read
    assert {tool: _endpoint_of(tool) for tool in TWINS if _endpoint_of(tool) not in API_ENDPOINTS} == {}


def test_every_mcp_tool_has_an_api_twin_listed_here(world):
    server = mcp_server.build_server(world.coder.plain_key)
    assert {tool.name for tool in asyncio.run(server.list_tools())} == set(TWINS)


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


def _tool_schemas(world, *, relay=True):
    """Each tool's input schema as an agent sees it; a relay agent's tools are offered every value."""
    agent = (
        AgentFactory(workspace=world.workspace, role=world.coder_role, relays_human_words=True)
        if relay
        else world.coder
    )
    server = mcp_server.build_server(agent.plain_key)
    return {tool.name: tool.input_schema for tool in asyncio.run(server.list_tools())}


def _enum(schema):
    """The enumeration of an argument's schema, nullable or not."""
    for branch in [schema, *schema.get("anyOf", [])]:
        if "enum" in branch:
            return branch["enum"]
    return None


def test_the_mcp_enumerations_are_the_model_choices(world):
    schemas = _tool_schemas(world)
    argument = lambda tool, name: _enum(schemas[tool]["properties"][name])  # noqa: E731
    assert set(argument("search_memory", "mode")) == set(MODES)
    assert argument("propose_fact", "memory_type") == MemoryType.values
    assert set(argument("propose_fact", "veracity")) == set(Veracity.values)
    offered = _enum(_tool_schemas(world, relay=False)["propose_fact"]["properties"]["veracity"])
    assert set(offered) == set(Veracity.values) - {Veracity.HUMAN_STATED}  # sent anyway: 403, as over HTTP
    assert argument("list_memory_conflicts", "status") == [*Conflict.Status.values, CONFLICT_CLOSED]
    assert argument("submit_candidate", "failure_class") == FailureClass.values
    assert set(argument("memory_delete", "kind")) == set(BankKind.values) - {BankKind.STATUS}
    assert argument("list_facts", "status") == FactStatus.values
    assert argument("list_candidates", "promotion_status") == PromotionStatus.values


def test_every_tool_schema_is_generated_from_its_input_serializer(world):
    """One declaration: each argument's schema is its serializer field's (declaration.field_schema),
    so the two cannot drift; required arguments are the serializer's required fields."""
    schemas = _tool_schemas(world)
    for name, operation in TOOLS.items():
        schema = schemas[name]
        fields = operation.inputs().fields if operation.inputs else {}
        required = [n for n, _ in operation.path] + [n for n, f in fields.items() if f.required]
        assert sorted(schema.get("required", [])) == sorted(required), name
        for field_name, field in fields.items():
            shown = {k: v for k, v in schema["properties"][field_name].items() if k != "title"}
            generated = field_schema(field, items_open=field_name in getattr(operation.inputs, "answered_per_item", ()))
            if not field.required and "anyOf" not in generated and field_schema_default(field) is None:
                generated = {"anyOf": [generated, {"type": "null"}], "default": None}
            assert shown == generated, (name, field_name)


def test_human_stated_from_an_agent_that_does_not_relay_is_refused_alike(world):
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    arguments = {k: v for k, v in A_FACT.items() if k not in ("repo", "episode_id", "source_observation_ids")}
    arguments["veracity"] = "human_stated"
    before = _row_counts()
    over_http = client_for(world.coder).post("/api/v1/facts/", arguments, format="json")
    over_mcp = _call_tool(server, "propose_fact", arguments)
    assert (over_http.status_code, over_http.json()["code"]) == (403, "veracity_not_allowed")
    assert over_mcp.is_error and over_mcp.structured_content == over_http.json()
    assert _row_counts() == before


# --- Every argument of every operation, through both surfaces (issue 36) -------------------------


def _path_arguments(tool):
    return re.findall(r"\{(\w+)\}", TWINS[tool][3])


def _over_http(client, tool, arguments):
    """The API call of `tool` with `arguments`: the path's in the path, the others in the query
    string (GET, DELETE: booleans as a query string spells them) or the JSON body."""
    _, _, method, template, _ = TWINS[tool]
    path = template.format(**arguments)
    rest = {k: v for k, v in arguments.items() if k not in _path_arguments(tool)}
    if method in ("get", "delete"):
        query = {k: str(v).lower() if isinstance(v, bool) else v for k, v in rest.items()}
        return getattr(client, method)(path + (f"?{urlencode(query)}" if query else ""))
    return getattr(client, method)(path, rest, format="json")


def _echo(serializer, agent_pk):
    """A stand-in for an operation answering what it was handed, as the operation reads it: the
    path's values, its input as its serializer validates it, the page asked for."""

    def operation(agent, *args, **kwargs):
        assert agent.pk == agent_pk
        path = [str(a) for a in args if not isinstance(a, Mapping) and a is not None]
        raw = next((a for a in args if isinstance(a, Mapping)), {})
        if serializer is None:
            refuse_unknown(raw)
            data = {}
        else:
            data = validated(serializer, raw, also=ops.PAGE_ARGUMENTS)
        page = (
            page_bounds({"limit": kwargs.get("limit"), "offset": kwargs.get("offset")}) if "limit" in kwargs else None
        )
        body = {"path": path, "input": data, "page": page}
        return ops.Result(200, json.loads(json.dumps(body, cls=DjangoJSONEncoder)))

    return operation


@pytest.mark.parametrize("tool", sorted(TWINS))
def test_the_endpoint_and_the_mcp_tool_hand_every_argument_to_the_operation_alike(world, tool):
    operation, serializer, _, _, arguments = TWINS[tool]
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    with mock.patch.object(ops, operation, autospec=True, side_effect=_echo(serializer, world.coder.pk)) as patched:
        over_http = _over_http(client_for(world.coder), tool, arguments)
        over_mcp = _call_tool(server, tool, arguments)
    assert patched.call_count == 2
    assert over_http.status_code == 200, over_http.json()
    assert not over_mcp.is_error, over_mcp.structured_content
    assert over_mcp.structured_content == over_http.json()
    handed = over_http.json()
    given = set(arguments) - set(_path_arguments(tool)) - (set(ops.PAGE_ARGUMENTS) if tool in LISTS else set())
    assert given <= set(handed["input"]), f"dropped: {given - set(handed['input'])}"
    assert handed["path"] == [str(arguments[name]) for name in _path_arguments(tool)]
    if tool in LISTS:
        assert handed["page"] == [arguments["limit"], arguments["offset"]]


def test_every_tool_takes_exactly_the_arguments_of_its_endpoint(world):
    server = mcp_server.build_server(world.coder.plain_key)
    taken = {tool.name: set(tool.input_schema.get("properties", {})) for tool in asyncio.run(server.list_tools())}
    declared = {
        tool: {
            *(serializer().fields if serializer else ()),
            *_path_arguments(tool),
            *(ops.PAGE_ARGUMENTS if tool in LISTS else ()),
        }
        for tool, (_, serializer, *_) in TWINS.items()
    }
    assert taken == declared
    for tool, (*_, arguments) in TWINS.items():
        assert set(arguments) == declared[tool], f"{tool}: its TWINS entry must give every argument"


def test_the_schemas_operation_ids_are_the_mcp_tool_names():
    schema = client_for(None).get("/api/v1/schema/?format=json").json()
    operation_ids = {}
    for path, methods in schema["paths"].items():
        route = resolve(re.sub(r"\{\w+\}", "1", path)).url_name
        for method, operation in methods.items():
            operation_ids[(route, method)] = operation["operationId"]
    assert {tool: operation_ids[_endpoint_of(tool)] for tool in TWINS} == {tool: tool for tool in TWINS}


def _row_counts():
    return {
        model._meta.label: model.objects.count()
        for app in ("memory", "agents", "review")
        for model in apps.get_app_config(app).get_models()
    }


@pytest.mark.parametrize("tool", sorted(TWINS))
def test_an_unknown_argument_is_refused_alike_and_writes_nothing(world, tool):
    arguments = {**TWINS[tool][4], "colour": "blue"}
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    before = _row_counts()
    over_http = _over_http(client_for(world.coder), tool, arguments)
    over_mcp = _call_tool(server, tool, arguments)
    assert over_http.status_code == 400
    assert over_http.json()["code"] == "unknown_argument"
    assert over_http.json()["fields"] == {"colour": ["Unknown argument."]}
    assert over_mcp.is_error and over_mcp.structured_content == over_http.json()
    assert _row_counts() == before


@pytest.mark.parametrize(
    ("tool", "arguments", "unknown"),
    [
        ("submit_candidate", {"scope": {**SCOPE, "colour": "blue"}}, "scope.colour"),
        ("finish_memory_run", {"scope": {**SCOPE, "colour": "blue"}}, "scope.colour"),
        ("memory_log_decision", {"window": [{"step": 1, "colour": "blue"}]}, "window.0.colour"),
    ],
)
def test_an_unknown_nested_argument_is_refused_alike(world, tool, arguments, unknown):
    arguments = {**TWINS[tool][4], **arguments}
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    over_http = _over_http(client_for(world.coder), tool, arguments)
    over_mcp = _call_tool(server, tool, arguments)
    assert (over_http.status_code, over_http.json()["code"]) == (400, "unknown_argument")
    assert list(over_http.json()["fields"]) == [unknown]
    assert over_mcp.is_error and over_mcp.structured_content == over_http.json()


def test_an_unknown_argument_of_a_batch_item_refuses_that_item_alike(world):
    items = [{**A_FACT, "episode_id": None, "source_observation_ids": [], "colour": "blue"}]
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    over_http = client_for(world.coder).post("/api/v1/facts/batch/", {"items": items}, format="json")
    over_mcp = _call_tool(server, "propose_facts", {"items": items})
    assert over_http.status_code == 200, over_http.json()
    [result] = over_http.json()["results"]
    assert (result["status"], result["error"]["code"], result["error"]["fields"]) == (
        400,
        "unknown_argument",
        {"colour": ["Unknown argument."]},
    )
    assert over_mcp.structured_content == over_http.json()


def test_a_query_string_on_a_body_endpoint_is_an_unknown_argument(api):
    refused = api.post("/api/v1/remember/?colour=blue", {"session_id": "s-1", "content": "c"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (400, "unknown_argument")
    assert refused.json()["fields"] == {"colour": ["Unknown argument."]}


def test_list_facts_filters_by_session_key_over_http_and_mcp(world):
    for i in range(3):
        FactFactory(domain=world.architecture, topic=f"mine{i}", session_key="s-1")
    for i in range(5):
        FactFactory(domain=world.architecture, topic=f"other{i}")
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    over_http = client_for(world.coder).get("/api/v1/facts/", {"session_key": "s-1"}).json()
    over_mcp = _call_tool(server, "list_facts", {"session_key": "s-1"}).structured_content
    assert over_http["count"] == 3
    assert over_mcp == over_http


def test_finish_memory_run_scopes_the_offered_candidates_over_http_and_mcp(world):
    api = client_for(world.coder)
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    finished = {}
    for surface in ("http", "mcp"):
        run = api.post("/api/v1/runs/", {"task": "fix the build"}, format="json").json()["id"]
        saved = {"id": "k1", "content": f"the build uses make ({surface})"}
        assert api.post(f"/api/v1/runs/{run}/bank/knowledge/", saved, format="json").status_code == 201
        arguments = {"offer_candidates": True, "topic": "builds", "scope": SCOPE}
        if surface == "http":
            finished[surface] = api.post(f"/api/v1/runs/{run}/finish/", arguments, format="json").json()
        else:
            finished[surface] = _call_tool(server, "finish_memory_run", {"run_id": run, **arguments}).structured_content
    for body in finished.values():
        [candidate] = body["candidates"]
        assert (candidate["promotion_status"], candidate["scope"]) == ("candidate", SCOPE)
