"""The served schema lists exactly the errors each operation can answer (issue 36).

Two halves:
- every error code an operation declares (agents.operations.catalog, `Operation.all_errors`) is
  provoked here, over HTTP, and answered with that status and code — no operation lists an error it
  cannot answer;
- every error any test meets is declared: the autouse fixture `answers_are_declared`
  (tests/declared_errors.py) fails a test whose operation answers an undeclared code.
And the served schema shows the declared errors of each operation, no more and no less.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from django.core.cache import cache
from django.db import OperationalError, connection
from django.test import Client
from django.urls import reverse
from rest_framework.settings import api_settings

from agents.api.throttling import AgentRateThrottle
from agents.operations.catalog import OPERATIONS
from memory.actors import Actor
from memory.models import Workspace
from memory.services import locking
from memory.services.tenancy import set_grant
from review.services import reject_review
from tests.agents.samples import candidate_document
from tests.conftest import client_for
from tests.factories import AgentFactory, CandidateFactory, FactFactory, PolicyFactory
from tests.review.samples import FILES, OUTPUT

SYSTEM = Actor.system("test")
CANDIDATE_DOC = candidate_document(
    candidate_id="memcand-declared",
    scope={"applies_to": ["public_api"], "does_not_apply_to": ["internal_refactor"]},
    domain="architecture",
    repo=None,
)
del CANDIDATE_DOC["repo"]
FACT = {"domain": "architecture", "topic": "deploys", "content": "Deploys run on Tuesdays.", "memory_type": "decision"}
MISSING = 999_999


class Scene:
    """The world of one test, with the objects an operation's valid call needs, made on demand."""

    def __init__(self, world: Any) -> None:
        self.world = world
        self.api = client_for(world.coder)
        set_grant(role=world.coder_role, domain=world.architecture, level="write", by=SYSTEM)

    def post(self, path: str, body: Any) -> Any:
        return self.api.post(path, body, format="json")

    def fact(self) -> int:
        return FactFactory(domain=self.world.architecture, topic="deploys").pk

    def policy(self) -> int:
        return PolicyFactory(domain=self.world.architecture).pk

    def candidate(self) -> int:
        return CandidateFactory(domain=self.world.architecture).pk

    def run(self, *, finished: bool = False) -> int:
        run = self.post("/api/v1/runs/", {"task": "a long task"}).json()["id"]
        if finished:
            assert self.post(f"/api/v1/runs/{run}/finish/", {}).status_code == 200
        return run

    def review(self) -> int:
        response = self.post("/api/v1/reviews/", {"session_id": "turn-7", "output": OUTPUT, "files": FILES})
        assert response.status_code == 201, response.json()
        return response.json()["id"]


