"""Bounded pushes (issue 13.5): the workspace's policy budget is enforced on every way a policy
becomes active — proposal, revision, activation — under a lock, in services, admin and pages."""

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from memory.actors import Actor
from memory.errors import InvalidInput
from memory.models import POLICY_BUDGET_MAX, AuditEvent, Policy, Workspace
from memory.search.preamble import build_preamble
from memory.services.policies import (
    PolicyBudgetExceeded,
    activate_policy,
    active_policy_chars,
    deactivate_policy,
    policy_line,
    propose_policy,
    rule_max,
    set_policy_budget,
    supersede_policy,
)
from memory.services.tenancy import set_grant
from tests.factories import PolicyFactory
from tests.races import race

SYSTEM = Actor.system("test")


@pytest.fixture
def writable(world):
    set_grant(role=world.coder_role, domain=world.architecture, level="write", by=SYSTEM)
    return world


def _budget(world, chars):
    Workspace.objects.filter(pk=world.workspace.pk).update(policy_budget_chars=chars)


def _state():
    """What a refused change must leave untouched: rows, active set, audit trail."""
    active = sorted(Policy.objects.active().values_list("pk", flat=True))
    return Policy.objects.count(), active, AuditEvent.objects.count()


def test_proposal_past_the_budget_is_409_with_the_numbers_and_writes_nothing(writable):
    by = Actor.of_agent(writable.coder)
    first = propose_policy(domain=writable.architecture, rule="Use UTC everywhere.", by=by)
    now = len(policy_line(first))
    _budget(writable, now + 20)
    before = _state()
    rule = "Never deploy on Fridays or before a holiday."
    with pytest.raises(PolicyBudgetExceeded) as caught:
        propose_policy(domain=writable.architecture, rule=rule, by=by)
    error = caught.value
    assert error.status == 409 and error.code == "policy_budget_exceeded"
    after = now + 1 + len(f"- [architecture] {rule}")
    assert error.extra == {"budget": {"chars": now, "chars_after": after, "budget": now + 20}}
    assert _state() == before


def test_proposal_within_the_budget_is_created(writable):
    _budget(writable, 200)
    policy = propose_policy(domain=writable.architecture, rule="Use UTC.", by=Actor.of_agent(writable.coder))
    assert policy.active
    assert active_policy_chars(writable.workspace.pk) == len("- [architecture] Use UTC.")


def test_a_rule_longer_than_the_per_policy_limit_is_refused_on_rule(writable):
    before = _state()
    with pytest.raises(InvalidInput) as caught:
        propose_policy(domain=writable.architecture, rule="x" * (rule_max() + 1), by=Actor.of_agent(writable.coder))
    assert caught.value.status == 400
    assert "rule" in caught.value.fields
    assert _state() == before
    assert propose_policy(domain=writable.architecture, rule="x" * rule_max(), by=Actor.of_agent(writable.coder))


def test_thirty_maximal_proposals_stop_at_the_budget_and_the_preamble_stays_within_it(writable):
    """The reported attack: 30 long policies grew one preamble from ~2k to ~62k characters."""
    by = Actor.of_agent(writable.coder)
    accepted = refused = 0
    for i in range(30):
        try:
            propose_policy(domain=writable.architecture, rule=f"{i:02d} " + "y" * (rule_max() - 3), by=by)
            accepted += 1
        except PolicyBudgetExceeded:
            refused += 1
    budget = writable.workspace.policy_budget_chars
    line = len("- [architecture] ") + rule_max()
    assert accepted == (budget + 1) // (line + 1)  # n lines and n-1 newlines: as many as fit, no more
    assert refused == 30 - accepted
    assert active_policy_chars(writable.workspace.pk) <= budget
    preamble = build_preamble(agent=writable.coder2, task="short")
    assert len("\n".join(preamble.policies)) <= budget
    assert len(preamble.text) <= budget + 200  # the headings and the closing line


def test_a_longer_revision_of_an_active_policy_is_refused_past_the_budget(writable):
    by = Actor.of_agent(writable.coder)
    policy = propose_policy(domain=writable.architecture, rule="Short.", by=by)
    _budget(writable, len(policy_line(policy)) + 5)
    before = _state()
    with pytest.raises(PolicyBudgetExceeded) as caught:
        supersede_policy(policy=policy, rule="A much longer version of the same rule.", by=by)
    assert caught.value.extra["budget"]["chars"] == len(policy_line(policy))
    assert _state() == before
    policy.refresh_from_db()
    assert policy.active and policy.superseded_by_id is None
    # Same length or shorter always passes (it replaces the line, it does not add one).
    assert supersede_policy(policy=policy, rule="Brief.", by=by).active


def test_over_budget_after_the_admin_lowered_it_shrinking_still_works_growing_does_not(writable):
    by = Actor.of_agent(writable.coder)
    a = propose_policy(domain=writable.architecture, rule="Always write a migration for model changes.", by=by)
    set_policy_budget(workspace=writable.workspace, chars=10, by=Actor.of_user(writable.admin_user))
    shorter = supersede_policy(policy=a, rule="Write migrations.", by=by)
    assert shorter.active
    with pytest.raises(PolicyBudgetExceeded):
        propose_policy(domain=writable.architecture, rule="x", by=by)
    deactivate_policy(policy=shorter, by=by)  # taking a rule out is never refused
    assert active_policy_chars(writable.workspace.pk) == 0


def test_revising_an_inactive_policy_is_not_charged(writable):
    by = Actor.of_agent(writable.coder)
    policy = propose_policy(domain=writable.architecture, rule="v1", by=by)
    deactivate_policy(policy=policy, by=by)
    _budget(writable, 0)
    assert not supersede_policy(policy=policy, rule="v2, now much longer than before", by=by).active


