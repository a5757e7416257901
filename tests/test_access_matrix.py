"""Every URL pattern of the site × six personas (issue 32): the access matrix, from the URL conf.

The routes come from the URL conf (tests.test_hostile_input walks it): the Django admin's pages of
every registered model (changelist, add, change, delete, history, the user's password page, the
domain's reviewer-permission pages), the admin's own pages, the review site's pages and htmx
endpoints, the agent API and the people's erasure API, /healthz and /metrics. Each is classified
into a *family* (REVIEW_SURFACES, ADMIN_SITE_SURFACES, ADMIN_MODELS, the API's rule); a pattern
nobody classified fails `test_every_url_pattern_of_the_site_is_classified`, so a new URL must
say who may use it.

Path parameters get real ids of rows made by the `matrix` fixture: rows in a domain both reviewers
review (scope `in`), in a domain of the same workspace neither reviews (`out`), of another
workspace (`foreign`), workspace-level rows (`ws`), a remember review whose items land in both
(`mixed`), people of more rights (`super`, `admin`), a plain member (`peer`), someone of another
workspace (`stranger`), the persona itself (`self`), and path pairs that do not belong together
(`cross`: refused to everyone). Every route is requested with each scope as each persona (once
only where the persona is stopped at the door: `stopped_at_the_door`): GET, and POST where the
route changes state, with CSRF as a browser posts (`Client(enforce_csrf_checks=True)` and the
token of a page). An admin form is the superuser's own, edited as an attacker would (`mutate`).
Each request runs in a savepoint rolled back afterwards, so every cell sees the same world; a
refused POST must leave every row of Engram's tables, the users, groups and permissions as they
were. The MCP server has no HTTP endpoint (stdio, `manage.py mcp`): nothing to request here.

The expectation of a cell is `expected(persona, family, scope, write)`: the rule table RULES,
persona × scope → ALLOW / REFUSE / EITHER (where issue 32 leaves the choice to the
implementation). ALLOW: 2xx, or 3xx to a page (a POST may also answer 4xx for its input: the
handler was reached). REFUSE: 401/403/404, the admin's bounce to its index or its sign-in. An
anonymous visitor is sent to sign in (401/403 from the API). Never 5xx, never a body holding the
marker text of rows the persona may not see (MARKS), and no POST raises its sender's own rights
(`rights_of`), whatever the cell allows.

The rule table and the URL classification are in tests/access_matrix_rules.py, the world, the
paths and the bodies of the POSTs in tests/access_matrix_world.py; sending and judging are here.

Run with `-s` to print the cells per persona and outcome.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from django.apps import apps
from django.contrib import admin
from django.db import connection, transaction
from django.test import Client, RequestFactory
from django.urls import get_resolver, reverse
from guardian.models import GroupObjectPermission, UserObjectPermission
from rest_framework.settings import api_settings

from memory import inference
from memory.models import WorkspaceMembership
from tests.access_matrix_rules import (
    ADMIN_MODELS,
    ADMIN_OPS,
    ALLOW,
    API_PEOPLE,
    API_PUBLIC,
    EITHER,
    FAMILIES,
    LOGGED_IN,
    LOGIN,
    MARKS,
    MAY_READ,
    PERSONAS,
    REFUSE,
    STAFF,
    Surface,
    classify,
    classify_unnamed,
    expected,
    named_patterns,
    surfaces,
    unnamed_patterns,
)
from tests.access_matrix_world import DECIDE, Cell, Matrix, admin_body, api_body, filled_path, fillings, review_body
from tests.access_matrix_world import matrix as matrix  # the fixture
from tests.test_hostile_input import _walk, api_routes
from tests.test_hostile_input import fast_password_hashing as fast_password_hashing  # the autouse fixture


# --- Sending, judging ------------------------------------------------------------------------------
class _Rollback(Exception):
    pass


def _fingerprint_sql() -> str:
    """One query: a digest of every row of Engram's tables, the users (but their last login), the
    groups, permissions and guardian's object permissions."""
    quote = connection.ops.quote_name
    parts = []
    for model in apps.get_models(include_auto_created=True):
        meta = model._meta
        if meta.app_label not in ("memory", "agents", "review", "auth", "guardian") or meta.proxy or not meta.managed:
            continue
        volatile = {"last_login", "last_used_at", "embedding", "search_vector"}
        columns = ", ".join(quote(f.column) for f in meta.concrete_fields if f.column not in volatile)
        parts.append(
            f"(SELECT coalesce(md5(string_agg(h, ',' ORDER BY h)), '') FROM "  # noqa: S608 -- names from the models
            f"(SELECT md5(ROW({columns})::text) AS h FROM {quote(meta.db_table)}) AS rows_)"
        )
    return "SELECT md5(" + " || ".join(parts) + ")"