# Each operation's valid call: (path arguments, arguments), given a Scene.
VALID: dict[str, Callable[[Scene], tuple[dict[str, Any], dict[str, Any]]]] = {
    "whoami": lambda s: ({}, {}),
    "get_preamble": lambda s: ({}, {"task": "deploy the web app"}),
    "search_memory": lambda s: ({}, {"query": "deploys", "mode": "keyword"}),
    "list_facts": lambda s: ({}, {"domain": "architecture"}),
    "get_fact": lambda s: ({"fact_id": s.fact()}, {}),
    "propose_fact": lambda s: ({}, dict(FACT)),
    "propose_facts": lambda s: ({}, {"items": [dict(FACT)]}),
    "supersede_fact": lambda s: ({"fact_id": s.fact()}, {"content": "Deploys run on Thursdays now."}),
    "create_episode": lambda s: ({}, {"kind": "session", "title": "t"}),
    "record_meeting_decisions": lambda s: ({}, {"title": "Weekly", "date": "2026-01-05", "decisions": ["Ship it."]}),
    "list_policies": lambda s: ({}, {"active": "true"}),
    "propose_policy": lambda s: ({}, {"domain": "architecture", "rule": "Always run the tests."}),
    "supersede_policy": lambda s: ({"policy_id": s.policy()}, {"rule": "Always run every test."}),
    "list_memory_conflicts": lambda s: ({}, {"domain": "architecture"}),
    "get_my_notes": lambda s: ({}, {}),
    "update_my_notes": lambda s: ({}, {"notes": "n"}),
    "record_observation": lambda s: ({}, {"text": "saw it"}),
    "remember": lambda s: ({}, {"session_id": "s-1", "content": "c", "domain": "architecture"}),
    "consolidate_memory": lambda s: ({}, {"session_id": "s-1"}),
    "harmonize_memory": lambda s: ({}, {"domain": "architecture"}),
    "submit_remember_review": lambda s: ({}, {"session_id": "turn-7", "output": OUTPUT, "files": FILES}),
    "list_remember_reviews": lambda s: ({}, {"session": "turn-7"}),
    "get_remember_review": lambda s: ({"review_id": s.review()}, {"wait": "0"}),
    "consume_remember_review": lambda s: ({"review_id": s.review()}, {}),
    "list_candidates": lambda s: ({}, {"domain": "architecture"}),
    "submit_candidate": lambda s: ({}, dict(CANDIDATE_DOC)),
    "get_candidate": lambda s: ({"candidate_pk": s.candidate()}, {}),
    "record_replay": lambda s: ({"candidate_pk": s.candidate()}, {"probe": "p", "passed": True}),
    "promote_candidate": lambda s: ({"candidate_pk": s.candidate()}, {"write": False}),
    "deny_candidate": lambda s: ({"candidate_pk": s.candidate()}, {"reason": "no"}),
    "create_memory_run": lambda s: ({}, {"task": "t"}),
    "memory_get_bank": lambda s: ({"run_id": s.run()}, {}),
    "memory_update_status": lambda s: ({"run_id": s.run()}, {"content": "c"}),
    "memory_save_knowledge": lambda s: ({"run_id": s.run()}, {"id": "k", "content": "c"}),
    "memory_save_procedural": lambda s: ({"run_id": s.run()}, {"id": "p", "content": "c", "outcome": "ok"}),
    "memory_delete": lambda s: ({"run_id": s.run(), "id": "k"}, {}),
    "memory_log_decision": lambda s: ({"run_id": s.run()}, {"step": 1, "reminder": None}),
    "finish_memory_run": lambda s: ({"run_id": s.run()}, {}),
    "admin_erasure_preview": lambda s: ({}, {"workspace": "acme", "selection": {"kind": "ids", "ids": [s.fact()]}}),
    "admin_erasure": lambda s: ({}, {"workspace": "acme", "selection": {"kind": "ids", "ids": [s.fact()]}}),
}
# A value each operation with inputs refuses as a field error (invalid_input).
BAD = {
    "get_preamble": {"task": {"x": 1}},
    "search_memory": {"query": "q", "mode": "psychic"},
    "list_facts": {"status": "sleeping"},
    "get_fact": {"as_of": "yesterday"},
    "propose_fact": {**FACT, "memory_type": "rumour"},
    "propose_facts": {"items": "all of them"},
    "supersede_fact": {"content": ""},
    "create_episode": {"kind": ""},
    "record_meeting_decisions": {"title": "Weekly", "date": "3026-01-05", "decisions": ["Ship it."]},
    "list_policies": {"active": "perhaps"},
    "propose_policy": {"domain": "architecture", "rule": ""},
    "supersede_policy": {"rule": ""},
    "list_memory_conflicts": {"status": "asleep"},
    "update_my_notes": {"notes": {"x": 1}},
    "record_observation": {"text": ""},
    "remember": {"session_id": "", "content": "c"},
    "consolidate_memory": {"session_id": {"x": 1}},
    "harmonize_memory": {"domain": {"x": 1}},
    "submit_remember_review": {"session_id": "", "output": OUTPUT},
    "list_remember_reviews": {"session": "turn-7", "status": "live"},
    "get_remember_review": {"wait": "99"},
    "list_candidates": {"failure_class": "bad_luck"},
    "submit_candidate": {**CANDIDATE_DOC, "failure_class": "bad_luck"},
    "record_replay": {"probe": "p"},
    "promote_candidate": {"write": "sometimes"},
    "deny_candidate": {"reason": {"x": 1}},
    "create_memory_run": {"task": ""},
    "memory_update_status": {"content": {"x": 1}},
    "memory_save_knowledge": {"id": "", "content": "c"},
    "memory_save_procedural": {"id": "p", "content": "c"},
    "memory_delete": {"kind": "status"},
    "memory_log_decision": {"step": -1},
    "finish_memory_run": {"failure_class": "bad_luck"},
    "admin_erasure_preview": {"workspace": "", "selection": {}},
    "admin_erasure": {"workspace": "", "selection": {}},
}


