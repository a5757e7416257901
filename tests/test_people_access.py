"""People's access, decided by one rule (memory.access) on every surface (issue 16).

A persona × surface × action matrix: superuser, workspace admin, domain reviewer (guardian
`review_domain` on `architecture` and `conventions`), member without domain permissions, member of
another workspace — over the admin (changelists, change views, the approve action, grants and
memberships), the queue, remember reviews, the memory browser and the grants matrix. Every check
asserts allowed or refused (404 where the object must not be known, 403 where the surface is
known but forbidden), and every persona is checked on every surface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from guardian.shortcuts import assign_perm

from memory import access
from memory.actors import Actor
from memory.models import AccessGrant, AuditEvent, Candidate, Fact, Policy, WorkspaceMembership
from review.models import RememberReview, ReviewItem
from review.services import submit_review
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
from tests.review.samples import ARCH_NOTE, FILES, KNOWLEDGE_NOTE, OUTPUT, PROFILE_NOTE

PERSONAS = ("superuser", "workspace_admin", "domain_reviewer", "member", "other_workspace")
SURFACES = (
    "admin changelists",
    "admin change views",
    "admin approve action",
    "admin grants/memberships",
    "queue",
    "remember reviews",
    "memory browser",
    "grants matrix",
)
REFUSED_UNKNOWN = (302, 404)  # the admin redirects an unknown object to its index; pages 404


@dataclass
class Scene:
    fact_in: Fact
    fact_out: Fact
    cand_in: Candidate
    cand_out: Candidate
    policy_in: Policy
    policy_out: Policy
    grant: AccessGrant
    review: RememberReview
    users: dict[str, Any]


def _admin_model_perms(user: Any) -> None:
    """The issue's staff accounts: every model permission of Engram's apps (so only the rule
    decides what they reach)."""
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=["memory", "agents", "review"]))


@pytest.fixture
def scene(db) -> Scene:
    acme = WorkspaceFactory(slug="acme", name="Acme")
    globex = WorkspaceFactory(slug="globex", name="Globex")
    repo = RepoFactory(workspace=acme, slug="web")
    arch = DomainFactory(workspace=acme, name="architecture")
    conv = DomainFactory(workspace=acme, name="conventions")
    incidents = DomainFactory(workspace=acme, name="incidents")
    secret = DomainFactory(workspace=acme, name="secret")
    DomainFactory(workspace=acme, repo=repo, name="context")
    coder_role = RoleFactory(workspace=acme, name="coder")
    coder = AgentFactory(workspace=acme, role=coder_role, name="coder-a")
    foreign_role = RoleFactory(workspace=globex, name="coder")
    AgentFactory(workspace=globex, role=foreign_role, name="intruder")
    FactFactory(domain=DomainFactory(workspace=globex, name="architecture"), content="Globex private fact.")

    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    wsadmin = UserFactory(username="wsadmin", is_staff=True)
    MembershipFactory(user=wsadmin, workspace=acme, is_admin=True)
    reviewer = UserFactory(username="domrev", is_staff=True)
    MembershipFactory(user=reviewer, workspace=acme)
    assign_perm("memory.review_domain", reviewer, arch)
    assign_perm("memory.review_domain", reviewer, conv)
    member = UserFactory(username="member", is_staff=True)
    MembershipFactory(user=member, workspace=acme)
    other = UserFactory(username="globexer", is_staff=True)
    MembershipFactory(user=other, workspace=globex, is_admin=True)
    for user in (wsadmin, reviewer, member, other):
        _admin_model_perms(user)

    return Scene(
        fact_in=FactFactory(domain=arch, content="Architecture fact in the reviewer's domain."),
        fact_out=FactFactory(domain=incidents, content="Incidents fact outside the reviewer's domains."),
        cand_in=CandidateFactory(domain=arch, proposed_memory="Candidate in architecture."),
        cand_out=CandidateFactory(domain=incidents, proposed_memory="Candidate in incidents."),
        policy_in=PolicyFactory(domain=arch, rule="Policy in architecture."),
        policy_out=PolicyFactory(domain=incidents, rule="Policy in incidents."),
        grant=GrantFactory(role=coder_role, domain=secret, level="none"),
        review=submit_review(agent=coder, session_id="turn-1", output=OUTPUT, files=FILES, repo="web"),
        users={
            "superuser": root,
            "workspace_admin": wsadmin,
            "domain_reviewer": reviewer,
            "member": member,
            "other_workspace": other,
        },
    )


class Checker:
    def __init__(self, persona: str) -> None:
        self.persona = persona
        self.surfaces: set[str] = set()

    def check(self, surface: str, expect_allowed: bool, actual_allowed: bool, detail: str = "") -> None:
        assert surface in SURFACES, surface
        self.surfaces.add(surface)
        assert actual_allowed == expect_allowed, f"{self.persona} · {surface} · {detail}"


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _cl(model: type) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def _change(obj: Any) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


@pytest.mark.django_db
@pytest.mark.parametrize("persona", PERSONAS)
def test_people_access_matrix(persona: str, scene: Scene) -> None:
    user = scene.users[persona]
    client = _client(user)
    c = Checker(persona)
    everything = persona in ("superuser", "workspace_admin")
    decides_in = everything or persona == "domain_reviewer"
    acme_member = persona != "other_workspace"

    # --- admin changelists: which rows each person sees --------------------------------------
    for model, row_in, row_out in (
        (Fact, scene.fact_in, scene.fact_out),
        (Candidate, scene.cand_in, scene.cand_out),
        (Policy, scene.policy_in, scene.policy_out),
    ):
        response = client.get(_cl(model))
        c.check("admin changelists", True, response.status_code == 200, f"{model.__name__} list")
        ids = {obj.pk for obj in response.context["cl"].result_list}
        c.check("admin changelists", decides_in, row_in.pk in ids, f"{model.__name__} in-domain row")
        c.check("admin changelists", everything, row_out.pk in ids, f"{model.__name__} out-of-domain row")
    for model, row in (
        (AccessGrant, scene.grant),
        (WorkspaceMembership, WorkspaceMembership.objects.filter(workspace__slug="acme").first()),
        (RememberReview, scene.review),
    ):
        response = client.get(_cl(model))
        ids = {obj.pk for obj in response.context["cl"].result_list}
        sees = everything if model is RememberReview else acme_member
        c.check("admin changelists", sees, row.pk in ids, f"{model.__name__} row")
    from memory.models import Agent

    response = client.get(_cl(Agent))
    names = {a.name for a in response.context["cl"].result_list}
    c.check("admin changelists", acme_member, "coder-a" in names, "agent of acme")
    c.check("admin changelists", persona in ("superuser", "other_workspace"), "intruder" in names, "agent of globex")

    # --- admin change views ------------------------------------------------------------------
    for obj in (scene.fact_in, scene.cand_in, scene.policy_in):
        status = client.get(_change(obj)).status_code
        c.check("admin change views", decides_in, status == 200, f"{obj._meta.model_name} in-domain")
        if not decides_in:
            assert status in REFUSED_UNKNOWN
    for obj in (scene.fact_out, scene.cand_out, scene.policy_out):  # e.g. /admin/memory/fact/18/change/
        status = client.get(_change(obj)).status_code
        c.check("admin change views", everything, status == 200, f"{obj._meta.model_name} out-of-domain")
        if not everything:
            assert status in REFUSED_UNKNOWN

    # --- the approve action, re-checked per row ----------------------------------------------
    for cand, may in ((scene.cand_in, decides_in), (scene.cand_out, everything)):
        client.post(_cl(Candidate), {"action": "approve_selected", "_selected_action": [cand.pk]})
        cand.refresh_from_db()
        c.check("admin approve action", may, cand.human_approved_by_id == user.pk, cand.domain.name)

    # --- grants and memberships through the admin --------------------------------------------
    response = client.post(_change(scene.grant), {"level": "read"})
    scene.grant.refresh_from_db()
    c.check("admin grants/memberships", everything, scene.grant.level == "read", "accessgrant level=read")
    if not everything:
        assert response.status_code == (403 if acme_member else 404)
    own = WorkspaceMembership.objects.filter(user=user).first()
    if own is not None:
        was_admin = own.is_admin
        client.post(_change(own), {"user": own.user_id, "workspace": own.workspace_id, "is_admin": "on"})
        own.refresh_from_db()
        # Raising one's own rights: only an admin already is one (and stays so).
        c.check("admin grants/memberships", was_admin, own.is_admin, "own membership is_admin=on")
    member_row = WorkspaceMembership.objects.get(user__username="member")
    client.post(
        _change(member_row), {"user": member_row.user_id, "workspace": member_row.workspace_id, "is_admin": "on"}
    )
    member_row.refresh_from_db()
    c.check(
        "admin grants/memberships",
        persona in ("superuser", "workspace_admin"),
        member_row.is_admin,
        "make member admin",
    )
    if member_row.is_admin:
        WorkspaceMembership.objects.filter(pk=member_row.pk).update(is_admin=False)
        assert AuditEvent.objects.filter(verb="membership.changed", target_id=member_row.pk).exists()

    # --- the queue ---------------------------------------------------------------------------
    scene.cand_in.refresh_from_db()
    queue = client.get("/review/")
    c.check("queue", True, queue.status_code == 200, "queue list")
    fresh = CandidateFactory(
        domain=scene.cand_out.domain, proposed_memory="Fresh incidents candidate.", requires_human_review=True
    )
    fresh_in = CandidateFactory(
        domain=scene.cand_in.domain, proposed_memory="Fresh architecture candidate.", requires_human_review=True
    )
    html = client.get("/review/").content.decode()
    c.check("queue", everything, f"/review/candidate/{fresh.pk}/" in html, "out-of-domain entry listed")
    c.check("queue", decides_in, f"/review/candidate/{fresh_in.pk}/" in html, "in-domain entry listed")
    c.check("queue", everything, f"/review/remember/{scene.review.pk}/" in html, "remember review listed")
    status = client.get(f"/review/candidate/{fresh.pk}/").status_code
    c.check("queue", everything, status == 200, "out-of-domain detail")
    if not everything:
        assert status == 404
    status = client.get(f"/review/candidate/{fresh_in.pk}/").status_code
    c.check("queue", decides_in, status == 200, "in-domain detail")
    status = client.post(f"/review/candidate/{fresh.pk}/decide/", {"action": "deny", "reason": "no"}).status_code
    fresh.refresh_from_db()
    c.check("queue", everything, fresh.is_decided, "decide out-of-domain")
    if not everything:
        assert status == 404

    # --- remember reviews (items into profile, repo:web/context, knowledge) --------------------
    status = client.get(f"/review/remember/{scene.review.pk}/").status_code
    c.check("remember reviews", everything, status == 200, "review page")
    if not everything:
        assert status == 404
    status = client.post(f"/review/remember/{scene.review.pk}/approve/").status_code
    scene.review.refresh_from_db()
    c.check("remember reviews", everything, scene.review.status == "approved", "approve")
    if not everything:
        assert status == 404

    # --- memory browser and grants matrix --------------------------------------------------------
    response = client.get("/memory/acme/")
    c.check("memory browser", acme_member, response.status_code == 200, "browser page")
    if acme_member:
        html = response.content.decode()
        c.check("memory browser", decides_in, "Architecture fact" in html, "in-domain fact")
        c.check("memory browser", everything, "Incidents fact" in html, "out-of-domain fact")
    else:
        assert response.status_code == 404
    status = client.get(f"/memory/acme/facts/{scene.fact_out.pk}/").status_code
    c.check("memory browser", everything, status == 200, "out-of-domain fact page")

    response = client.get("/access/acme/")
    c.check("grants matrix", acme_member, response.status_code == 200, "matrix page")
    status = client.post(
        "/access/acme/grant/", {"role": scene.grant.role_id, "domain": scene.grant.domain_id, "level": "write"}
    ).status_code
    scene.grant.refresh_from_db()
    c.check("grants matrix", everything, scene.grant.level == "write", "set a grant")
    if not everything:
        assert status == (403 if acme_member else 404)

    # No surface was left out for this persona (a check skipped for someone would pass unseen).
    assert c.surfaces == set(SURFACES)


# --- Remember reviews per domain -------------------------------------------------------------
def _items(review: RememberReview) -> dict[str, ReviewItem]:
    return {item.path: item for item in ReviewItem.objects.filter(review=review)}


@pytest.mark.django_db
def test_a_reviewer_of_one_target_domain_sees_and_decides_only_their_items(scene: Scene) -> None:
    reviewer = scene.users["domain_reviewer"]
    knowledge = DomainFactory(workspace=scene.fact_in.workspace, name="knowledge")
    assign_perm("memory.review_domain", reviewer, knowledge)
    client = _client(reviewer)
    url = f"/review/remember/{scene.review.pk}/"
    items = _items(scene.review)
    ours = items["billing/rules.py"]  # domain/knowledge → knowledge, theirs to decide
    others = [items["CONTRIBUTING.md"], items["docs/architecture.md"]]  # → profile, repo:web/context

    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="not-yours"' in html  # other items exist, named by their domains only
    assert f'name="item-{ours.pk}-selected"' in html and KNOWLEDGE_NOTE in html and ours.rationale in html
    for other in others:  # not listed: neither its path, notes, rationale nor file
        assert f"item-{other.pk}" not in html and other.path not in html
        assert other.suggested_memory_content not in html and other.rationale not in html
        assert other.file_text.splitlines()[-1] not in html
    assert ARCH_NOTE not in html and PROFILE_NOTE not in html

    # Their item's file: served. The others' files and edits: not found, as if they did not exist.
    assert client.get(f"{url}items/{ours.pk}/file?inline=1").content.decode() == ours.file_text
    for other in others:
        assert client.get(f"{url}items/{other.pk}/file?inline=1").status_code == 404
        assert client.get(f"{url}items/{other.pk}/file").status_code == 404
        assert client.post(f"{url}items/{other.pk}/", {f"item-{other.pk}-present": "1"}).status_code == 404
        before = other.updated_at
        other.refresh_from_db()
        assert other.selected and other.updated_at == before

    # Their own item: editable; moving it to a domain they may not decide: refused.
    ok = client.post(f"{url}items/{ours.pk}/", {f"item-{ours.pk}-present": "1", f"item-{ours.pk}-rationale": "x"})
    assert ok.status_code == 200
    moved = client.post(
        f"{url}items/{ours.pk}/",
        {f"item-{ours.pk}-present": "1", f"item-{ours.pk}-selected": "1", f"item-{ours.pk}-layer": "user/profile"},
    )
    assert moved.status_code == 403
    ours.refresh_from_db()
    assert ours.layer == "domain/knowledge"
    # Approving would write into profile and context: refused, the review waits.
    assert client.post(f"{url}approve/").status_code == 403
    assert client.post(f"{url}reject/").status_code == 403
    scene.review.refresh_from_db()
    assert scene.review.is_pending and not Fact.objects.filter(domain__name__in=["profile", "knowledge"]).exists()


@pytest.mark.django_db
def test_a_remember_review_with_no_item_of_the_reviewers_domains_is_not_found(scene: Scene) -> None:
    """The scene's reviewer decides architecture and conventions: none of the review's items."""
    client = _client(scene.users["domain_reviewer"])
    url = f"/review/remember/{scene.review.pk}/"
    assert client.get(url).status_code == 404
    for item in _items(scene.review).values():
        assert client.get(f"{url}items/{item.pk}/file?inline=1").status_code == 404
    # A workspace admin sees every item.
    html = _client(scene.users["workspace_admin"]).get(url).content.decode()
    assert all(note in html for note in (ARCH_NOTE, PROFILE_NOTE, KNOWLEDGE_NOTE))


@pytest.mark.django_db
def test_the_admin_shows_a_reviewer_only_the_review_items_of_their_domains(scene: Scene) -> None:
    reviewer = scene.users["domain_reviewer"]
    assign_perm("memory.review_domain", reviewer, DomainFactory(workspace=scene.fact_in.workspace, name="knowledge"))
    client = _client(reviewer)
    items = _items(scene.review)
    listed = {i.pk for i in client.get(_cl(ReviewItem)).context["cl"].result_list}
    assert listed == {items["billing/rules.py"].pk}
    assert client.get(_change(items["billing/rules.py"])).status_code == 200
    for path in ("CONTRIBUTING.md", "docs/architecture.md"):
        assert client.get(_change(items[path])).status_code == 404
    # The review itself: seen, without the raw output and resolution that name every item.
    review_page = client.get(_change(scene.review))
    assert review_page.status_code == 200
    html = review_page.content.decode()
    assert ARCH_NOTE not in html and PROFILE_NOTE not in html
    assert PROFILE_NOTE in _client(scene.users["workspace_admin"]).get(_change(scene.review)).content.decode()


# --- The audit log per domain ----------------------------------------------------------------
def _audit_events(scene: Scene) -> tuple[AuditEvent, AuditEvent, AuditEvent]:
    """A re-mention (with its text) and a reviewer's note in `incidents`, outside the domain
    reviewer's domains, and one in `architecture`, theirs."""
    from memory.services.facts import FactInput, propose_fact
    from memory.services.lifecycle import deprecate_fact

    coder = scene.review.agent
    assert coder is not None
    propose_fact(
        domain=scene.fact_out.domain,
        data=FactInput(topic=scene.fact_out.topic, content=scene.fact_out.content, memory_type="decision"),
        by=Actor.of_agent(coder),
    )
    out_mention = AuditEvent.objects.get(verb="fact.re_mentioned", target_id=scene.fact_out.pk)
    admin = Actor.of_user(scene.users["workspace_admin"])
    deprecate_fact(fact=scene.fact_out, by=admin, reason="Secret incident postmortem says otherwise.")
    out_note = AuditEvent.objects.get(verb="fact.deprecated", target_id=scene.fact_out.pk)
    deprecate_fact(fact=scene.fact_in, by=admin, reason="Architecture moved on.")
    in_note = AuditEvent.objects.get(verb="fact.deprecated", target_id=scene.fact_in.pk)
    return out_mention, out_note, in_note


