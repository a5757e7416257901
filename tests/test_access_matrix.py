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

Run with `-s` to print the cells per persona and outcome.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django.test import Client, RequestFactory
from django.urls import URLResolver, get_resolver, reverse
from django.utils import timezone
from guardian.models import GroupObjectPermission, UserObjectPermission
from guardian.shortcuts import assign_perm
from rest_framework.settings import api_settings

from memory import inference
from memory.actors import Actor
from memory.audit import record_event
from memory.models import (
    BankItem,
    Conflict,
    DecayProfile,
    Episode,
    EpisodeFact,
    Exposure,
    FactMention,
    HotMemory,
    Intervention,
    Job,
    MemoryRun,
    Observation,
    PromotionDecision,
    Replay,
    WebhookDelivery,
    WebhookSubscription,
    WorkingMemory,
    WorkspaceMembership,
)
from review.models import LayerMapping, RememberReview, ReviewItem
from tests.factories import (
    AgentFactory,
    CandidateFactory,
    DomainFactory,
    FactFactory,
    GrantFactory,
    MembershipFactory,
    PolicyFactory,
    RepoFactory,
    RoleFactory,
    UserFactory,
    WorkspaceFactory,
)
from tests.test_hostile_input import _kwargs_of, _walk, api_routes
from tests.test_hostile_input import fast_password_hashing as fast_password_hashing  # the autouse fixture

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


# --- The world ---------------------------------------------------------------------------------
@dataclass
class Tenant:
    workspace: Any
    role: Any
    domain: Any  # a domain of it, for a grant cell
    fact: Any  # a fact of it, to erase


@dataclass
class Matrix:
    users: dict[str, Any]  # persona → user (anonymous: None)
    targets: dict[str, Any]  # super / admin / peer / stranger → user
    rows: dict[str, dict[str, Any]]  # key (a model label or a queue kind) → scope → row
    workspaces: dict[str, Tenant]  # ws / foreign
    group: Any
    clients: dict[str, Client] = field(default_factory=dict, repr=False)
    tokens: dict[str, str] = field(default_factory=dict, repr=False)
    root_forms: dict[str, str] = field(default_factory=dict, repr=False)
    rights: dict[str, tuple[frozenset[str], ...]] = field(default_factory=dict, repr=False)


def _scoped_rows(scope: str, domain: Any, agent: Any, rows: dict[str, dict[str, Any]], root: Any) -> None:
    """One domain's rows, each holding the scope's marker."""
    mark, ws, now = MARKS[scope], domain.workspace, timezone.now()

    def put(key: str, row: Any) -> Any:
        rows.setdefault(key, {})[scope] = row
        return row

    fact = put("memory.fact", FactFactory(domain=domain, content=f"{mark} deploys run on Tuesdays.", topic="deploys"))
    put("challenged", FactFactory(domain=domain, content=f"{mark} stale", status="challenged", status_changed_at=now))
    winner = FactFactory(domain=domain, topic="pair", content=f"{mark} the agent's words", created_by_agent=agent)
    loser = FactFactory(
        domain=domain,
        topic="pair",
        content=f"{mark} a person's words",
        veracity="human_stated",
        confidence=1.0,
        superseded_by=winner,
        superseded_at=now,
    )
    put(
        "conflict",
        Conflict.objects.create(
            workspace=ws,
            domain=domain,
            topic="pair",
            existing=loser,
            proposed=winner,
            winner=winner,
            loser=loser,
            rule="recency",
            similarity=0.9,
        ),
    )
    put("memory.conflict", rows["conflict"][scope])
    older = FactFactory(domain=domain, topic="maybe", content=f"{mark} billing runs nightly")
    newer = FactFactory(domain=domain, topic="maybe", content=f"{mark} billing runs hourly", created_by_agent=agent)
    put(
        "possible",
        Conflict.objects.create(
            workspace=ws,
            domain=domain,
            topic="maybe",
            existing=older,
            proposed=newer,
            status="open",
            resolution="",
            rule="",
            similarity=0.8,
            reason=f"{mark} unsure",
        ),
    )
    candidate = put(
        "memory.candidate",
        CandidateFactory(
            domain=domain, proposed_memory=f"{mark} update the contract", requires_human_review=True, topic="contract"
        ),
    )
    decided = CandidateFactory(domain=domain, proposed_memory=f"{mark} decided rule", topic="decided")
    put(
        "memory.promotiondecision",
        PromotionDecision.objects.create(
            candidate=decided, decision="refused", write=True, decided_by_label="agent", scorecard={}, reason=mark
        ),
    )
    put("memory.replay", Replay.objects.create(candidate=candidate, probe="probe", passed=True, recorded_by_label=mark))
    put("memory.policy", PolicyFactory(domain=domain, rule=f"{mark} run the tests before merging"))
    put(
        "memory.factmention",
        FactMention.objects.create(fact=fact, text=f"{mark} said again", veracity="agent_inferred"),
    )
    episode = Episode.objects.create(workspace=ws, agent=agent, kind="dispatch", title="a dispatch")
    put("memory.episodefact", EpisodeFact.objects.create(episode=episode, fact=fact, relation="written"))
    put("memory.exposure", Exposure.objects.create(workspace=ws, agent=agent, surface="search", fact_id=fact.pk))
    put("memory.memorydomain", domain)
    event = record_event(
        actor=Actor.of_user(root),
        verb="fact.status_changed",
        workspace_id=ws.pk,
        target=fact,
        detail={"reason": f"{mark} audit detail"},
    )
    put("memory.auditevent", event)


