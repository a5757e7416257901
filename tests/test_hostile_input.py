"""Hostile input (issue 15): malformed requests at every API endpoint and every page never answer
5xx, and a refused request writes nothing.

The API endpoints come from the URL conf (so a new endpoint is covered without touching this
file), their fields and query parameters from the OpenAPI schema, and `{id}` paths get real ids
made in the fixture. Pages: every route of the review site and every admin changelist with its
filters, as a reviewer, a workspace admin and a superuser. The counts of the run are printed.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib import admin
from django.db import OperationalError, connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from drf_spectacular.generators import SchemaGenerator

from agents.api.renderers import printable
from agents.operations.serializers_reviews import OUTPUT_MAX_CHARS
from memory.actors import Actor
from memory.safe_json import has_bad_characters
from memory.services.tenancy import set_grant
from tests.conftest import client_for
from tests.factories import CandidateFactory, FactFactory, PolicyFactory
from tests.hostile_corpus import (
    FIELD_VALUES,
    FORM_VALUES,
    FTS,
    HOSTILE_KEYS,
    HUGE,
    KEY_BODIES,
    KEYS_AT_EVERY_DEPTH,
    LARGE_KEY_BODIES,
    PAGE_VALUES,
    QUERY_VALUES,
    RAW_BODIES,
    REFUSED_AT_THE_EDGE,
    with_key,
)
from tests.procs import ROOT, free_port, wait_for
from tests.test_availability import _connections, _server_env, _stop

SYSTEM = Actor.system("test")
STATS: Counter[str] = Counter()
SLOW_DOCS = {"api-schema", "api-docs"}
JSON = "application/json"
PAGE_QUERY = ["q", "status", "domain", "repo", "page", "workspace", "kind", "age", "order", "current", "inline"]
PAGE_QUERY += ["memory_type", "veracity", "fact", "sort", "limit", "offset"]
FORM_FIELDS = ["role", "domain", "level", "content", "reason", "action", "note", "rule", "policy_budget_chars"]
FORM_FIELDS += ["decision", "paths", "selected", "layer", "text", "edited_content", "topic", "include"]

# Valid bodies where one is known: each hostile field value is tried on top of it. An endpoint
# missing here still gets every field (from the schema) and every raw body.
VALID_BODIES: dict[str, dict[str, Any]] = {
    "api-preamble": {"task": "deploy the billing service"},
    "api-search": {"query": "billing deploys", "mode": "keyword"},
    "api-facts": {
        "domain": "architecture",
        "topic": "deploys",
        "content": "Deploys run on Tuesdays.",
        "memory_type": "decision",
    },
    "api-fact-supersede": {"content": "Deploys run on Wednesdays.", "reason": "moved"},
    "api-remember": {"session_id": "s1", "content": "Remember the deploy day."},
    "api-episodes": {"kind": "session", "title": "a session"},
    "api-policies": {"domain": "architecture", "rule": "Run the tests before merging."},
    "api-policy-supersede": {"rule": "Run all tests before merging.", "reason": "tightened"},
    "api-my-notes": {"notes": "my notes"},
    "api-my-observations": {"text": "the build was slow"},
    "api-reviews": {"session_id": "s1", "output": "see docs/a.md", "files": {"docs/a.md": "# A"}},
    "api-runs": {"task": "fix the build"},
    "api-run-bank-status": {"content": "working"},
    "api-run-bank-knowledge": {"id": "k1", "content": "the build uses make", "tags": ["build"]},
    "api-run-bank-procedural": {"id": "p1", "content": "run make test", "outcome": "success"},
    "api-run-interventions": {"step": 1, "reminder": None},
    "api-run-finish": {"offer_candidates": False},
    "api-candidate-replays": {"probe": "contract-regression", "passed": True},
    "api-candidate-promote": {"write": False},
    "api-candidate-deny": {"reason": "not general"},
}


# --- Routes ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    name: str
    template: str  # "/api/v1/facts/{fact_id}/"
    kwargs: tuple[str, ...]
    methods: tuple[str, ...]


def _walk(patterns: list[Any], prefix: str, namespace: str) -> Iterator[tuple[str, str, URLPattern]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            ns = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), ns)
        elif entry.name:
            yield prefix + str(entry.pattern), namespace + entry.name, entry


def _kwargs_of(pattern: URLPattern) -> tuple[str, ...]:
    converters = getattr(pattern.pattern, "converters", None)
    if converters:
        return tuple(converters)
    return tuple(pattern.pattern.regex.groupindex)


def api_routes() -> list[Route]:
    routes = []
    for raw, name, pattern in _walk(get_resolver().url_patterns, "/", ""):
        view = getattr(pattern.callback, "cls", None)
        if not raw.startswith("/api/v1/") or view is None:
            continue
        kwargs = _kwargs_of(pattern)
        template = raw
        for kwarg in kwargs:
            for converter in ("int", "str"):
                template = template.replace(f"<{converter}:{kwarg}>", "{" + kwarg + "}")
        methods = tuple(m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m))
        routes.append(Route(name, template, kwargs, methods))
    return routes


def page_routes() -> list[Route]:
    routes = []
    for raw, name, pattern in _walk(get_resolver().url_patterns, "/", ""):
        if name.startswith("review:"):
            routes.append(Route(name, raw, _kwargs_of(pattern), ("get", "post")))
    return routes


def schema_fields() -> dict[tuple[str, str], tuple[list[str], list[str]]]:
    """(path, method) → (body field names, query parameter names), from the served schema."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema.get("components", {}).get("schemas", {})
    result = {}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            body: list[str] = []
            content = (operation.get("requestBody") or {}).get("content", {})
            ref = content.get("application/json", {}).get("schema", {}).get("$ref", "")
            if ref:
                body = list(components.get(ref.rsplit("/", 1)[-1], {}).get("properties", {}))
            query = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"]
            result[(path, method)] = (body, query)
    return result