@pytest.mark.django_db
def test_an_audit_event_knows_its_domain(scene: Scene) -> None:
    out_mention, out_note, in_note = _audit_events(scene)
    assert out_mention.domain_id == out_note.domain_id == scene.fact_out.domain_id
    assert in_note.domain_id == scene.fact_in.domain_id
    review_event = AuditEvent.objects.get(verb="remember_review.submitted", target_id=scene.review.pk)
    assert review_event.domain_id is None  # about every item of the review: no one domain
    domain_event = AuditEvent.objects.filter(verb="domain.created").first()
    assert domain_event is None or domain_event.domain_id == domain_event.target_id


@pytest.mark.django_db
def test_the_migration_gives_older_events_the_domain_of_their_target(scene: Scene) -> None:
    import importlib

    from django.apps import apps

    from memory.audit import record_event

    backfill = importlib.import_module("memory.migrations.0017_auditevent_domain").backfill
    by = Actor.system("tests")
    ws = scene.fact_in.workspace.pk
    old = {  # as written before events had a domain
        "fact": record_event(actor=by, verb="fact.x", workspace_id=ws, target=scene.fact_out, domain=None),
        "candidate": record_event(actor=by, verb="candidate.x", workspace_id=ws, target=scene.cand_in, domain=None),
        "domain": record_event(actor=by, verb="domain.x", workspace_id=ws, target=scene.fact_in.domain, domain=None),
        "review": record_event(actor=by, verb="review.x", workspace_id=ws, target=scene.review, domain=None),
    }
    backfill(apps, None)
    for event in old.values():
        event.refresh_from_db()
    assert old["fact"].domain_id == scene.fact_out.domain_id
    assert old["candidate"].domain_id == scene.cand_in.domain_id
    assert old["domain"].domain_id == scene.fact_in.domain_id
    assert old["review"].domain_id is None