def _workspace_rows(
    scope: str, ws: Any, agent: Any, membership: Any, rows: dict[str, dict[str, Any]], root: Any
) -> None:
    mark, now = MARKS[scope], timezone.now()

    def put(key: str, row: Any) -> Any:
        rows.setdefault(key, {})[scope] = row
        return row

    put("memory.workspace", ws)
    put("memory.workspacemembership", membership)
    put("memory.agent", agent)
    put("memory.role", agent.role)
    put("memory.repo", RepoFactory(workspace=ws, slug="web"))
    put("memory.observation", Observation.objects.create(workspace=ws, agent=agent, text=f"{mark} saw a slow build"))
    put("memory.workingmemory", WorkingMemory.objects.create(agent=agent, notes=f"{mark} notes"))
    put("memory.hotmemory", HotMemory.objects.create(workspace=ws, agent=agent, session_id="s1", content=f"{mark} hot"))
    episode = put("memory.episode", Episode.objects.create(workspace=ws, agent=agent, kind="session", title=mark))
    put(
        "memory.job",
        Job.objects.create(
            workspace=ws,
            kind="consolidate",
            scope=f"agent:{agent.pk}:session:s1",
            task_id=f"job-{scope}",
            requested_by_agent=agent,
            state="done",
            finished_at=now,
            expires_at=now,
        ),
    )
    run = put(
        "memory.memoryrun", MemoryRun.objects.create(workspace=ws, agent=agent, task=f"{mark} task", episode=episode)
    )
    put("memory.bankitem", BankItem.objects.create(run=run, kind="knowledge", item_id="k1", content=f"{mark} knows"))
    put("memory.intervention", Intervention.objects.create(run=run, step=1, reminder=None, rationale=mark))
    event = record_event(actor=Actor.of_user(root), verb="workspace.noted", workspace_id=ws.pk, detail={"note": mark})
    if scope == "ws":  # a workspace-level event (the foreign workspace has its domain's already)
        rows["memory.auditevent"]["ws"] = event


def _review(ws: Any, agent: Any, session: str, items: list[tuple[str, str]]) -> RememberReview:
    review = RememberReview.objects.create(workspace=ws, agent=agent, session_id=session, raw_output="{}")
    for order, (layer, mark) in enumerate(items):
        ReviewItem.objects.create(
            review=review,
            order=order,
            path=f"docs/{session}-{order}.md",
            recommended_layer=layer,
            rationale=f"{mark} rationale",
            suggested_memory_content=f"{mark} content",
            file_text=f"{mark} file text",
            selected=True,
        )
    return review


