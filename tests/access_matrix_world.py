"""The access matrix's world (tests/test_access_matrix.py): the `matrix` fixture's rows of every
scope, the ways a route's path is filled with them (`fillings`), and the bodies of the POSTs
(the review site's, the API's, and the admin forms an attacker edits: `mutate`)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from guardian.shortcuts import assign_perm

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
)
from review.models import LayerMapping, RememberReview, ReviewItem
from tests.access_matrix_rules import MARKS, STAFF, Surface
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


def filled_path(s: Surface, kwargs: dict[str, Any]) -> str:
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
