"""The isolation matrix: for every API route and method, callers who must not reach workspace A's
memory get the right refusal and learn nothing.

Routes are enumerated from the URLconf: a route missing from ROUTES below fails the test, so a
new endpoint cannot ship without its isolation cases. Callers: no key, a revoked key, an agent
of another workspace, and a role holding `none` on the domain the objects live in. "Learn
nothing" means a hidden object answers exactly like an object that does not exist."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import URLPattern, get_resolver

from agents.services import revoke_agent
from memory.actors import Actor
from memory.services.tenancy import create_domain, set_grant
from tests.conftest import client_for
from tests.factories import AgentFactory

MARKER = "ZEBRA-7741"  # appears only in workspace A's hidden objects
MISSING = 987_654_321

# route → (methods, the object kind its path parameter names, or None, body for writes)
ROUTES: dict[str, tuple[tuple[str, ...], str | None, dict[str, Any] | None]] = {
    "me/": (("get",), None, None),
    "me/notes/": (("get", "put"), None, {"notes": "mine"}),
    "me/observations/": (("post",), None, {"text": "saw something"}),
    "preamble/": (("post",), None, {"task": f"Anything about {MARKER} and the secret domain today"}),
    "search/": (("post",), None, {"query": f"{MARKER} secret"}),
    "facts/": (("get", "post"), None, None),
    "facts/batch/": (
        ("post",),
        None,
        {"items": [{"domain": "secret", "topic": "vault", "memory_type": "decision", "content": "The key rotates."}]},
    ),
    "facts/<int:fact_id>/": (("get",), "fact", None),
    "facts/<int:fact_id>/supersede/": (("post",), "fact", {"content": "replaced"}),
    "remember/": (("post",), None, {"session_id": "s", "content": "x", "domain": "secret"}),
    "consolidate/": (("post",), None, {}),
    "harmonize/": (("post",), None, {"domain": "secret"}),
    "episodes/": (("post",), None, {"kind": "session"}),
    "decisions/": (("post",), None, {"title": "standup", "date": "2026-01-05", "decisions": ["Ship on Fridays."]}),
    "policies/": (("get", "post"), None, None),
    "policies/<int:policy_id>/supersede/": (("post",), "policy", {"rule": "replaced"}),
    "conflicts/": (("get",), None, None),
    "candidates/": (("get", "post"), None, None),
    "candidates/<int:candidate_pk>/": (("get",), "candidate", None),
    "candidates/<int:candidate_pk>/replays/": (("post",), "candidate", {"probe": "p", "passed": True}),
    "candidates/<int:candidate_pk>/promote/": (("post",), "candidate", {"write": False}),
    "candidates/<int:candidate_pk>/deny/": (("post",), "candidate", {"reason": "no"}),
    "reviews/": (("post",), None, None),
    "reviews/<int:review_id>/": (("get",), "review", None),
    "reviews/<int:review_id>/consume/": (("post",), "review", {}),
    "runs/": (("post",), None, {"task": "t"}),
    "runs/<int:run_id>/bank/": (("get",), "run", None),
    "runs/<int:run_id>/bank/status/": (("post",), "run", {"content": "c"}),
    "runs/<int:run_id>/bank/knowledge/": (("post",), "run", {"id": "k2", "content": "c", "tags": []}),
    "runs/<int:run_id>/bank/procedural/": (("post",), "run", {"id": "p2", "content": "c", "outcome": "failed"}),
    "runs/<int:run_id>/bank/items/<str:item_id>/": (("delete",), "run", None),
    "runs/<int:run_id>/interventions/": (("post",), "run", {"step": 1, "reminder": None}),
    "runs/<int:run_id>/finish/": (("post",), "run", {"offer_candidates": False}),
    # People only (issue 21): every agent is refused 403 erasure_forbidden before any lookup.
    "admin/erasures/preview/": (
        ("post",),
        None,
        {"workspace": "acme", "selection": {"kind": "search", "query": MARKER}},
    ),
    "admin/erasures/": (
        ("post",),
        None,
        {"workspace": "acme", "selection": {"kind": "search", "query": "vault"}, "reason": "r"},
    ),
}
# Objects of the domain a `none` role cannot see; reviews and runs belong to their agent instead.
DOMAIN_KINDS = {"fact", "policy", "candidate"}


def api_routes() -> list[str]:
    resolver = get_resolver()
    api = next(p for p in resolver.url_patterns if str(p.pattern) == "api/v1/")
    routes = [str(p.pattern) for p in api.url_patterns if isinstance(p, URLPattern)]
    return [r for r in routes if r not in {"schema/", "docs/", "^.*$"}]


def test_every_api_route_is_in_the_isolation_matrix():
    assert set(api_routes()) == set(ROUTES)


@pytest.fixture
def hidden(world) -> dict[str, Any]:
    """Workspace A's objects in the domain `secret` (planner gets `none` on it), created through
    the API by the coder, plus the coder's own review and run."""
    secret = create_domain(workspace=world.workspace, name="secret", by=Actor.system("t"))
    api = client_for(world.coder)
    fact = api.post(
        "/api/v1/facts/",
        {
            "domain": "secret",
            "topic": "vault",
            "memory_type": "decision",
            "content": f"The {MARKER} vault key rotates monthly.",
        },
        format="json",
    ).json()
    policy = api.post(
        "/api/v1/policies/", {"domain": "secret", "rule": f"Never print the {MARKER} key."}, format="json"
    ).json()
    candidate = api.post(
        "/api/v1/candidates/",
        {
            "schema": "awtl.memory_candidate.v2",
            "candidate_id": "iso-1",
            "failure_class": "agent_failure",
            "failure_type": "leak",
            "source_action_ids": ["a1"],
            "root_cause_summary": f"{MARKER} printed",
            "proposed_memory": f"Mask the {MARKER} key in logs.",
            "scope": {"applies_to": ["logs"], "does_not_apply_to": ["ui"]},
            "evidence_refs": ["ci:1"],
            "verification_probe_candidate": "grep-logs",
            "promotion_status": "candidate",
            "requires_human_review": True,
            "domain": "secret",
            "topic": "vault",
        },
        format="json",
    ).json()
    review = api.post(
        "/api/v1/reviews/",
        {
            "session_id": "s1",
            "output": '```json\n{"recommendations": [{"path": "notes.md", "recommended_layer": '
            '"project/context", "rationale": "r", "suggested_memory_content": "' + MARKER + '"}]}\n```',
            "files": {"notes.md": MARKER},
        },
        format="json",
    ).json()
    run = api.post("/api/v1/runs/", {"task": f"{MARKER} task"}, format="json").json()
    api.post(f"/api/v1/runs/{run['id']}/bank/knowledge/", {"id": "k1", "content": MARKER, "tags": []}, format="json")
    set_grant(role=world.planner_role, domain=secret, level="none", by=Actor.system("t"))
    ids = {
        "fact": fact["fact"]["id"],
        "policy": policy["id"],
        "candidate": candidate["id"],
        "review": review["id"],
        "run": run["id"],
    }
    assert all(isinstance(v, int) for v in ids.values()), ids
    return ids