@pytest.fixture
def matrix(db, settings) -> Matrix:
    # A webhook's address is checked when its form is saved: a loopback address, no name to resolve
    # (nothing is sent: the deliveries a cell writes are rolled back before any commit).
    settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE = True
    acme = WorkspaceFactory(slug="acme", name="Acme")
    globex = WorkspaceFactory(slug="globex", name="Globex")
    architecture = DomainFactory(workspace=acme, name="architecture")
    conventions = DomainFactory(workspace=acme, name="conventions")
    incidents = DomainFactory(workspace=acme, name="incidents")
    theirs = DomainFactory(workspace=globex, name="architecture")
    coder = AgentFactory(workspace=acme, role=RoleFactory(workspace=acme, name="coder"), name="coder-a")
    intruder = AgentFactory(workspace=globex, role=RoleFactory(workspace=globex, name="coder"), name="intruder")

    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    users = {
        "anonymous": None,
        "nomember": UserFactory(username="nomember", is_staff=False),
        "staff_norights": UserFactory(username="staffer", is_staff=True),
        "reviewer": UserFactory(username="reviewer", is_staff=False),
        "staff_reviewer": UserFactory(username="staffrev", is_staff=True),
        "superuser": root,
    }
    MembershipFactory(user=users["reviewer"], workspace=acme)
    assign_perm("memory.review_domain", users["reviewer"], architecture)
    assign_perm("memory.review_domain", users["reviewer"], conventions)
    MembershipFactory(user=users["staff_reviewer"], workspace=acme)
    assign_perm("memory.review_domain", users["staff_reviewer"], architecture)
    users["staff_reviewer"].user_permissions.add(*Permission.objects.all())  # every model permission
    group = Group.objects.create(name="reviewers")
    users["staff_reviewer"].groups.add(group)
    targets = {
        "super": UserFactory(username="root2", is_staff=True, is_superuser=True),
        "admin": UserFactory(username="wsadmin", is_staff=True),
        "peer": UserFactory(username="peer", is_staff=False),
        "stranger": UserFactory(username="stranger", is_staff=True),
    }
    MembershipFactory(user=targets["admin"], workspace=acme, is_admin=True)
    peer_membership = MembershipFactory(user=targets["peer"], workspace=acme)
    stranger_membership = MembershipFactory(user=targets["stranger"], workspace=globex, is_admin=True)

    rows: dict[str, dict[str, Any]] = {}
    for scope, domain, agent in (("in", architecture, coder), ("out", incidents, coder), ("foreign", theirs, intruder)):
        _scoped_rows(scope, domain, agent, rows, root)
    _workspace_rows("ws", acme, coder, peer_membership, rows, root)
    _workspace_rows("foreign", globex, intruder, stranger_membership, rows, root)
    rows["memory.accessgrant"] = {
        "ws": GrantFactory(role=coder.role, domain=incidents, level="read"),
        "foreign": GrantFactory(role=intruder.role, domain=theirs, level="read"),
    }
    # Remember reviews: domain/knowledge lands in architecture, user/profile in incidents.
    for ws, layer, name in ((acme, "domain/knowledge", "architecture"), (acme, "user/profile", "incidents")):
        LayerMapping.objects.create(workspace=ws, layer=layer, domain_name=name)
    foreign_mapping = LayerMapping.objects.create(
        workspace=globex, layer="domain/knowledge", domain_name="architecture"
    )
    rows["review.layermapping"] = {"ws": LayerMapping.objects.get(workspace=acme, layer="user/profile")}
    rows["review.layermapping"]["foreign"] = foreign_mapping
    knowledge, profile = "domain/knowledge", "user/profile"
    mixed = _review(acme, coder, "mixed", [(knowledge, MARKS["in"]), (profile, MARKS["out"])])
    rows["review.rememberreview"] = {
        "in": _review(acme, coder, "in", [(knowledge, MARKS["in"])]),
        "mixed": mixed,
        "out": _review(acme, coder, "out", [(profile, MARKS["out"])]),
        "foreign": _review(globex, intruder, "foreign", [(knowledge, MARKS["foreign"])]),
    }
    rows["review.reviewitem"] = {
        "in": mixed.items.get(order=0),
        "out": mixed.items.get(order=1),
        "foreign": rows["review.rememberreview"]["foreign"].items.get(),
    }
    rows["memory.decayprofile"] = {"global": DecayProfile.objects.first() or _decay_profile()}
    rows["auth.group"] = {"global": group}
    # Webhooks last: a subscription makes every later audit event a delivery.
    for scope, ws in (("ws", acme), ("foreign", globex)):
        hook = WebhookSubscription.objects.create(
            workspace=ws, url=f"http://127.0.0.1:9/{ws.slug}", events=["fact.superseded"], description="a hook"
        )
        rows.setdefault("memory.webhooksubscription", {})[scope] = hook
        rows.setdefault("memory.webhookdelivery", {})[scope] = WebhookDelivery.objects.create(
            uuid=uuid.uuid4(),
            workspace=ws,
            subscription=hook,
            event="workspace.noted",
            event_id=uuid.uuid4(),
            payload={"note": MARKS[scope]},
        )
    workspaces = {
        "ws": Tenant(acme, coder.role, architecture, rows["memory.fact"]["in"]),
        "foreign": Tenant(globex, intruder.role, theirs, rows["memory.fact"]["foreign"]),
    }
    return Matrix(users=users, targets=targets, rows=rows, workspaces=workspaces, group=group)