def fingerprint(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def rights_of(user: Any) -> tuple[frozenset[str], ...]:
    """What a person may do, read afresh: staff and superuser status, every model permission
    (their own and their groups'), the domains guardian lets them review, the workspaces they
    administer."""
    fresh = type(user)._default_manager.filter(pk=user.pk).first()
    if fresh is None:  # deleted: no rights left
        return (frozenset(),) * 4
    flags = {name for name in ("is_superuser", "is_staff", "is_active") if getattr(fresh, name)}
    reviews = UserObjectPermission.objects.filter(user=fresh, permission__codename="review_domain")
    via_groups = GroupObjectPermission.objects.filter(group__user=fresh, permission__codename="review_domain")
    admin_of = WorkspaceMembership.objects.filter(user=fresh, is_admin=True).values_list("workspace_id", flat=True)
    return (
        frozenset(flags),
        frozenset(fresh.get_all_permissions()),
        frozenset([*reviews.values_list("object_pk", flat=True), *via_groups.values_list("object_pk", flat=True)]),
        frozenset(str(pk) for pk in admin_of),
    )


def outcome_of(status: int, location: str, path: str) -> str:
    if status >= 500:
        return "5xx"
    if 300 <= status < 400:
        where = urlsplit(location).path
        if where in ("/login/", "/admin/login/"):
            return "login"
        if (
            where == "/admin/"
            and path.startswith("/admin/")
            and urlsplit(path).path not in ("/admin/", "/admin/login/")
        ):
            return "bounce"  # the admin's "doesn't exist. Perhaps it was deleted?"
        return "ok"
    if status < 300:
        return "ok"
    if status in (401, 403):
        return "denied"
    if status == 404:
        return "missing"
    return "invalid"


ACCEPTED = {
    ALLOW: {"ok"},
    REFUSE: {"denied", "missing", "bounce", "login"},
    LOGIN: {"login", "denied"},
    EITHER: {"ok", "invalid", "denied", "missing", "bounce", "login"},
}


@dataclass
class Result:
    cells: Counter[str] = field(default_factory=Counter)
    failures: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    routes: set[str] = field(default_factory=set)
    refused_input: list[str] = field(default_factory=list)  # allowed POSTs whose input was refused


def _leaks(persona: str, body: str) -> list[str]:
    return [scope for scope, mark in MARKS.items() if scope not in MAY_READ[persona] and mark in body]


def _body_text(response: Any) -> str:
    if response.get("Content-Type", "").startswith(("text/", "application/json")):
        return response.content.decode(errors="replace")
    return ""


def send(m: Matrix, persona: str, cell: Cell, state: tuple[str, str], result: Result) -> None:
    """One request in a savepoint rolled back afterwards (every cell sees the same rows), judged."""
    client = m.clients[persona]
    token = m.tokens[persona]
    kwargs: dict[str, Any] = {}
    if cell.method != "get":
        kwargs["HTTP_X_CSRFTOKEN"] = token
        if cell.json:
            kwargs |= {"data": json.dumps(cell.data or {}), "content_type": "application/json"}
        else:
            kwargs["data"] = {**(cell.data or {}), "csrfmiddlewaretoken": token}
        if cell.surface.name.startswith("review:"):
            kwargs["HTTP_HX_REQUEST"] = "true"  # as htmx posts them
    judge_state = cell.method != "get" and (
        cell.expect in (REFUSE, LOGIN) or FAMILIES[cell.surface.family].judge == "state"
    )
    sql, baseline = state
    cookies = copy.deepcopy(client.cookies) if cell.method != "get" else None
    changed, raised = False, []
    try:
        with transaction.atomic(), inference.enclosing_transactions():  # the harness's rollback
            response = getattr(client, cell.method)(cell.path, **kwargs)
            # Every cell is rolled back, so the rows before any request are the rows before this one.
            changed = judge_state and fingerprint(sql) != baseline
            user = m.users[persona]
            # A refused POST changed no row at all (above); one that may go through must not raise
            # its sender's own rights.
            if cell.method != "get" and cell.expect in (ALLOW, EITHER) and user is not None and persona != "superuser":
                raised = [sorted(now - was) for now, was in zip(rights_of(user), m.rights[persona], strict=True)]
            raise _Rollback
    except _Rollback:
        pass
    if cookies is not None:
        client.cookies = cookies  # a password change cycles the session key: the rolled-back session stays
    status = response.status_code
    outcome = outcome_of(status, response.get("Location", ""), cell.path)
    result.routes.add(cell.surface.name)
    result.cells[f"{persona}: {cell.expect}/{outcome}"] += 1
    where = f"{persona}: {status} {cell.method.upper()} {cell.path} [{cell.surface.family}, scope {cell.scope}]"
    if outcome == "5xx":
        result.failures["5xx"].append(f"{where}: {response.content[:200]!r}")
        return
    accepted = set(ACCEPTED[cell.expect])
    if cell.expect == ALLOW and cell.method != "get":
        accepted.add("invalid")  # the handler ran and refused the input, not the person
        if outcome == "invalid":
            result.refused_input.append(where)
    if FAMILIES[cell.surface.family].judge == "state" and cell.expect in (ALLOW, REFUSE) and outcome == "ok":
        if changed != (cell.expect == ALLOW):
            result.failures[f"{cell.expect}, but it {'changed rows' if changed else 'changed nothing'}"].append(where)
    elif outcome not in accepted:
        result.failures[f"expected {cell.expect}, got {outcome}"].append(where)
    elif cell.expect in (REFUSE, LOGIN) and changed:
        result.failures[f"{outcome} ({cell.expect} expected), yet rows changed"].append(where)
    elif cell.expect == ALLOW and cell.method == "post" and cell.surface.op and not 300 <= status < 400:
        # The admin redirects after a save: a 200 is its form again, with errors. The body the
        # matrix posts (the superuser's form, edited) must be one the admin accepts, or the
        # refusals of the same body to others would prove nothing.
        result.failures["allowed, but the admin did not accept the matrix's form"].append(where)
    leaked = _leaks(persona, _body_text(response))
    if leaked:
        result.failures[f"shows {'/'.join(leaked)} content"].append(where)
    if any(raised):  # whatever the cell allows, nobody raises their own rights
        result.failures["raised their own rights"].append(f"{where}: {[r for r in raised if r]}")


def _offered(m: Matrix, s: Surface, row: Any, method: str) -> str:
    """Whether the admin offers this operation at all, to a superuser: "no" for a read-only model's
    change form or a fact's add page (refused to everyone); "partly" for the deletion of a row that
    would take rows nobody may delete (an audit trail, a run): the page opens and says so, nothing
    is deleted; else "yes"."""
    if s.op in ("", "legacy") or s.op.startswith("permissions"):
        return "yes"
    model_admin = admin.site._registry[apps.get_model(s.model)]
    request = RequestFactory().get("/admin/")
    request.user = m.users["superuser"]
    if s.op == "add":
        offered = model_admin.has_add_permission(request)
    elif s.op == "delete":
        offered = model_admin.has_delete_permission(request, row)
        if offered:
            _, _, perms_needed, protected = model_admin.get_deleted_objects([row], request)
            if perms_needed or protected:
                return "partly"
    elif s.op == "password_change" or (s.op == "change" and method == "post"):
        offered = model_admin.has_change_permission(request, row)
    else:
        offered = model_admin.has_view_or_change_permission(request, row)
    return "yes" if offered else "no"


def stopped_at_the_door(persona: str, family: str) -> bool:
    """Whether the persona is turned away before the view reads its path: the sign-in for the
    anonymous, the admin's own sign-in for people who are not staff, the agent-key check of the
    API. There the route is requested once (with its first filling), not with every scope."""
    audience = FAMILIES[family].audience
    if audience in ("public", "any"):
        return False
    return persona == "anonymous" or audience == "agents" or (audience == "staff" and persona not in STAFF)


def cells_for(m: Matrix, persona: str) -> Iterator[Cell]:
    api_methods = {route.name: route.methods for route in api_routes()}
    for s in surfaces():
        methods = api_methods[s.name] if s.filler == "api" else s.methods
        filled = fillings(m, s, persona)
        for scope, kwargs, row in filled[:1] if stopped_at_the_door(persona, s.family) else filled:
            path = filled_path(s, kwargs)
            for method in methods:
                write = method != "get" or (bool(s.op) and ADMIN_OPS[s.op][0])
                expect = expected(persona, s.family, scope, write)
                offered = _offered(m, s, row, method) if expect in (ALLOW, EITHER) else "yes"
                if offered == "no":
                    expect = REFUSE
                elif offered == "partly" and expect == ALLOW:
                    expect = EITHER
                cell = Cell(s, scope, method, path, expect)
                if method != "get":
                    if s.filler == "api":
                        cell.data, cell.json = api_body(s, row), True
                    elif s.op:
                        cell.data = admin_body(m, s, path, persona)
                    else:
                        cell.data = review_body(s.name, kwargs, row)
                yield cell


def _sign_in(m: Matrix, persona: str) -> None:
    client = Client(enforce_csrf_checks=True)
    client.raise_request_exception = False  # a 500 is reported as a cell, not raised
    if m.users[persona] is not None:
        client.force_login(m.users[persona])
    page = client.get("/login/" if persona == "anonymous" else "/")  # a page with a form: the CSRF cookie
    html = page.content.decode()
    marker = 'name="csrfmiddlewaretoken" value="'
    assert marker in html, f"{persona}: no CSRF token on {page.request['PATH_INFO']}"
    m.clients[persona] = client
    m.tokens[persona] = html.split(marker, 1)[1].split('"', 1)[0]
    if m.users[persona] is not None:
        m.rights[persona] = rights_of(m.users[persona])


# --- The tests ---------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def quiet_refusals():
    """Django logs every 4xx with its traceback (thousands here); 5xx are still logged, and failed."""
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def test_every_url_pattern_of_the_site_is_classified():
    """A URL pattern the matrix does not know fails here: say who may use it (REVIEW_SURFACES,
    ADMIN_SITE_SURFACES, ADMIN_MODELS, API_PUBLIC / API_PEOPLE, INFRA, UNNAMED)."""
    patterns = named_patterns()
    unknown = [f"{name} ({raw})" for name, raw, kwargs in patterns if classify(name, raw, kwargs) is None]
    assert not unknown, "URL patterns the access matrix does not classify:\n" + "\n".join(unknown)
    unknown = [raw for raw in unnamed_patterns() if classify_unnamed(raw) is None]
    assert not unknown, "unnamed URL patterns the access matrix does not classify:\n" + "\n".join(unknown)
    # An API view answering anyone but agents (its own authentication or permissions) is named in
    # API_PUBLIC or API_PEOPLE; the others are the agents' (people refused).
    for _, name, pattern in _walk(get_resolver().url_patterns, "/", ""):
        view = getattr(pattern.callback, "cls", None)
        if view is None or not name.startswith("api-") or name in API_PUBLIC | API_PEOPLE:
            continue
        assert list(view.authentication_classes) == list(api_settings.DEFAULT_AUTHENTICATION_CLASSES), name
        assert list(view.permission_classes) == list(api_settings.DEFAULT_PERMISSION_CLASSES), name
    registered = {model._meta.label_lower for model in admin.site._registry}
    assert registered == set(ADMIN_MODELS), f"registered admins not in ADMIN_MODELS: {registered ^ set(ADMIN_MODELS)}"
    assert len(patterns) > 200, len(patterns)


def test_every_url_as_each_persona(matrix: Matrix, capsys: Any) -> None:
    """Every URL pattern, each way its path is filled, as each of the six personas."""
    started = time.perf_counter()
    for persona in PERSONAS:
        _sign_in(matrix, persona)
    sql = _fingerprint_sql()
    state = (sql, fingerprint(sql))
    result = Result()
    every = {s.name for s in surfaces()}
    for persona in PERSONAS:
        before = set(result.routes)
        result.routes.clear()
        for cell in cells_for(matrix, persona):
            send(matrix, persona, cell, state, result)
        assert every <= result.routes, f"{persona}: routes never requested: {sorted(every - result.routes)}"
        result.routes |= before
    assert fingerprint(sql) == state[1], "a request changed rows that were not rolled back"
    with capsys.disabled():
        print(f"\naccess matrix: {sum(result.cells.values())} cells in {time.perf_counter() - started:.1f} s")
        for persona in PERSONAS:
            cells = {k.split(": ", 1)[1]: n for k, n in sorted(result.cells.items()) if k.startswith(f"{persona}: ")}
            print(f"  {persona:15} {sum(cells.values()):4}  {cells}")
        print("  allowed, the input refused:\n    " + "\n    ".join(result.refused_input))
    report = [f"{why} ({len(lines)}):\n  " + "\n  ".join(lines) for why, lines in sorted(result.failures.items())]
    wrong = sum(len(lines) for lines in result.failures.values())
    assert not report, f"{wrong} cells wrong\n" + "\n".join(report)


# Pages whose every link must open for the persona who may open the page: (path, family, scope).
def _link_pages(m: Matrix) -> list[tuple[str, str, str]]:
    mixed = m.rows["review.rememberreview"]["mixed"]
    return [
        ("/", "personal", "none"),
        ("/review/", "personal", "none"),
        ("/memory/acme/", "ws_page", "ws"),
        (reverse("review:remember-review", args=[mixed.pk]), "review", "mixed"),
        ("/admin/", "admin_home", "none"),
        ("/admin/memory/auditevent/", "m_audit", "none"),
    ]


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href") or ""
            if href and not href.startswith(("#", "mailto:", "javascript:", "http://", "https://")):
                self.hrefs.append(href)


def _get(client: Client, path: str) -> Any:
    """A GET in a savepoint rolled back afterwards."""
    try:
        with transaction.atomic(), inference.enclosing_transactions():
            response = client.get(path)
            raise _Rollback
    except _Rollback:
        pass
    return response


def test_every_link_on_the_pages_a_persona_opens_opens_for_them(matrix: Matrix, capsys: Any) -> None:
    """The dashboard, the queue, the memory browser, a remember review, the admin's index and its
    audit log, as each persona who may open them: every link on them opens for that persona — never
    a 403, a 404, the sign-in or the admin's bounce to its index — and shows nothing they may not see."""
    broken: list[str] = []
    followed = Counter[str]()
    for persona in LOGGED_IN:
        _sign_in(matrix, persona)
        client = matrix.clients[persona]
        seen: set[str] = set()
        for page, family, scope in _link_pages(matrix):
            if expected(persona, family, scope, False) != ALLOW:
                continue
            response = _get(client, page)
            assert response.status_code == 200, (persona, page, response.status_code)
            parser = _Links()
            parser.feed(response.content.decode())
            for href in parser.hrefs:
                target = urljoin(page, href)
                if target in seen or target.startswith("/static/"):
                    continue
                seen.add(target)
                linked = _get(client, target)
                outcome = outcome_of(linked.status_code, linked.get("Location", ""), target)
                if outcome != "ok":
                    broken.append(f"{persona}: {page} → {target}: {linked.status_code} {linked.get('Location', '')}")
                leaked = _leaks(persona, _body_text(linked))
                if leaked:
                    broken.append(f"{persona}: {page} → {target}: shows {'/'.join(leaked)} content")
        followed[persona] = len(seen)
        assert seen, f"{persona}: no link followed"
    with capsys.disabled():
        print(f"\nlinks followed: {dict(followed)}")
    assert not broken, f"{len(broken)} links broken:\n" + "\n".join(broken)


def test_a_post_without_the_csrf_token_changes_nothing(matrix: Matrix) -> None:
    """The matrix posts with the page's token; without it the same POSTs are refused (403)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(matrix.users["superuser"])
    state_sql = _fingerprint_sql()
    before = fingerprint(state_sql)
    peer = matrix.targets["peer"]
    fact = matrix.rows["memory.fact"]["in"]
    for path, data in [
        (reverse("admin:auth_user_password_change", args=[peer.pk]), {"password1": "x" * 20, "password2": "x" * 20}),
        (reverse("admin:auth_user_delete", args=[peer.pk]), {"post": "yes"}),
        (f"/review/candidate/{matrix.rows['memory.candidate']['in'].pk}/decide/", DECIDE["candidate"]),
        (f"/memory/acme/facts/{fact.pk}/archive/", {}),
    ]:
        assert client.post(path, data).status_code == 403, path
    assert fingerprint(state_sql) == before