def _path(name: str, path: dict[str, Any]) -> str:
    operation = OPERATIONS[name]
    kwargs = {("item_id" if key == "id" else key): value for key, value in path.items()}
    return reverse(operation.route, kwargs=kwargs)


def call(scene: Scene, name: str, path: dict[str, Any], arguments: Any, *, client: Any = None, **extra: Any) -> Any:
    """Ask operation `name` over HTTP: GET/DELETE arguments in the query string, else a JSON body."""
    operation = OPERATIONS[name]
    client = client if client is not None else (_person(scene) if not operation.agent else scene.api)
    url = _path(name, path)
    if operation.takes_body:
        body = arguments if isinstance(arguments, (bytes, str)) else json.dumps(arguments)
        return client.generic(operation.method, url, body, content_type="application/json", **extra)
    if arguments:
        url += "?" + urlencode(arguments)
    return client.generic(operation.method, url, **extra)


def _person(scene: Scene) -> Any:
    client = Client(enforce_csrf_checks=False)
    client.force_login(scene.world.admin_user)
    return client


def code_of(response: Any) -> tuple[int, str | None]:
    try:
        return response.status_code, response.json().get("code")
    except ValueError:
        return response.status_code, None


# --- errors every operation shares, provoked on every operation ---------------------------------
def _database_down(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    raise OperationalError("could not connect to server: Connection refused")


def provoke_shared(scene: Scene, name: str, code: str) -> Any:
    operation = OPERATIONS[name]
    path, arguments = VALID[name](scene)
    if code == "not_authenticated":
        return call(scene, name, path, arguments, client=client_for(None))
    if code == "invalid_key":
        client = client_for(None)
        client.credentials(HTTP_AUTHORIZATION="Bearer not-a-key")
        return call(scene, name, path, arguments, client=client)
    if code == "key_revoked":
        agent = AgentFactory(workspace=scene.world.workspace, role=scene.world.coder_role, name="revoked")
        agent.revoked_at = agent.created_at
        agent.save(update_fields=["revoked_at"])
        return call(scene, name, path, arguments, client=client_for(agent))
    if code == "not_acceptable":
        return call(scene, name, path, arguments, HTTP_ACCEPT="application/xml")
    if code == "database_unavailable":
        with connection.execute_wrapper(_database_down):
            return call(scene, name, path, arguments)
    if code == "unknown_argument":
        return call(scene, name, path, {**arguments, "colour": "blue"})
    if code == "invalid_input":
        return call(scene, name, path, BAD[name])
    if code == "not_found" and operation.path:
        url = _path(name, path).replace(f"/{next(iter(path.values()))}/", "/not-a-number/", 1)
        client = _person(scene) if not operation.agent else scene.api
        return client.generic(operation.method, url)
    if code == "forbidden":  # a person's write without the CSRF token
        client = Client(enforce_csrf_checks=True)
        client.force_login(scene.world.admin_user)
        return call(scene, name, path, arguments, client=client)
    if code == "throttled":
        return _throttled(scene, name, path, arguments)
    if operation.takes_body:
        return _bad_body(scene, name, path, code)
    if code == "invalid_characters":
        return call(scene, name, path, {**arguments, "x": "a\x00b"})
    raise LookupError(code)


BODIES = {
    "malformed_json": b'{"task": ',
    "json_too_deep": b"[" * 2000 + b"]" * 2000,
    "duplicate_key": b'{"task": "a", "task": "b"}',
    "invalid_characters": b'{"task": "a\\u0000b"}',
    "integer_out_of_range": b'{"task": 1' + b"0" * 40 + b"}",
    "number_out_of_range": b'{"task": 1e400}',
}


def _bad_body(scene: Scene, name: str, path: dict[str, Any], code: str) -> Any:
    operation = OPERATIONS[name]
    client = _person(scene) if not operation.agent else scene.api
    url = _path(name, path)
    if code in BODIES:
        return client.generic(operation.method, url, BODIES[code], content_type="application/json")
    if code == "unsupported_media_type":
        return client.generic(operation.method, url, b"task=a", content_type="application/x-www-form-urlencoded")
    if code == "body_too_large":
        from django.conf import settings

        body = b'{"task": "' + b"x" * settings.ENGRAM_MAX_BODY_BYTES + b'"}'
        return client.generic(operation.method, url, body, content_type="application/json")
    if code == "length_required":
        extra = {"HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_LENGTH": "", "wsgi.input": io.BytesIO(b"{}")}
        return client.generic(operation.method, url, b"", content_type="application/json", **extra)
    raise LookupError(code)


def _throttled(scene: Scene, name: str, path: dict[str, Any], arguments: Any) -> Any:
    rates = {**api_settings.DEFAULT_THROTTLE_RATES, "agent": "1/min"}
    original = AgentRateThrottle.THROTTLE_RATES
    AgentRateThrottle.THROTTLE_RATES = rates
    cache.clear()
    try:
        call(scene, name, path, arguments)
        return call(scene, name, path, arguments)
    finally:
        AgentRateThrottle.THROTTLE_RATES = original
        cache.clear()


SHARED = sorted(
    {
        (name, status, code)
        for name, operation in OPERATIONS.items()
        for status, codes in operation.all_errors().items()
        for code in codes
        if code not in {c for cs in operation.errors.values() for c in cs}
    }
)


@pytest.mark.parametrize(("name", "status", "code"), SHARED, ids=[f"{n}-{c}" for n, _, c in SHARED])
def test_every_shared_error_an_operation_declares_is_answered(world, name, status, code):
    assert code_of(provoke_shared(Scene(world), name, code)) == (status, code)


# --- each operation's own errors ----------------------------------------------------------------
def _relay(scene: Scene) -> Any:
    return client_for(
        AgentFactory(workspace=scene.world.workspace, role=scene.world.coder_role, relays_human_words=True)
    )


def _reader(scene: Scene) -> Any:
    set_grant(role=scene.world.planner_role, domain=scene.world.architecture, level="read", by=SYSTEM)
    return client_for(scene.world.planner)


def _busy(scene: Scene, name: str, client: Any = None) -> Any:
    """The write's plan kept going stale (memory.services.locking): here no attempt is allowed."""
    path, arguments = VALID[name](scene)
    defaults = locking.write_planned.__kwdefaults__
    locking.write_planned.__kwdefaults__ = {**defaults, "attempts": 0}
    try:
        return call(scene, name, path, arguments, client=client)
    finally:
        locking.write_planned.__kwdefaults__ = defaults


def _with(name: str, **changes: Any) -> Callable[[Scene], Any]:
    """The valid call of `name` with `changes` to its arguments (None removes one)."""

    def provoke(scene: Scene) -> Any:
        path, arguments = VALID[name](scene)
        arguments = {**arguments, **changes}
        return call(scene, name, path, {k: v for k, v in arguments.items() if v is not None})

    return provoke


def _at(name: str, **path_changes: Any) -> Callable[[Scene], Any]:
    """The valid call of `name` at other path arguments (MISSING: an id nobody may see)."""

    def provoke(scene: Scene) -> Any:
        path, arguments = VALID[name](scene)
        return call(scene, name, {**path, **path_changes}, arguments)

    return provoke


def _by(name: str, who: Callable[[Scene], Any]) -> Callable[[Scene], Any]:
    def provoke(scene: Scene) -> Any:
        path, arguments = VALID[name](scene)
        return call(scene, name, path, arguments, client=who(scene))

    return provoke


def _protected_supersede(scene: Scene) -> Any:
    fact = FactFactory(domain=scene.world.architecture, topic="deploys", veracity="human_stated")
    return call(scene, "supersede_fact", {"fact_id": fact.pk}, {"content": "Deploys run on Fridays."})


def _not_live_supersede(scene: Scene) -> Any:
    newer = FactFactory(domain=scene.world.architecture, topic="deploys")
    older = FactFactory(
        domain=scene.world.architecture, topic="deploys", superseded_by=newer, superseded_at=newer.created_at
    )
    return call(scene, "supersede_fact", {"fact_id": older.pk}, {"content": "Deploys run on Fridays."})


def _over_budget(name: str) -> Callable[[Scene], Any]:
    def provoke(scene: Scene) -> Any:
        path, arguments = VALID[name](scene)
        Workspace.objects.filter(pk=scene.world.workspace.pk).update(policy_budget_chars=1)
        return call(scene, name, path, {**arguments, "rule": "Always run every test before merging. " * 5})

    return provoke


def _superseded_policy(scene: Scene) -> Any:
    old = scene.policy()
    assert call(scene, "supersede_policy", {"policy_id": old}, {"rule": "Run the tests twice."}).status_code == 201
    return call(scene, "supersede_policy", {"policy_id": old}, {"rule": "Run the tests thrice."})


def _decided(name: str) -> Callable[[Scene], Any]:
    def provoke(scene: Scene) -> Any:
        candidate = scene.candidate()
        assert call(scene, "deny_candidate", {"candidate_pk": candidate}, {"reason": "no"}).status_code == 201
        return call(scene, name, {"candidate_pk": candidate}, VALID[name](scene)[1])

    return provoke


def _candidate_changed(scene: Scene) -> Any:
    """A promotion that writes its fact under the domain's lock (every gate passed)."""
    created = call(scene, "submit_candidate", {}, dict(CANDIDATE_DOC)).json()
    verifier = client_for(
        AgentFactory(workspace=scene.world.workspace, role=scene.world.coder_role, name="verifier", is_verifier=True)
    )
    replay = {"probe": "public-contract-regression", "passed": True, "details": "ran in CI"}
    assert verifier.post(f"/api/v1/candidates/{created['id']}/replays/", replay, format="json").status_code == 201
    defaults = locking.write_planned.__kwdefaults__
    locking.write_planned.__kwdefaults__ = {**defaults, "attempts": 0}
    try:
        return call(scene, "promote_candidate", {"candidate_pk": created["id"]}, {"write": True})
    finally:
        locking.write_planned.__kwdefaults__ = defaults


def _taken_candidate_id(scene: Scene) -> Any:
    call(scene, "submit_candidate", {}, dict(CANDIDATE_DOC), client=client_for(scene.world.planner))
    set_grant(role=scene.world.coder_role, domain=scene.world.architecture, level="none", by=SYSTEM)
    return call(scene, "submit_candidate", {}, {**CANDIDATE_DOC, "domain": "conventions"})


def _consumed_twice(scene: Scene) -> Any:
    review = scene.review()
    from review.models import RememberReview

    reject_review(review=RememberReview.objects.get(pk=review), by=Actor.of_user(scene.world.admin_user))
    assert call(scene, "consume_remember_review", {"review_id": review}, {}).status_code == 200
    return call(scene, "consume_remember_review", {"review_id": review}, {})


def _bank_full(name: str, arguments: dict[str, Any]) -> Callable[[Scene], Any]:
    def provoke(scene: Scene) -> Any:
        from agents import runs

        run = scene.run()
        limit, runs.BANK_ITEMS_MAX = runs.BANK_ITEMS_MAX, 0
        try:
            return call(scene, name, {"run_id": run}, arguments)
        finally:
            runs.BANK_ITEMS_MAX = limit

    return provoke


def _finished(name: str) -> Callable[[Scene], Any]:
    def provoke(scene: Scene) -> Any:
        path, arguments = VALID[name](scene)
        return call(scene, name, {**path, "run_id": scene.run(finished=True)}, arguments)

    return provoke


def _no_bank_item(scene: Scene) -> Any:
    return call(scene, "memory_delete", {"run_id": scene.run(), "id": "never-saved"}, {})


def _erasure_by_agent(name: str) -> Callable[[Scene], Any]:
    return lambda scene: call(scene, name, {}, VALID[name](scene)[1], client=scene.api)


def _erasure_changed(scene: Scene) -> Any:
    path, arguments = VALID["admin_erasure"](scene)
    return call(scene, "admin_erasure", path, {**arguments, "reason": "asked", "fact_ids": [MISSING]})


OTHER_REPO = {"domain": "repo:web/context", "repo": "api"}
OWN: dict[tuple[str, str], Callable[[Scene], Any]] = {
    ("search_memory", "invalid_domain"): _with("search_memory", **OTHER_REPO),
    ("search_memory", "unknown_domain"): _with("search_memory", domain="nowhere"),
    ("list_facts", "unknown_domain"): _with("list_facts", domain="nowhere"),
    ("get_fact", "fact_not_found"): _at("get_fact", fact_id=MISSING),
    ("propose_fact", "invalid_domain"): _with("propose_fact", **OTHER_REPO),
    ("propose_fact", "unknown_domain"): _with("propose_fact", domain="nowhere"),
    ("propose_fact", "unknown_episode"): _with("propose_fact", episode_id=MISSING),
    ("propose_fact", "unknown_observation"): _with("propose_fact", source_observation_ids=[MISSING]),
    ("propose_fact", "veracity_not_allowed"): _with("propose_fact", veracity="human_stated"),
    ("propose_fact", "domain_busy"): lambda s: _busy(s, "propose_fact"),
    ("propose_facts", "batch_empty"): _with("propose_facts", items=[]),
    ("propose_facts", "batch_too_large"): _with("propose_facts", items=[FACT] * 101),
    ("propose_facts", "domain_busy"): lambda s: _busy(s, "propose_facts"),
    ("supersede_fact", "fact_not_found"): _at("supersede_fact", fact_id=MISSING),
    ("supersede_fact", "fact_protected"): _protected_supersede,
    ("supersede_fact", "fact_not_live"): _not_live_supersede,
    ("supersede_fact", "domain_busy"): lambda s: _busy(s, "supersede_fact"),
    ("record_meeting_decisions", "veracity_not_allowed"): _with("record_meeting_decisions"),
    ("record_meeting_decisions", "insufficient_memory_permission"): _by(
        "record_meeting_decisions", lambda s: _relay_admin(s, level="read")
    ),
    ("record_meeting_decisions", "domain_busy"): lambda s: _busy(s, "record_meeting_decisions", _relay_admin(s)),
    ("propose_policy", "invalid_domain"): _with("propose_policy", **OTHER_REPO),
    ("propose_policy", "unknown_domain"): _with("propose_policy", domain="nowhere"),
    ("propose_policy", "unknown_fact"): _with("propose_policy", derived_from=[MISSING]),
    ("propose_policy", "unknown_role"): _with("propose_policy", required_role="astronaut"),
    ("propose_policy", "insufficient_memory_permission"): _by("propose_policy", _reader),
    ("propose_policy", "policy_budget_exceeded"): _over_budget("propose_policy"),
    ("supersede_policy", "policy_not_found"): _at("supersede_policy", policy_id=MISSING),
    ("supersede_policy", "insufficient_memory_permission"): _by("supersede_policy", _reader),
    ("supersede_policy", "policy_not_live"): _superseded_policy,
    ("supersede_policy", "policy_budget_exceeded"): _over_budget("supersede_policy"),
    ("list_memory_conflicts", "unknown_domain"): _with("list_memory_conflicts", domain="nowhere"),
    ("remember", "invalid_domain"): _with("remember", **OTHER_REPO),
    ("remember", "unknown_domain"): _with("remember", domain="nowhere"),
    ("consolidate_memory", "domain_busy"): lambda s: _consolidate_busy(s),
    ("harmonize_memory", "invalid_domain"): _with("harmonize_memory", **OTHER_REPO),
    ("harmonize_memory", "unknown_domain"): _with("harmonize_memory", domain="nowhere"),
    ("harmonize_memory", "domain_busy"): lambda s: _harmonize_busy(s),
    ("submit_remember_review", "no_review_items"): _with("submit_remember_review", output="nothing to keep"),
    ("submit_remember_review", "unknown_repo"): _with("submit_remember_review", repo="nowhere"),
    ("get_remember_review", "review_not_found"): _at("get_remember_review", review_id=MISSING),
    ("consume_remember_review", "review_not_found"): _at("consume_remember_review", review_id=MISSING),
    ("consume_remember_review", "review_pending"): lambda s: call(
        s, "consume_remember_review", {"review_id": s.review()}, {}
    ),
    ("consume_remember_review", "review_already_consumed"): _consumed_twice,
    ("list_candidates", "unknown_domain"): _with("list_candidates", domain="nowhere"),
    ("submit_candidate", "invalid_domain"): _with("submit_candidate", **OTHER_REPO),
    ("submit_candidate", "unknown_domain"): _with("submit_candidate", domain="nowhere"),
    ("submit_candidate", "unknown_schema_version"): _with("submit_candidate", schema="awtl.memory_candidate.v9"),
    ("submit_candidate", "candidate_id_taken"): _taken_candidate_id,
    ("get_candidate", "candidate_not_found"): _at("get_candidate", candidate_pk=MISSING),
    ("record_replay", "candidate_not_found"): _at("record_replay", candidate_pk=MISSING),
    ("promote_candidate", "candidate_not_found"): _at("promote_candidate", candidate_pk=MISSING),
    ("promote_candidate", "candidate_decided"): _decided("promote_candidate"),
    ("promote_candidate", "candidate_changed"): _candidate_changed,
    ("deny_candidate", "candidate_not_found"): _at("deny_candidate", candidate_pk=MISSING),
    ("deny_candidate", "candidate_decided"): _decided("deny_candidate"),
    ("memory_get_bank", "run_not_found"): _at("memory_get_bank", run_id=MISSING),
    ("memory_update_status", "run_not_found"): _at("memory_update_status", run_id=MISSING),
    ("memory_update_status", "run_finished"): _finished("memory_update_status"),
    ("memory_save_knowledge", "run_not_found"): _at("memory_save_knowledge", run_id=MISSING),
    ("memory_save_knowledge", "run_finished"): _finished("memory_save_knowledge"),
    ("memory_save_knowledge", "bank_full"): _bank_full("memory_save_knowledge", {"id": "k", "content": "c"}),
    ("memory_save_procedural", "run_not_found"): _at("memory_save_procedural", run_id=MISSING),
    ("memory_save_procedural", "run_finished"): _finished("memory_save_procedural"),
    ("memory_save_procedural", "bank_full"): _bank_full(
        "memory_save_procedural", {"id": "p", "content": "c", "outcome": "ok"}
    ),
    ("memory_delete", "run_not_found"): _at("memory_delete", run_id=MISSING),
    ("memory_delete", "bank_item_not_found"): _no_bank_item,
    ("memory_delete", "run_finished"): _finished("memory_delete"),
    ("memory_log_decision", "run_not_found"): _at("memory_log_decision", run_id=MISSING),
    ("memory_log_decision", "run_finished"): _finished("memory_log_decision"),
    ("finish_memory_run", "run_not_found"): _at("finish_memory_run", run_id=MISSING),
    ("finish_memory_run", "run_finished"): _finished("finish_memory_run"),
    ("finish_memory_run", "unknown_domain"): _with("finish_memory_run", offer_candidates=True, domain="nowhere"),
    ("admin_erasure_preview", "invalid_selection"): _with(
        "admin_erasure_preview", selection={"kind": "ids", "ids": "all"}
    ),
    ("admin_erasure_preview", "nothing_to_erase"): _with(
        "admin_erasure_preview", selection={"kind": "ids", "ids": [MISSING]}
    ),
    ("admin_erasure_preview", "erasure_forbidden"): _erasure_by_agent("admin_erasure_preview"),
    ("admin_erasure_preview", "not_found"): _with("admin_erasure_preview", workspace="globex"),
    ("admin_erasure", "invalid_selection"): _with("admin_erasure", selection={"kind": "ids", "ids": "all"}),
    ("admin_erasure", "nothing_to_erase"): _with("admin_erasure", selection={"kind": "ids", "ids": [MISSING]}),
    ("admin_erasure", "reason_required"): _with("admin_erasure", reason=None),
    ("admin_erasure", "erasure_forbidden"): _erasure_by_agent("admin_erasure"),
    ("admin_erasure", "not_found"): _with("admin_erasure", workspace="globex"),
    ("admin_erasure", "selection_changed"): _erasure_changed,
}


def _relay_admin(scene: Scene, level: str = "write") -> Any:
    """A relay agent with `level` on an existing `decisions` domain."""
    from memory.services.tenancy import create_domain

    domain = create_domain(workspace=scene.world.workspace, name="decisions", by=SYSTEM)
    set_grant(role=scene.world.coder_role, domain=domain, level=level, by=SYSTEM)
    return _relay(scene)


def _consolidate_busy(scene: Scene) -> Any:
    call(scene, "remember", {}, {"session_id": "s-1", "content": "Deploys run on Mondays.", "domain": "architecture"})
    return _busy(scene, "consolidate_memory")


def _harmonize_busy(scene: Scene) -> Any:
    FactFactory(domain=scene.world.architecture, topic="deploys", content="Deploys run on Mondays.")
    FactFactory(
        domain=scene.world.architecture,
        topic="deploys",
        content="Deploys run on Fridays.",
        created_by_agent=scene.world.coder2,
    )
    return _busy(scene, "harmonize_memory")


OWN_DECLARED = sorted(
    (name, status, code)
    for name, operation in OPERATIONS.items()
    for status, codes in operation.errors.items()
    for code in codes
)


def test_every_own_error_has_a_way_to_provoke_it():
    assert sorted((n, c) for n, _, c in OWN_DECLARED) == sorted(OWN)


@pytest.mark.parametrize(("name", "status", "code"), OWN_DECLARED, ids=[f"{n}-{c}" for n, _, c in OWN_DECLARED])
def test_every_own_error_an_operation_declares_is_answered(world, name, status, code):
    assert code_of(OWN[(name, code)](Scene(world))) == (status, code)


def test_the_served_schema_lists_exactly_the_declared_errors_of_each_operation(world):
    schema = client_for(None).get("/api/v1/schema/?format=json").json()
    served: dict[str, dict[int, list[str]]] = {}
    for methods in schema["paths"].values():
        for operation in methods.values():
            errors = {
                int(status): response["content"]["application/json"]["schema"]["allOf"][1]["properties"]["code"]["enum"]
                for status, response in operation["responses"].items()
                if status[0] in "45"
            }
            served[operation["operationId"]] = errors
    declared = {name: {s: list(c) for s, c in op.all_errors().items()} for name, op in OPERATIONS.items()}
    assert served == declared