def _decay_profile() -> DecayProfile:
    return DecayProfile.objects.create(memory_type="decision", scale_days=365, shape=1.0)


# --- Filling the paths -------------------------------------------------------------------------
@dataclass
class Cell:
    surface: Surface
    scope: str
    method: str
    path: str
    expect: str
    data: Any = None  # a form (dict) or, for the API, a JSON body
    json: bool = False


def _persona_user(m: Matrix, persona: str) -> Any:
    return m.users[persona] or m.targets["peer"]


def _user_scopes(m: Matrix, persona: str) -> dict[str, Any]:
    scopes = dict(m.targets)
    if m.users[persona] is not None:
        scopes["self"] = m.users[persona]
    return scopes


def fillings(m: Matrix, s: Surface, persona: str) -> list[tuple[str, dict[str, Any], Any]]:
    """(scope, URL kwargs, the row) for each way this surface's path is filled."""
    rows = m.rows
    if s.filler == "none":
        return [("none", {}, None)]
    if s.filler == "slug":
        return [(scope, {"slug": w.workspace.slug}, w) for scope, w in m.workspaces.items()]
    if s.filler == "queue":
        out = []
        for kind in ("candidate", "conflict", "possible", "challenged"):
            key = "memory.candidate" if kind == "candidate" else kind
            out += [(scope, {"kind": kind, "pk": row.pk}, row) for scope, row in rows[key].items()]
        return out
    if s.filler == "bulk":  # the candidate goes in the form, not the path
        return [(scope, {}, row) for scope, row in rows["memory.candidate"].items()]
    if s.filler == "candidate":
        return [(scope, {"pk": row.pk}, row) for scope, row in rows["memory.candidate"].items()]
    if s.filler in ("fact", "policy"):
        key, kwarg = ("memory.fact", "fact_id") if s.filler == "fact" else ("memory.policy", "policy_id")
        out = [(scope, {"slug": row.workspace.slug, kwarg: row.pk}, row) for scope, row in rows[key].items()]
        foreign = rows[key]["foreign"]
        return [*out, ("cross", {"slug": "acme", kwarg: foreign.pk}, foreign)]
    if s.filler == "run":
        return [(scope, {"run_id": row.pk}, row) for scope, row in rows["memory.memoryrun"].items()]
    if s.filler == "review":
        return [(scope, {"review_id": row.pk}, row) for scope, row in rows["review.rememberreview"].items()]
    if s.filler == "item":
        items = rows["review.reviewitem"]
        out = [(scope, {"review_id": item.review_id, "item_id": item.pk}, item) for scope, item in items.items()]
        in_only = rows["review.rememberreview"]["in"]
        return [*out, ("cross", {"review_id": in_only.pk, "item_id": items["out"].pk}, items["out"])]
    if s.filler == "autocomplete":
        return [("none", {}, None)]
    if s.filler == "app_list":
        return [("none", {"app_label": label}, None) for label in ("auth", "memory", "review")]
    if s.filler == "view_on_site":
        content_type = ContentType.objects.get_for_model(rows["memory.fact"]["in"]).pk
        return [
            (scope, {"content_type_id": content_type, "object_id": row.pk}, row)
            for scope, row in rows["memory.fact"].items()
        ]
    if s.filler == "admin":
        return _admin_fillings(m, s, persona)
    if s.filler == "api":
        return _api_fillings(m, s)
    raise AssertionError(f"no filler {s.filler!r}")


def _admin_fillings(m: Matrix, s: Surface, persona: str) -> list[tuple[str, dict[str, Any], Any]]:
    if s.op in ("changelist", "add"):
        return [("none", {}, None)]
    if s.op.startswith("permissions"):
        extra: dict[str, Any] = {}
        if s.op == "permissions_manage_user":  # e.g. granting oneself review of another domain
            extra = {"user_id": _persona_user(m, persona).pk}
        elif s.op == "permissions_manage_group":
            extra = {"group_id": m.group.pk}
        return [(scope, {"object_pk": d.pk, **extra}, d) for scope, d in m.rows["memory.memorydomain"].items()]
    scoped = _user_scopes(m, persona) if s.model == "auth.user" else m.rows[s.model]
    kwarg = "id" if s.op == "password_change" else "object_id"  # legacy: object_id too
    return [(scope, {kwarg: row.pk}, row) for scope, row in scoped.items()]


