"""The access matrix's rule table (tests/test_access_matrix.py): the six personas, what each may
read (MARKS, MAY_READ), `expected(persona, family, scope, write)`, and the classification of every
URL pattern of the site into a family (`surfaces`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.urls import URLResolver, get_resolver

from tests.test_hostile_input import _kwargs_of, _walk

PERSONAS = ("anonymous", "nomember", "staff_norights", "reviewer", "staff_reviewer", "superuser")
LOGGED_IN = PERSONAS[1:]
STAFF = {"staff_norights", "staff_reviewer", "superuser"}
MODEL_PERMS = {"staff_reviewer", "superuser"}  # Django model permissions (the superuser has them all)

ALLOW, REFUSE, LOGIN, EITHER = "allow", "refuse", "login", "either"
ALL = "*"

# Marker text in the rows of each scope: a body holding the marker of a scope the persona may not
# see leaks that scope's content (a domain's facts, a review item's notes, an audit entry's detail).
MARKS = {"in": "mk-in-q7", "out": "mk-out-q7", "ws": "mk-ws-q7", "foreign": "mk-foreign-q7"}
MAY_READ = {
    "superuser": set(MARKS),
    "staff_reviewer": {"in", "ws"},
    "reviewer": {"in", "ws"},
    "staff_norights": set(),
    "nomember": set(),
    "anonymous": set(),
}


# --- The rule table ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Family:
    """A kind of surface: who may reach it at all (`audience`), then the rule deciding reads and
    the rule deciding writes (POSTs, and the admin's add / delete / password / permission pages)."""

    audience: str  # public | any | people | staff | agents
    read: str = "sees"
    write: str = "sees"
    model_perms: bool = False  # also needs Django model permissions (staff without rights: refused)
    judge: str = "status"  # status | state (a POST answering 200 either way: judged by the rows)


_REVIEWERS = dict.fromkeys(("none", "global", "in", "ws", "mixed"), ALLOW)
# persona → scope → outcome; a persona or scope not named: REFUSE.
RULES: dict[str, dict[str, dict[str, str]]] = {
    "anyone": {p: {ALL: ALLOW} for p in LOGGED_IN},
    # Who sees what: a superuser everything; a reviewer (staff or not) their workspace's rows and
    # the domains they review; people of no workspace nothing but themselves.
    "sees": {
        "superuser": {ALL: ALLOW},
        "staff_reviewer": _REVIEWERS,
        "reviewer": _REVIEWERS,
        "staff_norights": {"none": ALLOW, "global": ALLOW},
        "nomember": {"none": ALLOW, "global": ALLOW},
    },
    # Rights (grants, memberships, agents, budgets, erasure, reviewer permissions): workspace
    # admins, and no persona but the superuser administers anything.
    "administers": {"superuser": {ALL: ALLOW}},
    # Deciding a remember review: every one of its items must land in a domain the person decides.
    "decides_all": {
        "superuser": {ALL: ALLOW},
        "staff_reviewer": {"in": ALLOW},
        "reviewer": {"in": ALLOW},
    },
    # People (issue 32 §1): nobody changes the credentials, status, username, groups or rights of
    # anyone but themselves without administering them; a superuser changes anyone. Reading the
    # user list, and changing oneself through the user admin, are left to the implementation.
    "user_write": {"superuser": {ALL: ALLOW}, "staff_reviewer": {"self": EITHER, "none": EITHER}},
    "either": {p: {ALL: EITHER} for p in LOGGED_IN},
    # /admin/<app>/: staff without model permissions may still see the decay curves (memory).
    "app_index": {"superuser": {ALL: ALLOW}, "staff_reviewer": {ALL: ALLOW}, "staff_norights": {ALL: EITHER}},
    # /admin/r/<ct>/<id>/: no model has a public URL; never a redirect to a row one may not see.
    "view_on_site": {"superuser": {ALL: EITHER}, "staff_reviewer": {"in": EITHER}},
}

FAMILIES: dict[str, Family] = {
    "public": Family("public"),
    "logout": Family("any"),  # POST-only sign-out: a GET must not 5xx, and is not posted here
    "catch_all": Family("any"),
    "healthz": Family("public"),
    # Scrapers, not people: a bearer token, or an unforwarded loopback request when allowed
    # (config/metrics.py, tested there). No persona changes the answer.
    "metrics": Family("any"),
    # The review site
    "personal": Family("people", read="anyone", write="anyone"),
    "bulk": Family("people", judge="state"),
    "ws_page": Family("people"),
    "ws_admin": Family("people", read="administers", write="administers"),
    "domain": Family("people"),
    "review": Family("people"),
    "review_decide": Family("people", write="decides_all"),
    "review_item": Family("people"),
    # The API
    "api_public": Family("public"),
    "api_agent": Family("agents"),
    "api_people": Family("people", read="administers", write="administers"),
    # The admin site
    "admin_home": Family("staff", read="anyone"),
    "admin_app": Family("staff", read="app_index"),
    "admin_autocomplete": Family("staff", model_perms=True),
    "view_on_site": Family("staff", read="view_on_site"),
    "m_domain": Family("staff", model_perms=True),
    "m_workspace": Family("staff", model_perms=True),
    "m_administered": Family("staff", write="administers", model_perms=True),
    "m_audit": Family("staff", model_perms=True),
    "m_review": Family("staff", model_perms=True),
    "m_review_item": Family("staff", model_perms=True),
    "m_global": Family("staff", write="administers"),
    "m_user": Family("staff", read="either", write="user_write", model_perms=True),
    "m_group": Family("staff", read="either", write="either", model_perms=True),
    "admin_legacy": Family("staff", read="either"),  # a redirect to the change page, judged there
}


def expected(persona: str, family: str, scope: str, write: bool) -> str:
    fam = FAMILIES[family]
    if fam.audience == "public":
        return ALLOW
    if fam.audience == "any":
        return EITHER
    if persona == "anonymous":
        return LOGIN
    if fam.audience == "agents":
        return REFUSE
    if fam.audience == "staff" and persona not in STAFF:
        return REFUSE
    if fam.model_perms and persona not in MODEL_PERMS:
        return REFUSE
    if scope == "cross":
        return REFUSE
    cells = RULES[fam.write if write else fam.read].get(persona, {})
    return cells.get(scope, cells.get(ALL, REFUSE))


# --- Classification of every URL pattern ------------------------------------------------------
# Review site: name → (family, methods, how its path is filled).
REVIEW_SURFACES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "review:login": ("public", ("get",), "none"),
    "review:logout": ("logout", ("get",), "none"),
    "review:dashboard": ("personal", ("get",), "none"),
    "review:queue": ("personal", ("get",), "none"),
    "review:queue-bulk": ("bulk", ("post",), "bulk"),
    "review:queue-detail": ("domain", ("get",), "queue"),
    "review:queue-decide": ("domain", ("post",), "queue"),
    "review:candidate-diff": ("domain", ("post",), "candidate"),
    "review:candidate-complete": ("domain", ("post",), "candidate"),
    "review:grants": ("ws_page", ("get",), "slug"),
    "review:grant-set": ("ws_admin", ("post",), "slug"),
    "review:grant-changes": ("ws_page", ("get",), "slug"),
    "review:browser": ("ws_page", ("get",), "slug"),
    "review:fact": ("domain", ("get",), "fact"),
    "review:fact-supersede": ("domain", ("post",), "fact"),
    "review:fact-archive": ("domain", ("post",), "fact"),
    "review:policies": ("ws_page", ("get",), "slug"),
    "review:policy-budget": ("ws_admin", ("post",), "slug"),
    "review:policy-action": ("domain", ("post",), "policy"),
    "review:graph": ("ws_page", ("get",), "slug"),
    "review:graph-json": ("ws_page", ("get",), "slug"),
    "review:erase": ("ws_admin", ("get", "post"), "slug"),
    "review:decisions": ("ws_admin", ("get", "post"), "slug"),
    "review:run": ("ws_page", ("get",), "run"),
    "review:remember-review": ("review", ("get",), "review"),
    "review:remember-note": ("review", ("post",), "review"),
    "review:remember-approve": ("review_decide", ("post",), "review"),
    "review:remember-reject": ("review_decide", ("post",), "review"),
    "review:remember-item": ("review_item", ("post",), "item"),
    "review:remember-item-file": ("review_item", ("get",), "item"),
}
# The admin's own pages: name → (family, how its path is filled).
ADMIN_SITE_SURFACES: dict[str, tuple[str, str]] = {
    "admin:index": ("admin_home", "none"),
    "admin:login": ("public", "none"),
    "admin:logout": ("logout", "none"),
    "admin:password_change": ("admin_home", "none"),
    "admin:password_change_done": ("admin_home", "none"),
    "admin:jsi18n": ("admin_home", "none"),
    "admin:autocomplete": ("admin_autocomplete", "autocomplete"),
    "admin:view_on_site": ("view_on_site", "view_on_site"),
    "admin:app_list": ("admin_app", "app_list"),
}
# Every registered ModelAdmin: model label → family. Its URLs are admin:<app>_<model>_<op>.
ADMIN_MODELS: dict[str, str] = {
    # Domain rows: seen and decided in the domains one reviews.
    "memory.fact": "m_domain",
    "memory.candidate": "m_domain",
    "memory.policy": "m_domain",
    "memory.conflict": "m_domain",
    "memory.factmention": "m_domain",
    "memory.replay": "m_domain",
    "memory.promotiondecision": "m_domain",
    "memory.episodefact": "m_domain",
    "memory.exposure": "m_domain",
    # Workspace rows: seen (and, where the admin allows it, changed) by its members.
    "memory.observation": "m_workspace",
    "memory.workingmemory": "m_workspace",
    "memory.hotmemory": "m_workspace",  # workspace-level in memory.access.SCOPES, its domain a hint
    "memory.episode": "m_workspace",
    "memory.job": "m_workspace",
    "memory.memoryrun": "m_workspace",
    "memory.bankitem": "m_workspace",
    "memory.intervention": "m_workspace",
    "memory.webhookdelivery": "m_workspace",
    # Rights: seen by members, changed by the workspace's admins only.
    "memory.workspace": "m_administered",
    "memory.workspacemembership": "m_administered",
    "memory.repo": "m_administered",
    "memory.role": "m_administered",
    "memory.memorydomain": "m_administered",
    "memory.accessgrant": "m_administered",
    "memory.agent": "m_administered",
    "memory.webhooksubscription": "m_administered",
    "review.layermapping": "m_administered",
    # The audit log: per domain (an event of no domain is workspace-level).
    "memory.auditevent": "m_audit",
    "review.rememberreview": "m_review",
    "review.reviewitem": "m_review_item",
    "memory.decayprofile": "m_global",
    "auth.user": "m_user",
    "auth.group": "m_group",
}
ADMIN_OPS = {  # op → (write?, methods)
    "changelist": (False, ("get",)),
    "history": (False, ("get",)),
    "change": (False, ("get", "post")),  # a GET reads (read-only for who may only view); the POST writes
    "add": (True, ("get",)),
    "delete": (True, ("get", "post")),
    "password_change": (True, ("get", "post")),
    "permissions": (True, ("get",)),
    "permissions_manage_user": (True, ("get", "post")),
    "permissions_manage_group": (True, ("get", "post")),
    "legacy": (False, ("get",)),  # /admin/<app>/<model>/<id>/: a redirect to the change page
}
API_PUBLIC = {"api-schema", "api-docs"}
API_PEOPLE = {"api-admin-erasure-preview", "api-admin-erasures"}
INFRA = {"healthz": "healthz", "metrics": "metrics"}
# Patterns without a name: the catch-alls answering unknown paths, and the admin's old
# `<model>/<id>/` addresses, which redirect to the change page (classified as its model's).
UNNAMED = {"/admin/(?P<url>.*)$": "/admin/no-such-page/", "/api/v1/^.*$": "/api/v1/no-such-endpoint/"}
LEGACY_ADMIN = re.compile(r"^/admin/(?P<app>\w+)/(?P<model>\w+)/<path:object_id>/$")


