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
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
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

from agents.operations.serializers_reviews import OUTPUT_MAX_CHARS
from memory.actors import Actor
from memory.services.tenancy import set_grant
from tests.conftest import client_for
from tests.factories import CandidateFactory, FactFactory, PolicyFactory

SYSTEM = Actor.of_system("test")
FTS = "a & b | !c :* (d) <-> e:A ' \\ \" !! ((( ::"
HUGE = "99999999999999999999"
STATS: Counter[str] = Counter()

# --- Corpus ------------------------------------------------------------------------------------
# Field values (the body stays otherwise valid, so each value reaches as deep as it can).
FIELD_VALUES: list[Any] = [
    "\ud800",
    "a\x00b",
    int(HUGE),
    2**63 - 1,
    -1,
    1.5,
    None,
    [[[["deep"]]]],
    {"a": {"b": "c"}},
    FTS,
]
# Whole bodies, as bytes: what a JSON encoder would never produce.
RAW_BODIES: dict[str, bytes] = {
    "deep object": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "deep array": b"[" * 5000 + b"]" * 5000,
    "65 deep": b"[" * 65 + b"]" * 65,
    "NaN": b'{"a": NaN}',
    "Infinity": b'{"a": Infinity}',
    "-Infinity": b'{"a": -Infinity}',
    "1e400": b'{"a": 1e400}',
    "duplicate keys": b'{"a": 1, "a": 2}',
    "not UTF-8": b'{"a": "\xff\xfe"}',
    "escaped NUL key": b'{"a\\u0000": 1}',
    "lone low surrogate": b'{"a": "\\udc00"}',
    "not JSON": b"not json",
    "empty": b"",
    "null": b"null",
    "array": b"[]",
    "string": b'"s"',
    "number": b"1",
    "truncated": b'{"a": ',
    "BOM": b"\xef\xbb\xbf{}",
    "3 MB": b'{"a": "' + b"x" * 3_000_000 + b'"}',
}
QUERY_VALUES = [
    "%00",
    "%ED%A0%80",
    "%FF",
    HUGE,
    "-" + HUGE,
    "9223372036854775807",
    "-1",
    "%C2%B2",  # "²": str.isdigit() says yes, int() says no
    "NaN",
    "1e400",
    "1.5",
    quote(FTS),
    "x" * 3000,
    quote("<script>alert(1)</script>"),
]
PAGE_VALUES = [v for v in QUERY_VALUES if v not in {"%FF", "1e400", "1.5"}]  # the same cases, for pages
SLOW_DOCS = {"api-schema", "api-docs"}
# Pages: values refused at the edge are tried once (as the reviewer); the others as both people.
REFUSED_AT_THE_EDGE = {"%00", HUGE, "-" + HUGE}
PAGE_QUERY = ["q", "status", "domain", "repo", "page", "workspace", "kind", "age", "order", "current", "inline"]
PAGE_QUERY += ["memory_type", "veracity", "fact", "sort", "limit", "offset"]
FORM_VALUES = ["\x00", HUGE, "-1", "\u00b2", "<script>alert(1)</script>", "x" * 20_000, FTS]
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
    refusal has the API's error shape."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.counts = _table_counts()
        self.stats: Counter[str] = Counter()

    def __call__(self, client: Client, method: str, path: str, what: str, **kwargs: Any) -> int:
        client.raise_request_exception = False  # a 500 is counted and reported, not raised
        response = getattr(client, method)(path, **kwargs)
        before, self.counts = self.counts, _table_counts()
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
        return status

    def report(self, capsys: Any, label: str, started: float) -> None:
        STATS.update(self.stats)
        with capsys.disabled():
            print(
                f"\nhostile {label}: {self.stats['requests']} requests, {self.stats['4xx']} 4xx, "
                f"{self.stats['5xx']} 5xx, {time.perf_counter() - started:.1f} s"
            )
        assert not self.failures, "\n".join(self.failures[:40])


def _all_at_once(names: list[str], value: str) -> str:
    """One query string giving every parameter the same hostile value: one request per value."""
    return "&".join(f"{name}={value}" for name in dict.fromkeys(names))


# --- The suite ---------------------------------------------------------------------------------
def test_every_api_endpoint_refuses_hostile_input_without_5xx_or_writes(hostile_world, capsys):
    world, ids, _ = hostile_world
    agent, anonymous = client_for(world.coder), client_for(None)
    send, started = Sender(), time.perf_counter()
    fields = schema_fields()
    routes = api_routes()
    assert len(routes) >= 23, [r.name for r in routes]
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
        for kwarg in route.kwargs:
            for value in [HUGE, "0", "%00"]:
                send(agent, route.methods[0], _path(route, ids, **{kwarg: value}), f"path {kwarg}")
    send.report(capsys, f"API ({len(routes)} endpoints)", started)


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
    started = time.perf_counter()
    response = client_for(world.coder).post(
        "/api/v1/facts/", json.dumps({"topic": "t", field: "\ud800"}), content_type="application/json"
    )
    assert _error(response)[:2] == (400, "invalid_characters")
    assert time.perf_counter() - started < 1.0


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