@pytest.mark.django_db
def test_a_domain_reviewer_gets_only_the_audit_events_of_their_domains(scene: Scene) -> None:
    out_mention, out_note, in_note = _audit_events(scene)
    workspace_level = AuditEvent.objects.create(
        workspace=scene.fact_in.workspace, actor_label="t", verb="membership.changed", target_type="x"
    )
    reviewer = scene.users["domain_reviewer"]
    client = _client(reviewer)

    response = client.get(_cl(AuditEvent))
    assert response.status_code == 200
    listed = {e.pk for e in response.context["cl"].result_list}
    assert in_note.pk in listed and workspace_level.pk in listed
    assert out_mention.pk not in listed and out_note.pk not in listed
    html = response.content.decode()
    assert "Secret incident" not in html and scene.fact_out.content not in html
    # Searching by the hidden target's id finds nothing either.
    found = client.get(_cl(AuditEvent), {"q": str(scene.fact_out.pk)}).context["cl"].result_list
    assert {e.pk for e in found} & {out_mention.pk, out_note.pk} == set()

    assert client.get(_change(in_note)).status_code == 200
    for hidden in (out_mention, out_note):
        page = client.get(_change(hidden))
        assert page.status_code == 404
        assert "Secret incident" not in page.content.decode()
        assert not access.may(reviewer, "view", hidden)
    # The remember review's submission names every item's path: seen only by who sees them all.
    submitted = AuditEvent.objects.get(verb="remember_review.submitted", target_id=scene.review.pk)
    assert client.get(_change(submitted)).status_code == 404
    # Admins of the workspace and superusers see everything.
    for persona in ("workspace_admin", "superuser"):
        assert _client(scene.users[persona]).get(_change(out_note)).status_code == 200