@dataclass(frozen=True)
class Surface:
    name: str
    raw: str
    kwargs: tuple[str, ...]
    family: str
    methods: tuple[str, ...]
    filler: str
    op: str = ""  # the admin's operation on a model
    model: str = ""  # its model label


def _admin_model_op(name: str) -> tuple[str, str] | None:
    """`admin:memory_fact_change` → ("memory.fact", "change")."""
    short = name.removeprefix("admin:")
    for model in admin.site._registry:
        prefix = f"{model._meta.app_label}_{model._meta.model_name}_"
        if short.startswith(prefix):
            return model._meta.label_lower, short.removeprefix(prefix)
    return None


def classify(name: str, raw: str, kwargs: tuple[str, ...]) -> Surface | None:
    if name in REVIEW_SURFACES:
        family, methods, filler = REVIEW_SURFACES[name]
        return Surface(name, raw, kwargs, family, methods, filler)
    if name in ADMIN_SITE_SURFACES:
        family, filler = ADMIN_SITE_SURFACES[name]
        return Surface(name, raw, kwargs, family, ("get",), filler)
    if name.startswith("admin:"):
        found = _admin_model_op(name)
        if found is None or found[0] not in ADMIN_MODELS or found[1] not in ADMIN_OPS:
            return None
        model, op = found
        return Surface(name, raw, kwargs, ADMIN_MODELS[model], ADMIN_OPS[op][1], "admin", op, model)
    if name.startswith("api-"):
        family = "api_public" if name in API_PUBLIC else "api_people" if name in API_PEOPLE else "api_agent"
        return Surface(name, raw, kwargs, family, (), "api")
    if name in INFRA:
        return Surface(name, raw, kwargs, INFRA[name], ("get",), "none")
    return None


def named_patterns() -> list[tuple[str, str, tuple[str, ...]]]:
    return [(name, raw, _kwargs_of(p)) for raw, name, p in _walk(get_resolver().url_patterns, "/", "")]


def unnamed_patterns(patterns: list[Any] | None = None, prefix: str = "/") -> Iterator[str]:
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            yield from unnamed_patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif not entry.name:
            yield prefix + str(entry.pattern)


def classify_unnamed(raw: str) -> Surface | None:
    if raw in UNNAMED:
        return Surface(f"(unnamed) {raw}", UNNAMED[raw], (), "catch_all", ("get",), "none")
    legacy = LEGACY_ADMIN.match(raw)
    label = f"{legacy['app']}.{legacy['model']}" if legacy else ""
    if label not in ADMIN_MODELS:
        return None
    return Surface(f"(unnamed) {raw}", raw, ("object_id",), "admin_legacy", ("get",), "admin", "legacy", label)


def surfaces() -> list[Surface]:
    found = [classify(*pattern) for pattern in named_patterns()]
    found += [classify_unnamed(raw) for raw in unnamed_patterns()]
    return [s for s in found if s is not None]