def _api_fillings(m: Matrix, s: Surface) -> list[tuple[str, dict[str, Any], Any]]:
    rows = m.rows
    if "run_id" in s.kwargs:
        return [(scope, {"run_id": run.pk, "item_id": "k1"}, run) for scope, run in rows["memory.memoryrun"].items()]
    for kwarg, key in (
        ("fact_id", "memory.fact"),
        ("policy_id", "memory.policy"),
        ("candidate_pk", "memory.candidate"),
        ("review_id", "review.rememberreview"),
    ):
        if kwarg in s.kwargs:
            return [(scope, {kwarg: row.pk}, row) for scope, row in rows[key].items()]
    if s.family == "api_people":
        return [(scope, {}, w) for scope, w in m.workspaces.items()]
    return [("none", {}, None)]


def _path(s: Surface, kwargs: dict[str, Any]) -> str:
    if s.name.startswith("(unnamed)"):
        return s.raw.replace("<path:object_id>", str(kwargs.get("object_id", "")))
    if s.family.startswith("api"):
        template = s.raw
        for name, value in kwargs.items():
            for converter in ("int", "str"):
                template = template.replace(f"<{converter}:{name}>", str(value))
        return template
    path = reverse(s.name, kwargs=kwargs) if kwargs else reverse(s.name)
    if s.name == "admin:autocomplete":
        path += "?" + urlencode({"app_label": "memory", "model_name": "policy", "field_name": "domain", "term": ""})
    return path


# --- Bodies of the POSTs -------------------------------------------------------------------------
DECIDE = {
    "candidate": {"action": "deny", "reason": "not general enough"},
    "conflict": {"action": "keep"},
    "possible": {"action": "both_true", "reason": "both hold"},
    "challenged": {"action": "deprecate", "reason": "no longer true"},
}


def review_body(name: str, kwargs: dict[str, Any], row: Any) -> dict[str, Any]:
    if name == "review:queue-bulk":
        return {"action": "deny", "reason": "not general enough", "items": [f"candidate-{row.pk}"]}
    if name == "review:queue-decide":
        return DECIDE[kwargs["kind"]]
    if name == "review:grant-set":
        return {"role": row.role.pk, "domain": row.domain.pk, "level": "write"}
    if name == "review:erase":
        fact = row.fact.pk
        return {"kind": "ids", "ids": str(fact), "previewed": str(fact), "confirm": "yes", "reason": "asked to"}
    if name == "review:remember-item":
        return {f"item-{row.pk}-present": "1", f"item-{row.pk}-rationale": "edited rationale"}
    return {
        "review:candidate-diff": {"edited_text": "Update the contract artifact."},
        "review:candidate-complete": {"applies_to": "web", "note": "scope added"},
        "review:fact-supersede": {"content": "Deploys run on Wednesdays now.", "reason": "moved"},
        "review:policy-budget": {"policy_budget_chars": "1500"},
        "review:policy-action": {"action": "deactivate"},
        "review:decisions": {
            "title": "Weekly",
            "date": timezone.localdate().isoformat(),
            "decisions": "Ship on Fridays.",
        },
        "review:remember-note": {"reviewer_note": "looked at it"},
    }.get(name, {})


def api_body(s: Surface, row: Any) -> dict[str, Any]:
    if s.family != "api_people":
        return {}
    fact = row.fact.pk
    body: dict[str, Any] = {"workspace": row.workspace.slug, "selection": {"kind": "ids", "ids": [fact]}}
    if s.name == "api-admin-erasures":
        body |= {"reason": "asked to", "fact_ids": [fact]}
    return body