@pytest.mark.django_db
def test_the_audit_log_links_only_to_pages_the_person_may_open(scene: Scene) -> None:
    """Every /admin/ link on the audit log's pages (list, each event) opens for the person who
    sees them: targets, actors and domains they may not open are plain text."""
    import re

    _audit_events(scene)
    for persona in ("domain_reviewer", "member", "workspace_admin"):
        client = _client(scene.users[persona])
        pages = [_cl(AuditEvent)]
        listed = client.get(pages[0]).context["cl"].result_list
        pages += [_change(event) for event in listed]
        links: set[str] = set()
        for page in pages:
            html = client.get(page).content.decode()
            links |= {href for href in re.findall(r'href="(/admin/[^"?#]*)', html)}
        assert links, persona
        bounced = {link: client.get(link).status_code for link in sorted(links)}
        bounced = {link: status for link, status in bounced.items() if status != 200}
        assert not bounced, f"{persona}: {bounced}"


@pytest.mark.django_db
def test_exposures_and_runs_follow_the_one_rule(scene: Scene) -> None:
    from memory.models import Exposure, MemoryRun
    from memory.selectors_runs import runs_for_user

    ws = scene.fact_in.workspace
    seen = Exposure.objects.create(workspace=ws, surface="search", fact_id=scene.fact_in.pk)
    hidden = Exposure.objects.create(workspace=ws, surface="search", fact_id=scene.fact_out.pk)
    erased = Exposure.objects.create(workspace=ws, surface="search", fact_id=10**9)
    reviewer, admin = scene.users["domain_reviewer"], scene.users["workspace_admin"]
    mine = set(access.restrict(Exposure.objects.all(), reviewer).values_list("pk", flat=True))
    assert mine == {seen.pk}
    everything = set(access.restrict(Exposure.objects.all(), admin).values_list("pk", flat=True))
    assert everything == {seen.pk, hidden.pk, erased.pk}
    assert _client(reviewer).get(_change(hidden)).status_code == 404

    coder = scene.review.agent
    run = MemoryRun.objects.create(workspace=ws, agent=coder, task="t")
    assert list(runs_for_user(scene.users["member"])) == [run]
    assert list(runs_for_user(scene.users["other_workspace"])) == []
    reviewer.is_active = False
    assert list(runs_for_user(reviewer)) == []  # for_user skipped is_active; the rule does not