def schema_bodies() -> set[tuple[str, str]]:
    """(path, method) of every operation that takes a JSON body, from the served schema."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {
        (path, method)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if "application/json" in (operation.get("requestBody") or {}).get("content", {})
    }


# --- The world the requests hit ---------------------------------------------------------------
@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """The personas' passwords are hashed on each test's setup; this file does not test logins."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def hostile_world(world, django_user_model):
    set_grant(role=world.coder_role, domain=world.architecture, level="write", by=SYSTEM)
    api = client_for(world.coder)
    fact = FactFactory(domain=world.architecture, topic="deploys", content="Deploys run on Tuesdays.")
    policy = PolicyFactory(domain=world.architecture)
    candidate = CandidateFactory(domain=world.architecture)
    run = api.post("/api/v1/runs/", {"task": "fix the build"}, format="json").json()
    api.post(f"/api/v1/runs/{run['id']}/bank/knowledge/", {"id": "k1", "content": "uses make"}, format="json")
    review = api.post("/api/v1/reviews/", VALID_BODIES["api-reviews"], format="json").json()
    ids = {
        "fact_id": fact.pk,
        "policy_id": policy.pk,
        "candidate_pk": candidate.pk,
        "review_id": review["id"],
        "run_id": run["id"],
        "item_id": review["items"][0]["id"],  # pages: a review item; the API: a bank item id
        "slug": world.workspace.slug,
        "kind": "candidate",
        "pk": candidate.pk,
    }
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    return world, ids, root


def _path(route: Route, ids: dict[str, Any], **override: Any) -> str:
    values = {**ids, **({"item_id": "k1"} if route.name.startswith("api-") else {}), **override}
    if route.template.startswith("/api/"):
        return route.template.format(**{k: values[k] for k in route.kwargs})
    return reverse(route.name, kwargs={k: values[k] for k in route.kwargs})


def _table_counts() -> tuple[int, ...]:
    """Rows of every table of Engram's own apps, in one round trip."""
    tables = [m._meta.db_table for app in ("memory", "agents", "review") for m in apps.get_app_config(app).get_models()]
    sql = "SELECT " + ", ".join(f'(SELECT count(*) FROM "{t}")' for t in tables)  # noqa: S608 -- table names come from the installed models
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return tuple(cursor.fetchone())