def url_for(route: str, kind: str | None, ids: dict[str, Any], missing: bool = False) -> str:
    value = MISSING if missing else (ids[kind] if kind else None)
    path = re.sub(r"<int:[a-z_]+>", str(value), route, count=1)
    path = path.replace("<str:item_id>", "k1")
    return f"/api/v1/{path}"


def call(client, method: str, url: str, body: dict | None):
    if method in {"get", "delete"}:
        return getattr(client, method)(url)
    return getattr(client, method)(url, body if body is not None else {}, format="json")


def cases() -> list[tuple[str, str]]:
    return [(route, method) for route, (methods, _, _) in ROUTES.items() for method in methods]


@pytest.mark.parametrize("route,method", cases())
def test_no_key_and_a_revoked_key_get_401(world, hidden, route, method):
    _, kind, body = ROUTES[route]
    url = url_for(route, kind, hidden)
    assert call(client_for(None), method, url, body).status_code == 401
    revoked = AgentFactory(workspace=world.workspace, role=world.coder_role, name="revoked")
    revoke_agent(agent=revoked, by=Actor.system("t"))
    response = call(client_for(revoked), method, url, body)
    assert response.status_code == 401
    assert response.json()["code"] == "key_revoked"


def _same_answer(client, method: str, route: str, kind: str, body: dict | None, ids: dict[str, Any]) -> None:
    hidden_answer = call(client, method, url_for(route, kind, ids), body)
    missing_answer = call(client, method, url_for(route, kind, ids, missing=True), body)
    assert hidden_answer.status_code == missing_answer.status_code, (route, method)
    assert hidden_answer.status_code in {400, 404}, (route, method, hidden_answer.status_code)
    assert hidden_answer.json()["code"] == missing_answer.json()["code"]
    assert MARKER not in hidden_answer.content.decode()


@pytest.mark.parametrize("route,method", cases())
def test_another_workspace_learns_nothing(world, hidden, route, method):
    _, kind, body = ROUTES[route]
    intruder = client_for(world.foreign_agent)
    if kind is not None:
        _same_answer(intruder, method, route, kind, body, hidden)
        return
    response = call(intruder, method, url_for(route, None, hidden), body)
    assert response.status_code < 500
    assert MARKER not in response.content.decode()


@pytest.mark.parametrize("route,method", cases())
def test_a_role_with_none_on_the_domain_learns_nothing(world, hidden, route, method):
    _, kind, body = ROUTES[route]
    planner = client_for(world.planner)
    if kind in DOMAIN_KINDS:
        _same_answer(planner, method, route, kind, body, hidden)
        return
    if kind in {"review", "run"}:  # owned by the coder agent: another agent is refused like a stranger
        _same_answer(planner, method, route, kind, body, hidden)
        return
    response = call(planner, method, url_for(route, None, hidden), body)
    assert response.status_code < 500
    assert MARKER not in response.content.decode(), (route, method)