@pytest.mark.django_db
def test_the_one_rule_answers_per_action(scene: Scene) -> None:
    users = scene.users
    assert access.may(users["domain_reviewer"], "decide", scene.fact_in)
    assert not access.may(users["domain_reviewer"], "decide", scene.fact_out)
    assert not access.may(users["domain_reviewer"], "administer", scene.grant)
    assert access.may(users["workspace_admin"], "administer", scene.grant)
    assert not access.may(users["other_workspace"], "view", scene.fact_in)
    assert list(access.domains(users["member"], "decide")) == []
    assert access.workspaces(users["member"], "view").filter(slug="acme").exists()
    assert not access.workspaces(users["member"], "administer").exists()
    with pytest.raises(ValueError):
        access.restrict(Fact.objects.all(), users["superuser"], "destroy")


@pytest.mark.django_db
def test_the_action_refuses_a_candidate_of_a_domain_outside_the_reviewers_rights_at_the_service(scene: Scene) -> None:
    from memory.errors import InsufficientPermission
    from memory.services import promotion

    with pytest.raises(InsufficientPermission):
        promotion.approve_candidate(candidate=scene.cand_out, by=Actor.of_user(scene.users["domain_reviewer"]))


@pytest.mark.django_db
def test_a_workspace_admin_cannot_make_themselves_superuser_or_staff(scene: Scene) -> None:
    wsadmin = scene.users["workspace_admin"]
    wsadmin.user_permissions.add(*Permission.objects.filter(content_type__app_label="auth"))
    client = _client(wsadmin)
    url = reverse("admin:auth_user_change", args=[wsadmin.pk])
    data = {
        "username": wsadmin.username,
        "is_active": "on",
        "is_staff": "on",
        "is_superuser": "on",
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
    }
    response = client.post(url, data)
    assert response.status_code == 302  # saved: the rights fields were read-only and ignored
    wsadmin.refresh_from_db()
    assert not wsadmin.is_superuser