class Sender:
    """Sends one request, counts it, and checks: never 5xx; a 4xx changed no table; an API
    refusal has the API's error shape. `refused=True`: the request must be a 400 whose body is
    strict UTF-8 JSON with a stable code, echoing nothing unencodable."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.counts = _table_counts()
        self.stats: Counter[str] = Counter()

    def __call__(
        self, client: Client, method: str, path: str, what: str, *, refused: bool = False, **kwargs: Any
    ) -> int:
        """`refused`: the rows are compared once after the batch (`rows_unchanged`), not per request."""
        client.raise_request_exception = False  # a 500 is counted and reported, not raised
        response = getattr(client, method)(path, **kwargs)
        before = self.counts
        if not refused:
            self.counts = _table_counts()
        status = response.status_code
        self.stats["requests"] += 1
        where = f"{method.upper()} {path[:100]} ({what})"
        if status >= 500:
            self.stats["5xx"] += 1
            self.failures.append(f"{status} {where}: {response.content[:300]!r}")
        elif status >= 400:
            self.stats["4xx"] += 1
            if self.counts != before:
                self.failures.append(f"{status} but rows changed: {where}")
            if path.startswith("/api/") and not {"code", "detail", "fields"} <= set(response.json()):
                self.failures.append(f"{status} not the API's error shape: {where}")
        if refused:
            self.stats["refused"] += 1
            problem = _not_a_clean_refusal(response)
            if problem:
                self.failures.append(f"{status} {where}: {problem}")
        return status

    def rows_unchanged(self, where: str) -> None:
        before, self.counts = self.counts, _table_counts()
        if self.counts != before:
            self.failures.append(f"rows changed by refused requests: {where}")

    def report(self, capsys: Any, label: str, started: float) -> None:
        STATS.update(self.stats)
        with capsys.disabled():
            print(
                f"\nhostile {label}: {self.stats['requests']} requests, {self.stats['4xx']} 4xx, "
                f"{self.stats['5xx']} 5xx, "
                + (f"{self.stats['refused']} of them hostile keys (each a 400), " if self.stats["refused"] else "")
                + f"{time.perf_counter() - started:.1f} s"
            )
        assert not self.failures, "\n".join(self.failures[:40])


# What a body with a hostile key may be refused with (memory.safe_json's codes).
KEY_CODES = {"invalid_characters", "duplicate_key"}


def _not_a_clean_refusal(response: Any) -> str:
    """Why `response` is not a 400 with a stable code in strict UTF-8 JSON ("" when it is)."""
    if response.status_code != 400:
        return f"not 400: {response.content[:200]!r}"
    try:
        body = json.loads(response.content.decode("utf-8"))
    except ValueError as exc:
        return f"not UTF-8 JSON ({exc}): {response.content[:200]!r}"
    if body.get("code") not in KEY_CODES:
        return f"code {body.get('code')!r}"
    echoed = [body["detail"], *body["fields"], *(m for ms in body["fields"].values() for m in ms)]
    if any(has_bad_characters(text) or len(text) > 1300 for text in echoed):
        return f"echoes NUL, a surrogate or too much: {response.content[:200]!r}"
    return ""


def _all_at_once(names: list[str], value: str) -> str:
    """One query string giving every parameter the same hostile value: one request per value."""
    return "&".join(f"{name}={value}" for name in dict.fromkeys(names))


# --- The suite ---------------------------------------------------------------------------------
def test_every_api_endpoint_refuses_hostile_input_without_5xx_or_writes(hostile_world, capsys):
    world, ids, _ = hostile_world
    agent, anonymous = client_for(world.coder), client_for(None)
    send, started = Sender(), time.perf_counter()
    fields, bodies = schema_fields(), schema_bodies()
    routes = api_routes()
    assert len(routes) >= 23, [r.name for r in routes]
    # The erasure endpoints are for people: an agent is refused (403) before its body is read.
    admin_client = Client()
    admin_client.force_login(world.admin_user)
    people = {"api-admin-erasure-preview": admin_client, "api-admin-erasures": admin_client}
    keyed: set[str] = set()
    for route in routes:
        path = _path(route, ids)
        for method in route.methods:
            body_fields, query_names = fields.get((route.template, method), ([], []))
            if method == "get":
                # The schema and its docs take no parameters and are slow to build: two tries.
                for value in QUERY_VALUES if route.name not in SLOW_DOCS else QUERY_VALUES[:2]:
                    if "wait" in query_names and value in {"-1", "1.5"}:  # a valid wait holds the request
                        continue
                    names = [*query_names, "q", "status", "domain", "topic", "repo", "limit", "offset"]
                    send(agent, "get", f"{path}?{_all_at_once(names, value)}", f"query={value[:20]}")
                continue
            if method == "delete":
                for item in ["%00", "%ED%A0%80", HUGE, "-1", "..", "x" * 300, quote("<script>")]:
                    send(agent, "delete", _path(route, ids, item_id=item), "item id")
                continue
            for label, raw in RAW_BODIES.items():
                send(agent, method, path, f"raw {label}", data=raw, content_type="application/json")
            send(
                anonymous,
                method,
                path,
                "deep, anonymous",
                data=RAW_BODIES["deep object"],
                content_type="application/json",
            )
            base = VALID_BODIES.get(route.name, {})
            for name in body_fields or ["a"]:
                for value in FIELD_VALUES:
                    body = json.dumps({**base, name: value})
                    send(agent, method, path, f"{name}={str(value)[:20]!r}", data=body, content_type="application/json")
            if (route.template, method) in bodies:
                _send_hostile_keys(send, people.get(route.name, agent), method, path, route.name, body_fields)
                keyed.add(route.name)
        for kwarg in route.kwargs:
            for value in [HUGE, "0", "%00"]:
                send(agent, route.methods[0], _path(route, ids, **{kwarg: value}), f"path {kwarg}")
    send.report(capsys, f"API ({len(routes)} endpoints, {len(keyed)} taking a JSON body)", started)
    assert len(keyed) >= 25, sorted(keyed)


def _send_hostile_keys(send: Sender, client: Client, method: str, path: str, name: str, fields: list[str]) -> None:
    """Hostile keys (issue 33), each a 400 with a stable code: whole bodies, a valid body plus each
    bad key, a bad key in the value of each field (the keys in turn); then well-formed but large
    keys, which only must not fail. Every depth: test_a_bad_key_at_every_depth_is_refused."""
    base = VALID_BODIES.get(name, {})
    for label, raw in KEY_BODIES.items():
        send(client, method, path, f"keys: {label}", refused=True, data=raw, content_type=JSON)
    keys = list(HOSTILE_KEYS.items())
    for label, key in keys:
        send(client, method, path, f"key {label}", refused=True, data=with_key(base, key), content_type=JSON)
    for (label, key), field in zip(keys * len(fields or ["a"]), fields or ["a"], strict=False):
        body = with_key(base, field, {key: [key]})
        send(client, method, path, f"{field}: key {label}", refused=True, data=body, content_type=JSON)
    send.rows_unchanged(f"{method.upper()} {path} (hostile keys)")
    for label, raw in LARGE_KEY_BODIES.items():
        send(client, method, path, f"keys: {label}", data=raw, content_type=JSON)


def test_every_page_and_admin_changelist_refuses_hostile_input_without_5xx_or_writes(hostile_world, capsys):
    world, ids, root = hostile_world
    send, started = Sender(), time.perf_counter()
    people = {}
    for name, user in [("reviewer", world.reviewer), ("workspace admin", world.admin_user), ("superuser", root)]:
        people[name] = Client()
        people[name].force_login(user)
    for route in page_routes():
        path = _path(route, ids)
        for who in ("reviewer", "workspace admin"):
            for value in PAGE_VALUES if who == "reviewer" else set(PAGE_VALUES) - REFUSED_AT_THE_EDGE:
                send(people[who], "get", f"{path}?{_all_at_once(PAGE_QUERY, value)}", f"{who} query={value[:20]}")
        for value in FORM_VALUES:
            send(
                people["workspace admin"], "post", path, f"form={value[:20]!r}", data=dict.fromkeys(FORM_FIELDS, value)
            )
    for path in ["/review/%00/", "/memory/acme/%00/", "/admin/memory/fact/%00/change/", "/%00"]:
        send(people["superuser"], "get", path, "NUL in the path")
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        filters = [f for f in getattr(model_admin, "list_filter", ()) if isinstance(f, str)]
        names = ["q", "o", "p", "id__exact", *filters, *(f"{f}__exact" for f in filters)]
        for value in ["%00", HUGE, "-1", "%C2%B2", quote(FTS)]:
            send(people["superuser"], "get", f"{changelist}?{_all_at_once(names, value)}", f"changelist={value[:20]}")
        for pk in [HUGE, "-1", "%00", quote("<script>")]:
            send(people["superuser"], "get", f"{changelist}{pk}/change/", "change view")
    send.report(capsys, "pages and admin", started)


# --- The fuzzer's findings, one by one ----------------------------------------------------------
def _error(response: Any) -> tuple[int, str, dict[str, Any]]:
    body = response.json()
    return response.status_code, body["code"], body["fields"]


def test_the_fuzzers_review_output_at_the_largest_allowed_size_answers_quickly(world):
    """`"a." * 20000` took 26.6 s in the remember parser (and 200,000 characters, the most `output`
    may hold, outlived gunicorn's timeout); the parser itself is held to the largest body in
    tests/review/test_parsing.py."""
    body = json.dumps({"session_id": "x", "output": "a." * (OUTPUT_MAX_CHARS // 2), "files": {}})
    # The CPU this process spends (the parser's work), not the wall clock CI's load stretches.
    started = time.process_time()
    response = client_for(world.coder).post("/api/v1/reviews/", body, content_type="application/json")
    elapsed = time.process_time() - started
    assert response.status_code < 500
    assert response.json()["code"] != "invalid_input" or "output" not in response.json()["fields"]
    assert elapsed < 2.0, f"{elapsed:.2f} s"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"query": ' + b"[" * 5000 + b"]" * 5000 + b"}", "json_too_deep"),
        (b'{"query": "x", "limit": NaN}', "malformed_json"),
        (b'{"query": "x", "limit": Infinity}', "malformed_json"),
        (b'{"query": "x", "limit": 1e400}', "number_out_of_range"),
        (b'{"query": "x", "query": "y"}', "duplicate_key"),
        (b'{"query": "x\\u0000y"}', "invalid_characters"),
        (b'{"query": "x", "mode": "\\ud800"}', "invalid_characters"),
        (b'{"query": "x", "limit": 99999999999999999999}', "integer_out_of_range"),
        (b'{"query": "\xff"}', "invalid_characters"),
        (b'{"query": ', "malformed_json"),
    ],
)
def test_malformed_json_is_a_400_with_a_stable_code(world, raw, code):
    response = client_for(world.coder).post("/api/v1/search/", raw, content_type="application/json")
    status, got, _ = _error(response)
    assert (status, got) == (400, code), response.json()


def test_a_refused_value_names_where_it_was(world):
    body = b'{"domain": "architecture", "topic": "t", "content": "c", "memory_type": "\\ud800", "x": [1, 99999999999999999999]}'
    status, code, fields = _error(client_for(world.coder).post("/api/v1/facts/", body, content_type="application/json"))
    assert status == 400 and code in {"invalid_characters", "integer_out_of_range"}
    assert set(fields) <= {"memory_type", "x[1]"} and fields


@pytest.mark.parametrize("field", ["mode", "memory_type", "veracity", "failure_class"])
def test_a_lone_surrogate_in_a_choice_field_is_refused_at_once(world, field):
    cpu = time.process_time()
    response = client_for(world.coder).post(
        "/api/v1/facts/", json.dumps({"topic": "t", field: "\ud800"}), content_type="application/json"
    )
    assert _error(response)[:2] == (400, "invalid_characters")
    assert time.process_time() - cpu < 1.0  # the request's CPU, not the wall clock CI's load stretches


@pytest.mark.parametrize("path", ["/api/v1/facts/", "/api/v1/conflicts/", "/api/v1/policies/", "/api/v1/candidates/"])
def test_a_limit_beyond_64_bits_is_refused_on_that_parameter(world, path):
    status, code, fields = _error(client_for(world.coder).get(f"{path}?limit={HUGE}"))
    assert (status, code, set(fields)) == (400, "invalid_input", {"limit"})


def test_nul_in_an_api_path_or_query_is_a_400_in_the_api_shape(world):
    api = client_for(world.coder)
    run = api.post("/api/v1/runs/", {"task": "t"}, format="json").json()
    for path in [f"/api/v1/runs/{run['id']}/bank/items/%00/", "/api/v1/facts/?status=%00"]:
        response = api.delete(path) if "items" in path else api.get(path)
        assert _error(response)[:2] == (400, "invalid_characters"), path


@pytest.mark.parametrize(
    "path",
    [
        "/memory/acme/?status=%00",
        "/review/?workspace=%00",
        "/admin/memory/fact/?status=%00",
        "/memory/acme/graph.json?q=%00",
    ],
)
def test_nul_in_a_page_query_is_a_plain_400_page(world, path):
    client = Client()
    client.force_login(world.admin_user)
    response = client.get(path)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert b"Bad request" in response.content


def test_the_refusal_page_escapes_what_it_repeats(world):
    client = Client()
    client.force_login(world.admin_user)
    response = client.get("/memory/acme/?%3Cscript%3Ealert(1)%3C/script%3E=%00")
    assert response.status_code == 400
    assert b"<script>" not in response.content and b"&lt;script&gt;" in response.content


def test_the_grants_error_escapes_the_input(world):
    client = Client()
    client.force_login(world.admin_user)
    response = client.post("/access/acme/grant/", {"role": "<script>alert(1)</script>", "domain": "1", "level": "read"})
    assert response.status_code == 400
    assert b"<script>" not in response.content and b"&lt;script&gt;" in response.content


# --- Hostile keys (issue 33) --------------------------------------------------------------------
def _post(world: Any, path: str, raw: bytes, content_type: str = JSON) -> Any:
    client = client_for(world.coder)
    client.raise_request_exception = False
    return client.post(path, raw, content_type=content_type)


def test_the_issues_body_is_a_400_naming_the_key_in_strict_utf8_json(world, capsys):
    """`{"\\ud800": 1}` was a 500 on all 25 JSON endpoints: the refusal echoed the key, which
    cannot be encoded (tests/hostile_corpus.py has the rest; every endpoint gets it above)."""
    started, cpu = time.perf_counter(), time.process_time()
    response = _post(world, "/api/v1/search/", b'{"\\ud800": 1}')
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert not _not_a_clean_refusal(response), _not_a_clean_refusal(response)
    body = json.loads(response.content.decode("utf-8"))
    assert (body["code"], list(body["fields"])) == ("invalid_characters", ["\\ud800"])
    with capsys.disabled():
        print(f'\n{{"\\ud800": 1}}: {response.status_code} in {elapsed * 1000:.1f} ms ({cpu * 1000:.1f} ms of CPU)')
    assert cpu < 1.0  # this process's CPU (the request's work), not the wall clock CI's load stretches


def test_a_bad_key_at_every_depth_is_refused_naming_where(world):
    for label, raw in KEYS_AT_EVERY_DEPTH.items():
        response = _post(world, "/api/v1/facts/", raw)
        assert not _not_a_clean_refusal(response), (label, _not_a_clean_refusal(response))
        name, depth = label.rsplit(" at depth ", 1)
        where = "a." * (int(depth) - 1) + HOSTILE_KEYS[name]
        (path,) = response.json()["fields"]
        assert path == printable(where), (label, path)


def test_a_long_key_is_echoed_by_its_two_ends(world):
    response = _post(world, "/api/v1/facts/", with_key({"topic": "t"}, "k" * 100_000 + "\ud800"))
    (path,) = response.json()["fields"]
    assert path == "k" * 100 + "…" + "k" * 99 + "\\ud800", path


@pytest.mark.parametrize(
    ("charset", "raw"),
    [
        ("utf-7", b'{"query": "+2AA-"}'),  # "\ud800" in UTF-7: no \\u escape in the text
        ("utf-7", b'{"+AAA-": 1, "query": "x"}'),  # NUL in a key
        ("unicode_escape", b'{"query": "\\ud800"}'),
        ("raw_unicode_escape", b'{"\\udc00": 1, "query": "x"}'),
    ],
)
def test_a_charset_cannot_smuggle_nul_or_surrogates_past_the_parser(world, charset, raw):
    response = _post(world, "/api/v1/search/", raw, f"application/json; charset={charset}")
    assert response.status_code == 400 and response.json()["code"] == "invalid_characters", response.content


def test_the_renderer_writes_what_utf8_cannot_as_visible_escapes():
    from agents.api.renderers import SafeJSONRenderer

    rendered = SafeJSONRenderer().render({"\ud800": ["a\udc00", "é"], "n": [1, None]})
    assert json.loads(rendered.decode("utf-8")) == {"\\ud800": ["a\\udc00", "é"], "n": [1, None]}


def _remove_the_guards(monkeypatch: Any) -> None:
    """As before issue 33: the parser echoes a key raw and DRF's own renderer writes it."""
    from rest_framework.renderers import JSONRenderer

    from agents.api import parsers, renderers

    monkeypatch.setattr(parsers, "printable", lambda text, limit=0: text)
    monkeypatch.setattr(renderers.SafeJSONRenderer, "render", JSONRenderer.render)


@pytest.mark.parametrize("accept", [None, "text/html", "text/plain", "application/json"])
def test_debugs_500_page_is_written_at_once_whatever_the_request_holds(world, settings, monkeypatch, accept):
    """Under DEBUG a page that could not be encoded was built again by every middleware layer
    around a longer chain of exceptions (16-66 s), then the error escaped the handler."""
    settings.DEBUG = True
    _remove_the_guards(monkeypatch)
    headers = {"HTTP_ACCEPT": accept} if accept else {}
    client = client_for(world.coder)
    client.raise_request_exception = False
    started = time.process_time()  # the pages' rendering is this process's CPU (Django's: 25 s)
    response = client.post("/api/v1/search/", b'{"\\ud800": 1}', content_type=JSON, **headers)
    elapsed = time.process_time() - started
    if response.status_code == 406:  # text/plain: DRF finds no renderer before any error
        return
    assert response.status_code == 500
    assert b"UnicodeEncodeError" in response.content
    response.content.decode("utf-8")
    assert elapsed < 2.0, f"{elapsed:.1f} s"


def test_an_exception_escaping_django_still_ends_the_request_and_answers_500():
    """Django closes a request's database connections on `request_finished`, which only the
    server's closing of a response sends: an exception escaping the handler kept them open
    (under `make run`, 10 idle connections for 40 minutes). config.debug.last_resort sends it."""
    from django.core import signals

    from config.debug import last_resort

    def broken(environ: dict[str, Any], start_response: Any) -> Any:
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    finished: list[bool] = []

    def on_finished(**kwargs: Any) -> None:
        finished.append(True)

    signals.request_finished.connect(on_finished)
    started: list[Any] = []
    try:
        for path, kind in [("/api/v1/search/", "application/json"), ("/review/", "text/plain; charset=utf-8")]:
            body = b"".join(
                last_resort(broken)(
                    {"PATH_INFO": path}, lambda status, headers, exc_info=None: started.append((status, dict(headers)))
                )
            )
            status, headers = started.pop()
            assert (status, headers["Content-Type"]) == ("500 Internal Server Error", kind)
            if kind == "application/json":
                assert json.loads(body)["code"] == "server_error"
    finally:
        signals.request_finished.disconnect(on_finished)
    assert finished == [True, True]


# `make run`'s server with the guards of issue 33 removed: the parser echoes keys raw and DRF's
# own renderer writes them, as before. What is left must still answer at once and close.
UNGUARDED_RUNSERVER = """
import os, sys
sys.argv = ["manage.py", "runserver", sys.argv[1], "--noreload"]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from rest_framework.renderers import JSONRenderer
import agents.api.parsers, agents.api.renderers
agents.api.parsers.printable = lambda text, limit=0: text
agents.api.renderers.SafeJSONRenderer.render = JSONRenderer.render
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
"""


def _raw_post(url: str, key: str, raw: bytes) -> tuple[int, bytes, float]:
    """POST `raw` as JSON with no Accept header (as curl's default and the issue's report)."""
    request = urllib.request.Request(url, data=raw, method="POST")  # noqa: S310 -- a loopback URL
    request.add_header("Authorization", f"Bearer {key}")
    request.add_header("Content-Type", JSON)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
            return response.status, response.read(), time.monotonic() - started
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), time.monotonic() - started
    except OSError:  # not listening yet
        return 0, b"", time.monotonic() - started