class _Forms(HTMLParser):
    """The fields of a page's forms as a browser would submit them (inputs, checked boxes, selected
    options, textareas), each form's fields in order: (name, value, type)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[dict[str, Any]] = []
        self._select: dict[str, Any] | None = None
        self._textarea: list[Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append({"attrs": a, "fields": []})
            return
        if not self.forms:
            return
        fields = self.forms[-1]["fields"]
        name = a.get("name", "")
        if tag == "input" and name:
            kind = a.get("type", "text").lower()
            if kind in ("submit", "button", "image", "reset", "file"):
                return
            if "RawIdAdminField" in a.get("class", ""):
                kind = "raw-id"  # a related row's id typed in: kept as it is
            checked = "checked" in a
            fields.append([name, a.get("value", "on") if kind in ("checkbox", "radio") else a.get("value", ""), kind])
            if kind in ("checkbox", "radio") and not checked:
                fields[-1][2] = f"unchecked-{kind}"
        elif tag == "select" and name:
            self._select = {"name": name, "multiple": "multiple" in a, "options": []}
            fields.append(["", "", "select", self._select])
        elif tag == "option" and self._select is not None:
            self._select["options"].append((a.get("value", ""), "selected" in a))
        elif tag == "textarea" and name:
            self._textarea = [name, "", "textarea"]
            fields.append(self._textarea)

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            self._textarea[1] = self._textarea[1].removeprefix("\n")  # as a browser reads it
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea[1] += data


def admin_form(html: str) -> list[tuple[str, str, str, list[str]]]:
    """The admin page's form (the change, password or delete form) as a browser submits it:
    (name, value, type, the select's options)."""
    parser = _Forms()
    parser.feed(html)
    forms = [f for f in parser.forms if f["attrs"].get("method", "").lower() == "post"]
    forms = [f for f in forms if not f["attrs"].get("action", "").endswith("logout/")]
    if not forms:
        return []
    submitted: list[tuple[str, str, str, list[str]]] = []
    for name, value, kind, *select in forms[-1]["fields"]:
        if kind.startswith("unchecked"):
            continue
        if kind == "select":
            options = [v for v, _ in select[0]["options"]]
            chosen = [v for v, selected in select[0]["options"] if selected]
            if not chosen and options and not select[0]["multiple"]:
                chosen = options[:1]  # a single select submits its first option
            submitted += [(select[0]["name"], v, "select", options) for v in chosen]
            continue
        submitted.append((name, value, kind, []))
    return submitted


def mutate(fields: list[tuple[str, str, str, list[str]]]) -> dict[str, list[str]]:
    """The form changed as an attacker would: the first text field edited (a username, a name, a
    slug, a rule); on a user's form `is_active` unticked and `is_superuser`, `is_staff` ticked
    (an attack on someone else, or a rise of one's own rights); with no text field, the first number raised, else the
    first select moved to another option — so a POST that is not refused changes a row."""
    data: dict[str, list[str]] = defaultdict(list)
    edited = False
    for name, value, kind, _ in fields:
        if name in ("csrfmiddlewaretoken", "is_active", "is_superuser", "is_staff"):
            continue
        textual = kind in ("text", "email", "textarea") and not name.endswith(("_0", "_1"))
        if not edited and textual and value.strip() and "date" not in name and not name.endswith("_at"):
            value, edited = (f"x{value}" if kind == "email" else f"{value.strip()}-x"), True
        data[name].append(value)
    if any(name == "is_active" for name, *_ in fields):  # a user's form: status and rights too
        data["is_superuser"], data["is_staff"] = ["on"], ["on"]
    for name, value, kind, _ in fields:
        if not edited and kind == "number" and value:
            data[name], edited = [str(float(value) + 1)], True
    if not edited:
        for name, value, kind, options in fields:
            others = [v for v in options if v and v != value]
            if kind == "select" and others and len(data[name]) == 1:
                data[name] = others[:1]
                break
    return data


def admin_body(m: Matrix, s: Surface, path: str, persona: str) -> dict[str, Any]:
    if persona not in STAFF:  # the admin sends them to its sign-in before it reads a form
        return {"post": "yes"}
    if s.op == "delete":
        return {"post": "yes"}
    if s.op.startswith("permissions_manage"):
        return {"permissions": ["review_domain"]}
    page = m.root_forms.get(path)
    if page is None:  # the form as the superuser's browser shows it
        response = _root_client(m).get(path)
        page = response.content.decode() if response.status_code == 200 else ""
        m.root_forms[path] = page
    fields = admin_form(page)
    if s.op == "password_change":
        data: dict[str, Any] = defaultdict(list)
        for name, value, _, _ in fields:
            data[name].append(value)
        data["password1"] = data["password2"] = ["An entirely new passphrase 42"]
        data.pop("csrfmiddlewaretoken", None)
        return dict(data)
    return dict(mutate(fields))


def _root_client(m: Matrix) -> Client:
    if "root-forms" not in m.clients:
        client = Client()
        client.force_login(m.users["superuser"])
        m.clients["root-forms"] = client
    return m.clients["root-forms"]


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
            path = _path(s, kwargs)
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