# --- No demo credentials in production -------------------------------------------------------
@pytest.mark.django_db
def test_serve_prod_check_refuses_while_an_account_has_the_demo_password(django_user_model) -> None:
    admin = django_user_model.objects.create_superuser("admin", "a@example.com", "engram-demo")
    with pytest.raises(CommandError, match="changepassword admin"):
        call_command("check_demo_credentials")
    admin.set_password("a much better passphrase 42")
    admin.save()
    call_command("check_demo_credentials")


def test_granting_a_reviewer_a_domain_is_for_workspace_admins_and_is_audited(scene: Scene) -> None:
    from memory.models import AuditEvent

    domain = scene.fact_in.domain
    target = scene.users["member"]
    url = reverse("admin:memory_memorydomain_permissions_manage_user", args=[domain.pk, target.pk])
    body = {"permissions": ["review_domain"]}

    refused = _client(scene.users["domain_reviewer"]).post(url, body)
    assert refused.status_code in (403, 404)
    assert not target.has_perm("memory.review_domain", domain)

    before = AuditEvent.objects.filter(verb="reviewer_permission.changed").count()
    granted = _client(scene.users["workspace_admin"]).post(url, body)
    assert granted.status_code in (301, 302)
    events = AuditEvent.objects.filter(verb="reviewer_permission.changed")
    assert events.count() == before + 1
    assert events.latest("pk").detail == {"user": str(target.pk), "permissions": ["review_domain"]}