def _runserver(command: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=_server_env(DEBUG="1", ENGRAM_THROTTLE_RATE="1000000/min", ENGRAM_RECALL_MODE="background"),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _hostile_keys_under_runserver(world: Any, command: list[str], log: Path, paths: list[str]) -> list[tuple]:
    """Start the server, send the issue's body to `paths`, return (path, status, body, seconds),
    and check that no database connection outlives the requests."""
    port = free_port()
    server = _runserver([*command, f"127.0.0.1:{port}"], log)
    db_name = connection.settings_dict["NAME"]
    base, key = f"http://127.0.0.1:{port}", world.coder.plain_key
    answers = []
    try:
        wait_for(
            lambda: _raw_post(f"{base}/api/v1/search/", key, b'{"query": "x"}')[0] == 200, timeout=120, what="runserver"
        )
        baseline = wait_for(lambda: _connections(db_name) + 1, timeout=5, what="a connection count") - 1
        for path in paths:
            status, body, seconds = _raw_post(base + path, key, b'{"\\ud800": 1}')
            answers.append((path, status, body, seconds))
        # A finished request closes its connection just after its answer is sent.
        wait_for(lambda: _connections(db_name) <= baseline, timeout=10, what=f"connections back to {baseline}")
    finally:
        _stop(server)
    return answers


KEYED_PATHS = ["/api/v1/search/", "/api/v1/facts/", "/api/v1/remember/", "/api/v1/runs/", "/api/v1/policies/"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_make_runs_server_refuses_the_issues_body_at_once_and_keeps_no_connection(world, tmp_path, capsys):
    """Before: 500 after 16-66 s (the debug page failing at every middleware layer), and each
    request's connection left open."""
    log = tmp_path / "runserver.log"
    answers = _hostile_keys_under_runserver(
        world, [sys.executable, "manage.py", "runserver", "--noreload"], log, KEYED_PATHS
    )
    with capsys.disabled():
        print(
            '\nrunserver (DEBUG=1), {"\\ud800": 1}: '
            + ", ".join(f"{p} {s} {t * 1000:.0f} ms" for p, s, _, t in answers)
        )
    for path, status, body, seconds in answers:
        assert status == 400 and json.loads(body)["code"] == "invalid_characters", (path, body[:300])
        assert seconds < 5.0, (path, seconds)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_make_runs_server_answers_an_unencodable_error_at_once_and_keeps_no_connection(world, tmp_path, capsys):
    log = tmp_path / "runserver.log"
    answers = _hostile_keys_under_runserver(world, [sys.executable, "-c", UNGUARDED_RUNSERVER], log, KEYED_PATHS[:2])
    with capsys.disabled():
        print(
            "\nrunserver (DEBUG=1), guards removed: "
            + ", ".join(f"{p} {s} {t * 1000:.0f} ms" for p, s, _, t in answers)
        )
    for path, status, body, seconds in answers:
        assert status == 500 and b"UnicodeEncodeError" in body, (path, status, body[:300])
        assert seconds < 5.0, (path, seconds)


# --- Chunked bodies -----------------------------------------------------------------------------
def _chunked(world: Any, body: bytes, *, terminated: bool) -> Any:
    """What the server hands Django for `Transfer-Encoding: chunked`: no Content-Length, and with
    gunicorn the already de-chunked body plus `wsgi.input_terminated`."""
    extra = {"HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_LENGTH": "", "wsgi.input": io.BytesIO(body)}
    if terminated:
        extra["wsgi.input_terminated"] = True
    return client_for(world.coder).generic("POST", "/api/v1/runs/", b"", content_type="application/json", **extra)


def test_a_chunked_body_is_read_when_the_server_decodes_it(world):
    response = _chunked(world, b'{"task": "fix the build"}', terminated=True)
    assert response.status_code == 201, response.json()


def test_a_chunked_body_the_server_cannot_decode_is_411_saying_why(world):
    status, code, _ = _error(_chunked(world, b'{"task": "fix the build"}', terminated=False))
    assert (status, code) == (411, "length_required")


def test_a_chunked_body_over_the_limit_is_413(world):
    body = b'{"task": "' + b"x" * settings.ENGRAM_MAX_BODY_BYTES + b'"}'
    assert _error(_chunked(world, body, terminated=True))[:2] == (413, "body_too_large")


# --- Database outage ----------------------------------------------------------------------------
def _database_down(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    raise OperationalError("could not connect to server: Connection refused")


@pytest.mark.parametrize("path", ["/", "/review/", "/memory/acme/", "/access/acme/", "/admin/", "/admin/memory/fact/"])
def test_pages_answer_503_with_a_friendly_page_while_the_database_is_down(world, path):
    client = Client()
    client.force_login(world.admin_user)
    with connection.execute_wrapper(_database_down):
        response = client.get(path)
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response["Content-Type"].startswith("text/html")
    assert b"Temporarily unavailable" in response.content and b"Traceback" not in response.content


def test_the_api_answers_503_json_while_the_database_is_down(world):
    api = client_for(world.coder)
    with connection.execute_wrapper(_database_down):
        response = api.get("/api/v1/facts/")
    assert _error(response)[:2] == (503, "database_unavailable")
    assert response["Retry-After"] == "2"


def test_a_database_outage_met_outside_a_view_is_a_503_too(world):
    from django.test import RequestFactory

    from config.urls import handler500

    for path in ["/review/", "/api/v1/facts/"]:
        try:
            raise OperationalError("server closed the connection unexpectedly")
        except OperationalError:
            response = handler500(RequestFactory().get(path))
        assert (response.status_code, response["Retry-After"]) == (503, "2"), path