def test_activation_past_the_budget_is_refused_and_the_policy_stays_inactive(world):
    person = Actor.of_user(world.admin_user)
    kept = PolicyFactory(domain=world.architecture, rule="Use UTC everywhere.")
    parked = PolicyFactory(domain=world.conventions, rule="Tabs, never spaces.")
    deactivate_policy(policy=parked, by=person)
    _budget(world, len(policy_line(kept)) + 5)
    before = _state()
    with pytest.raises(PolicyBudgetExceeded) as caught:
        activate_policy(policy=parked, by=person)
    assert caught.value.extra["budget"]["chars_after"] == len(policy_line(kept)) + 1 + len(policy_line(parked))
    assert _state() == before
    _budget(world, 1000)
    assert activate_policy(policy=parked, by=person).active


@pytest.mark.django_db(transaction=True)
def test_concurrent_proposals_cannot_both_squeeze_under_the_budget(writable):
    rules = [f"Rule number {i} of the race." for i in range(8)]
    line = len(f"- [architecture] {rules[0]}")
    _budget(writable, line + line // 2)  # room for exactly one of them
    by = Actor.of_agent(writable.coder)
    created, errors = race(
        *(lambda rule=rule: propose_policy(domain=writable.architecture, rule=rule, by=by) for rule in rules)
    )
    refused = [e for e in errors if isinstance(e, PolicyBudgetExceeded)]
    other = [e for e in errors if not isinstance(e, PolicyBudgetExceeded)]
    assert other == []
    assert len(created) == 1 and len(refused) == 7
    assert Policy.objects.active().count() == 1
    assert active_policy_chars(writable.workspace.pk) <= line + line // 2


# --- Who sets the budget ---------------------------------------------------------------------
def test_set_policy_budget_is_audited_and_bounded(world):
    person = Actor.of_user(world.admin_user)
    set_policy_budget(workspace=world.workspace, chars=3000, by=person)
    assert Workspace.objects.get(pk=world.workspace.pk).policy_budget_chars == 3000
    event = AuditEvent.objects.get(verb="workspace.policy_budget_changed")
    assert event.detail["from"] == 2000 and event.detail["to"] == 3000
    for bad in (-1, POLICY_BUDGET_MAX + 1, "3000", True):
        with pytest.raises(InvalidInput) as caught:
            set_policy_budget(workspace=world.workspace, chars=bad, by=person)
        assert "policy_budget_chars" in caught.value.fields
    assert Workspace.objects.get(pk=world.workspace.pk).policy_budget_chars == 3000


def _staff(user, *codenames):
    user.is_staff = True
    user.save()
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def _workspace_form(world, chars):
    return {"slug": world.workspace.slug, "name": world.workspace.name, "policy_budget_chars": chars}


def test_only_workspace_admins_change_the_budget_in_the_admin(world):
    url = reverse("admin:memory_workspace_change", args=[world.workspace.pk])
    member = _staff(world.reviewer, "view_workspace", "change_workspace")
    assert member.post(url, _workspace_form(world, 9000)).status_code == 403
    assert Workspace.objects.get(pk=world.workspace.pk).policy_budget_chars == 2000

    admin = _staff(world.admin_user, "view_workspace", "change_workspace")
    assert admin.post(url, _workspace_form(world, POLICY_BUDGET_MAX + 1)).status_code == 200  # the form again
    assert Workspace.objects.get(pk=world.workspace.pk).policy_budget_chars == 2000
    assert admin.post(url, _workspace_form(world, 4000)).status_code == 302
    assert Workspace.objects.get(pk=world.workspace.pk).policy_budget_chars == 4000
    assert AuditEvent.objects.filter(verb="workspace.policy_budget_changed", actor_user=world.admin_user).exists()


def test_policies_page_lets_workspace_admins_set_the_budget(world):
    url = reverse("review:policy-budget", args=[world.workspace.slug])
    reviewer = Client()
    reviewer.force_login(world.reviewer)
    page = reviewer.get(reverse("review:policies", args=[world.workspace.slug])).content.decode()
    assert 'data-testid="budget-form"' not in page
    assert reviewer.post(url, {"policy_budget_chars": "9000"}).status_code == 403

    admin = Client()
    admin.force_login(world.admin_user)
    assert (
        'data-testid="budget-form"'
        in admin.get(reverse("review:policies", args=[world.workspace.slug])).content.decode()
    )
    refused = admin.post(url, {"policy_budget_chars": "99999999999999999999"}).content.decode()
    assert "0 to 20000" in refused
    assert admin.post(url, {"policy_budget_chars": "3500"}).status_code == 200
    assert Workspace.objects.get(pk=world.workspace.pk).policy_budget_chars == 3500


def test_admin_add_and_activate_respect_the_budget(world):
    client = _staff(world.admin_user, "add_policy", "view_policy", "change_policy")
    _budget(world, 30)
    before = _state()
    response = client.post(
        reverse("admin:memory_policy_add"),
        {"workspace": world.workspace.pk, "domain": world.architecture.pk, "rule": "A rule too long for this budget."},
    )
    assert response.status_code == 200  # the form, with the refusal
    assert any("budget of 30" in error for error in response.context["adminform"].form.non_field_errors())
    assert _state() == before

    parked = PolicyFactory(domain=world.architecture, rule="Another rule too long for the budget.", active=False)
    response = client.post(
        reverse("admin:memory_policy_changelist"),
        {"action": "activate_selected", "_selected_action": [parked.pk]},
        follow=True,
    )
    assert "was not activated" in response.content.decode()
    parked.refresh_from_db()
    assert not parked.active
