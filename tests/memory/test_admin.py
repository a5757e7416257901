"""The Django admin: every model is there, list pages stay flat, staff see only their workspaces,
and writes with rules (archiving, domains, grants, agent keys) go through the services."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import Model
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from guardian.shortcuts import assign_perm

from agents.services import create_agent
from memory.actors import Actor
from memory.models import (
    AccessGrant,
    Agent,
    AuditEvent,
    BankItem,
    Candidate,
    Conflict,
    DecayProfile,
    Episode,
    EpisodeFact,
    Exposure,
    Fact,
    FactMention,
    FactStatus,
    GrantLevel,
    HotMemory,
    Intervention,
    Job,
    MemoryDomain,
    MemoryRun,
    Observation,
    Policy,
    PromotionDecision,
    Replay,
    Repo,
    Role,
    WebhookDelivery,
    WebhookSubscription,
    WorkingMemory,
    Workspace,
    WorkspaceMembership,
    hash_key,
)
from memory.services.tenancy import create_domain, get_or_create_repo, get_or_create_role, get_or_create_workspace

# Session, user, the person's memberships and domains (read once a request: memory.access.remembering),
# counts, rows and the sidebar filters: a page that grows with its rows is a bug.
MAX_CHANGELIST_QUERIES = 14

ADMIN_MODELS: list[type[Model]] = [
    *apps.get_app_config("memory").get_models(),
    *apps.get_app_config("agents").get_models(),
]

SYSTEM = Actor.system("tests")


# --- Local helpers (no shared factories on purpose: this file stands alone) ----------------
@dataclass
class Tenant:
    workspace: Workspace
    repo: Repo
    roles: list[Role] = field(default_factory=list)
    domains: list[MemoryDomain] = field(default_factory=list)
    agents: list[Agent] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)


def make_fact(tenant: Tenant, domain: MemoryDomain, topic: str, content: str, **extra: object) -> Fact:
    return Fact.objects.create(
        workspace=tenant.workspace,
        domain=domain,
        topic=topic,
        content=content,
        confidence=0.7,
        memory_type="decision",
        created_by_agent=tenant.agents[0] if tenant.agents else None,
        **extra,
    )


def populate(slug: str, n: int) -> Tenant:
    """A workspace with `n` rows of every kind, created the way the site creates them."""
    ws = get_or_create_workspace(slug=slug, name=slug.title(), by=SYSTEM)
    tenant = Tenant(workspace=ws, repo=get_or_create_repo(workspace=ws, slug=f"{slug}-web", by=SYSTEM))
    tenant.roles = [get_or_create_role(workspace=ws, name=f"role{i}", by=SYSTEM) for i in range(n)]
    for i in range(n):
        tenant.domains.append(create_domain(workspace=ws, name=f"area{i}", by=SYSTEM))
        tenant.domains.append(create_domain(workspace=ws, repo=tenant.repo, name=f"context{i}", by=SYSTEM))
    tenant.agents = [
        create_agent(workspace=ws, name=f"{slug}-agent{i}", role=tenant.roles[i], by=SYSTEM)[0] for i in range(n)
    ]
    member = get_user_model().objects.create_user(f"{slug}-member")
    WorkspaceMembership.objects.create(user=member, workspace=ws, is_admin=True)
    for i, domain in enumerate(tenant.domains):
        agent = tenant.agents[i % n]
        newer = make_fact(tenant, domain, f"{slug}-topic-{i}", f"{slug} uses postgres number {i}")
        older = make_fact(
            tenant,
            domain,
            f"{slug}-topic-{i}",
            f"{slug} used sqlite number {i}",
            superseded_by=newer,
            superseded_at=timezone.now(),
            veracity="imported",
        )
        tenant.facts += [newer, older]
        Conflict.objects.create(
            workspace=ws,
            domain=domain,
            topic=newer.topic,
            existing=older,
            proposed=newer,
            winner=newer,
            loser=older,
            rule="veracity",
            similarity=0.8,
        )
        FactMention.objects.create(fact=newer, text=f"{slug} said again: postgres {i}", veracity="agent_inferred")
        Policy.objects.create(workspace=ws, domain=domain, rule=f"{slug} rule {i}", required_role=tenant.roles[0])
        observation = Observation.objects.create(workspace=ws, agent=agent, text=f"{slug} saw thing {i}")
        newer.source_observations.add(observation)
        HotMemory.objects.create(
            workspace=ws, agent=agent, session_id=f"s{i}", content=f"{slug} hot {i}", domain=domain, topic="t"
        )
        episode = Episode.objects.create(workspace=ws, agent=agent, kind="dispatch", title=f"{slug} run {i}")
        EpisodeFact.objects.create(episode=episode, fact=newer, relation="written")
        EpisodeFact.objects.create(episode=episode, fact=older, relation="recalled")
        candidate = Candidate.objects.create(
            workspace=ws,
            domain=domain,
            topic="t",
            candidate_id=f"{slug}-candidate-{i}",
            failure_class="agent_failure",
            proposed_memory=f"{slug} candidate rule {i}",
            applies_to=["public_api"],
            submitted_by_agent=agent,
            submitted_by_label=f"agent:{agent.name}",
        )
        Replay.objects.create(candidate=candidate, probe="probe", passed=True, recorded_by_label="agent")
        PromotionDecision.objects.create(
            candidate=candidate, decision="refused", write=True, decided_by_label="agent", scorecard={}
        )
        run = MemoryRun.objects.create(workspace=ws, agent=agent, task=f"{slug} long task {i}", episode=episode)
        BankItem.objects.create(run=run, kind="status", item_id="status", content=f"{slug} halfway {i}")
        BankItem.objects.create(
            run=run, kind="knowledge", item_id=f"k{i}", content=f"{slug} knows {i}", candidate=candidate
        )
        Intervention.objects.create(run=run, step=i, reminder=None, rationale="nothing bears on the next step")
        Exposure.objects.create(  # what the recall buffer writes: ids only
            workspace=ws, agent=agent, episode=episode, surface="search", fact_id=newer.pk, run_id=run.pk
        )
        Job.objects.create(
            workspace=ws,
            kind="consolidate",
            scope=f"agent:{agent.pk}:session:s{i}",
            task_id=f"{slug}-job-{i}",
            requested_by_agent=agent,
            state="done",
            finished_at=timezone.now(),
            expires_at=timezone.now(),
        )
    for agent in tenant.agents:
        WorkingMemory.objects.create(agent=agent, notes=f"notes of {agent.name}")
    for i in range(n):
        hook = WebhookSubscription.objects.create(
            workspace=ws, url=f"https://hooks.example.com/{slug}/{i}", events=["fact.superseded"]
        )
        WebhookDelivery.objects.create(
            uuid=uuid.uuid4(), workspace=ws, subscription=hook, event="fact.superseded", event_id=uuid.uuid4()
        )
    return tenant


def changelist_url(model: type[Model]) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def change_url(obj: Model) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def add_url(model: type[Model]) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_add")


@pytest.fixture
def superuser_client(django_user_model) -> Client:
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(root)
    client.user = root  # type: ignore[attr-defined]
    return client


def staff_client(django_user_model, workspace: Workspace, *codenames: str) -> Client:
    """A staff member of `workspace` only, holding the given model permissions and reviewing
    every domain it has so far (domain rows are shown to their reviewers only: memory.access)."""
    user = django_user_model.objects.create_user(f"staff-of-{workspace.slug}", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    WorkspaceMembership.objects.create(user=user, workspace=workspace)
    for domain in MemoryDomain.objects.filter(workspace=workspace):
        assign_perm("memory.review_domain", user, domain)
    client = Client()
    client.force_login(user)
    client.user = user  # type: ignore[attr-defined]
    return client


def shown_messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


# --- Every model, every list page ------------------------------------------------------------
def test_every_model_of_memory_and_agents_is_registered():
    missing = [m._meta.label for m in ADMIN_MODELS if m not in admin.site._registry]
    assert missing == []


@pytest.mark.django_db
@pytest.mark.parametrize("model", ADMIN_MODELS, ids=lambda m: m._meta.label_lower)
def test_changelist_renders_with_queries_that_do_not_grow_with_rows(
    model, superuser_client, django_assert_max_num_queries
):
    populate("acme", 1)
    with django_assert_max_num_queries(MAX_CHANGELIST_QUERIES) as few_rows:
        response = superuser_client.get(changelist_url(model))
    assert response.status_code == 200

    populate("globex", 4)
    populate("initech", 4)
    with django_assert_max_num_queries(MAX_CHANGELIST_QUERIES) as more_rows:
        response = superuser_client.get(changelist_url(model))
    assert response.status_code == 200
    assert len(more_rows.captured_queries) == len(few_rows.captured_queries)


@pytest.mark.django_db
@pytest.mark.parametrize("model", ADMIN_MODELS, ids=lambda m: m._meta.label_lower)
def test_change_and_add_pages_render_for_a_superuser(model, superuser_client):
    populate("acme", 1)
    obj = model._default_manager.order_by("pk").first()
    assert superuser_client.get(change_url(obj)).status_code == 200
    model_admin = admin.site._registry[model]
    request = type("Request", (), {"user": superuser_client.user})()
    if model_admin.has_add_permission(request):
        assert superuser_client.get(add_url(model)).status_code == 200


# --- Workspace scoping for staff who are not superusers ------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("model", ADMIN_MODELS, ids=lambda m: m._meta.label_lower)
def test_staff_changelist_shows_only_their_workspace_with_bounded_queries(
    model, django_user_model, django_assert_max_num_queries
):
    acme = populate("acme", 2)
    populate("globex", 2)
    codenames = [f"view_{m._meta.model_name}" for m in ADMIN_MODELS]
    client = staff_client(django_user_model, acme.workspace, *codenames)

    with django_assert_max_num_queries(MAX_CHANGELIST_QUERIES):
        response = client.get(changelist_url(model))

    assert response.status_code == 200
    assert "globex" not in response.content.decode()  # not in rows, filters or choices
    model_admin = admin.site._registry[model]
    lookup = getattr(model_admin, "workspace_lookup", None)
    if lookup is not None:
        own_rows = model._default_manager.filter(**{f"{lookup}__in": [acme.workspace.pk]}).count()
        assert response.context["cl"].result_count == own_rows > 0


@pytest.mark.django_db
def test_staff_member_sees_facts_of_their_workspace_only(django_user_model):
    acme, globex = populate("acme", 1), populate("globex", 1)
    client = staff_client(django_user_model, acme.workspace, "view_fact", "change_fact")

    page = client.get(changelist_url(Fact)).content.decode()
    assert "acme-topic-0" in page
    assert "globex-topic-0" not in page

    assert client.get(change_url(acme.facts[0])).status_code == 200
    assert client.get(change_url(globex.facts[0])).status_code in (302, 404)


@pytest.mark.django_db
def test_staff_member_cannot_attach_a_policy_to_another_workspaces_domain(django_user_model):
    acme, globex = populate("acme", 1), populate("globex", 1)
    client = staff_client(django_user_model, acme.workspace, "add_policy", "view_policy")

    response = client.post(
        add_url(Policy),
        {"workspace": acme.workspace.pk, "domain": globex.domains[0].pk, "rule": "sneaky", "active": "on"},
    )

    assert response.status_code == 200  # the form again, with its error
    assert "domain" in response.context["adminform"].form.errors
    assert not Policy.objects.filter(rule="sneaky").exists()


@pytest.mark.django_db
def test_admin_refuses_a_grant_that_mixes_two_workspaces(superuser_client):
    acme, globex = populate("acme", 1), populate("globex", 1)

    response = superuser_client.post(
        add_url(AccessGrant), {"role": acme.roles[0].pk, "domain": globex.domains[0].pk, "level": "none"}
    )

    assert response.status_code == 200
    assert "same workspace" in str(response.context["adminform"].form.non_field_errors())
    assert not AccessGrant.objects.filter(role=acme.roles[0], domain=globex.domains[0]).exists()


@pytest.mark.django_db
def test_decay_profiles_are_visible_to_staff_but_only_superusers_change_them(django_user_model, superuser_client):
    workspace = populate("acme", 1).workspace
    client = staff_client(django_user_model, workspace)
    profile = DecayProfile.objects.get(memory_type="decision")

    assert client.get(changelist_url(DecayProfile)).status_code == 200
    data = {"memory_type": "decision", "scale_days": 1, "shape": 1, "stale_after_days": 1, "floor": 0.5}
    assert client.post(change_url(profile), data).status_code == 403

    assert superuser_client.post(change_url(profile), data).status_code == 302
    profile.refresh_from_db()
    assert profile.scale_days == 1 and profile.floor == 0.5
    # A floor of 1 would switch decay off: refused on the form, not a 500.
    refused = superuser_client.post(change_url(profile), {**data, "floor": 1.0})
    assert refused.status_code == 200 and "below 1 (1 would switch decay off)" in refused.content.decode()
    profile.refresh_from_db()
    assert profile.floor == 0.5


# --- Facts: archive, never delete, never edit in place ---------------------------------------
@pytest.mark.django_db
def test_archive_action_archives_facts_and_writes_audit_events(superuser_client):
    fact = populate("acme", 1).facts[0]
    before = fact.status_changed_at

    response = superuser_client.post(
        changelist_url(Fact), {"action": "archive_selected", "_selected_action": [fact.pk]}, follow=True
    )

    assert response.status_code == 200
    fact.refresh_from_db()
    assert fact.status == FactStatus.ARCHIVED
    assert fact.status_changed_at > before
    event = AuditEvent.objects.get(verb="fact.archived", target_id=fact.pk)
    assert event.actor_user == superuser_client.user
    assert event.workspace_id == fact.workspace_id
    assert event.target_type == "fact"


@pytest.mark.django_db
def test_archiving_an_archived_fact_again_writes_no_second_event(superuser_client):
    fact = populate("acme", 1).facts[0]
    for _ in range(2):
        superuser_client.post(changelist_url(Fact), {"action": "archive_selected", "_selected_action": [fact.pk]})
    assert AuditEvent.objects.filter(verb="fact.archived", target_id=fact.pk).count() == 1


@pytest.mark.django_db
def test_facts_cannot_be_deleted_or_added_in_the_admin(superuser_client):
    fact = populate("acme", 1).facts[0]
    delete_url = reverse("admin:memory_fact_delete", args=[fact.pk])

    assert superuser_client.get(delete_url).status_code == 403
    assert superuser_client.get(add_url(Fact)).status_code == 403
    actions = dict(superuser_client.get(changelist_url(Fact)).context["action_form"].fields["action"].choices)
    assert "delete_selected" not in actions
    assert "archive_selected" in actions


@pytest.mark.django_db
def test_fact_change_form_moves_status_through_the_service_and_ignores_content(superuser_client):
    fact = populate("acme", 1).facts[0]

    response = superuser_client.post(change_url(fact), {"status": "challenged", "content": "rewritten in place"})

    assert response.status_code == 302
    fact.refresh_from_db()
    assert fact.status == FactStatus.CHALLENGED
    assert "rewritten" not in fact.content
    event = AuditEvent.objects.get(verb="fact.status_changed", target_id=fact.pk)
    assert event.detail["from"] == "active" and event.detail["to"] == "challenged"


@pytest.mark.django_db
def test_conflicts_and_audit_events_are_read_only(superuser_client):
    populate("acme", 1)
    for model in (Conflict, AuditEvent):
        obj = model._default_manager.first()
        assert superuser_client.get(add_url(model)).status_code == 403
        assert superuser_client.get(change_url(obj)).status_code == 200  # the view-only page
        assert superuser_client.post(change_url(obj), {}).status_code == 403
        delete_url = reverse(f"admin:memory_{model._meta.model_name}_delete", args=[obj.pk])
        assert superuser_client.get(delete_url).status_code == 403


# --- Domains and grants go through tenancy services -----------------------------------------
@pytest.mark.django_db
def test_creating_a_domain_in_the_admin_gives_write_to_every_role(superuser_client):
    acme = populate("acme", 2)

    response = superuser_client.post(add_url(MemoryDomain), {"workspace": acme.workspace.pk, "name": "security"})

    assert response.status_code == 302
    domain = MemoryDomain.objects.get(workspace=acme.workspace, name="security", repo=None)
    levels = dict(AccessGrant.objects.filter(domain=domain).values_list("role__name", "level"))
    assert levels == {"role0": GrantLevel.WRITE, "role1": GrantLevel.WRITE}
    assert AuditEvent.objects.filter(
        verb="domain.created", target_id=domain.pk, actor_user=superuser_client.user
    ).exists()


@pytest.mark.django_db
def test_changing_a_grant_in_the_admin_is_audited(superuser_client):
    acme = populate("acme", 1)
    grant = AccessGrant.objects.get(role=acme.roles[0], domain=acme.domains[0])

    response = superuser_client.post(change_url(grant), {"level": "none"})

    assert response.status_code == 302
    grant.refresh_from_db()
    assert grant.level == GrantLevel.NONE
    event = AuditEvent.objects.get(verb="grant.changed", target_id=grant.pk)
    assert event.detail["from"] == "write" and event.detail["to"] == "none"


@pytest.mark.django_db
def test_domain_object_permissions_can_be_given_to_a_reviewer(superuser_client, django_user_model):
    domain = populate("acme", 1).domains[0]
    reviewer = django_user_model.objects.create_user("reviewer", is_staff=True)
    page = reverse("admin:memory_memorydomain_permissions", args=[domain.pk])
    manage = reverse("admin:memory_memorydomain_permissions_manage_user", args=[domain.pk, reviewer.pk])

    assert superuser_client.get(page).status_code == 200
    assert superuser_client.post(manage, {"permissions": ["review_domain"]}).status_code == 302

    reviewer = django_user_model.objects.get(pk=reviewer.pk)  # fresh permission cache
    assert reviewer.has_perm("memory.review_domain", domain)
    assert not reviewer.has_perm("memory.review_domain", populate("globex", 1).domains[0])


# --- Agents: keys are shown once and stored hashed --------------------------------------------
KEY_IN_MESSAGE = re.compile(r"<code>(engram_[^<]+)</code>")


@pytest.mark.django_db
def test_creating_an_agent_shows_its_key_once_and_stores_only_the_hash(superuser_client):
    acme = populate("acme", 1)

    response = superuser_client.post(
        add_url(Agent), {"workspace": acme.workspace.pk, "role": acme.roles[0].pk, "name": "scout"}, follow=True
    )

    assert response.status_code == 200
    agent = Agent.objects.get(workspace=acme.workspace, name="scout")
    [key] = [m for msg in shown_messages(response) for m in KEY_IN_MESSAGE.findall(msg)]
    assert any("will not be shown again" in msg for msg in shown_messages(response))
    assert agent.key_hash == hash_key(key)
    assert agent.key_hint == key[:12]
    assert AuditEvent.objects.filter(verb="agent.created", target_id=agent.pk).exists()

    later = superuser_client.get(change_url(agent)).content.decode()
    assert key not in later
    assert agent.key_hash not in later
    assert agent.key_hint in later
    assert key not in superuser_client.get(changelist_url(Agent)).content.decode()


@pytest.mark.django_db
def test_rotate_action_shows_the_new_key_once_and_the_old_one_stops_matching(superuser_client):
    agent = populate("acme", 1).agents[0]
    old_hash = agent.key_hash

    response = superuser_client.post(
        changelist_url(Agent), {"action": "rotate_keys", "_selected_action": [agent.pk]}, follow=True
    )

    [key] = [m for msg in shown_messages(response) for m in KEY_IN_MESSAGE.findall(msg)]
    agent.refresh_from_db()
    assert agent.key_hash == hash_key(key) != old_hash
    assert AuditEvent.objects.filter(verb="agent.key_rotated", target_id=agent.pk).exists()


@pytest.mark.django_db
def test_revoke_action_revokes_keys_through_the_service(superuser_client):
    agent = populate("acme", 1).agents[0]

    superuser_client.post(changelist_url(Agent), {"action": "revoke_keys", "_selected_action": [agent.pk]})

    agent.refresh_from_db()
    assert agent.revoked_at is not None
    assert agent.revoked_at <= timezone.now() + timedelta(seconds=1)
    assert AuditEvent.objects.filter(verb="agent.revoked", target_id=agent.pk).exists()


@pytest.mark.django_db
def test_policy_actions_switch_policies_through_the_audited_services(client):
    from memory.models import AuditEvent, Policy
    from tests.factories import PolicyFactory, UserFactory

    admin_user = UserFactory(username="root-policy", is_superuser=True)
    client.force_login(admin_user)
    policy = PolicyFactory()
    response = client.post(
        "/admin/memory/policy/", {"action": "deactivate_selected", "_selected_action": [policy.pk]}, follow=True
    )
    assert response.status_code == 200
    assert Policy.objects.get(pk=policy.pk).active is False
    assert AuditEvent.objects.filter(verb="policy.deactivated", target_id=policy.pk).exists()
    client.post("/admin/memory/policy/", {"action": "activate_selected", "_selected_action": [policy.pk]})
    assert Policy.objects.get(pk=policy.pk).active is True


@pytest.fixture(autouse=True)
def seeded_decay_profiles(request):
    """The decay profiles migration 0002 seeds, as a fresh install has them: a transactional test
    on the same worker flushes every table, seeded rows included."""
    if "db" not in request.fixturenames and not request.node.get_closest_marker("django_db"):
        return
    request.getfixturevalue("_django_db_helper")
    import importlib

    from django.apps import apps

    seed = importlib.import_module("memory.migrations.0002_default_decay_profiles")
    seed.forwards(apps, None)


@pytest.mark.django_db
def test_policy_change_form_is_read_only(client):
    from tests.factories import PolicyFactory, UserFactory

    client.force_login(UserFactory(username="root-policy2", is_superuser=True))
    policy = PolicyFactory(rule="Original rule.")
    client.post(f"/admin/memory/policy/{policy.pk}/change/", {"rule": "Edited in place."})
    policy.refresh_from_db()
    assert policy.rule == "Original rule."
