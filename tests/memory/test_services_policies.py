"""Policies (SPEC §2, §4): write grants, supersession, activation and the dispatch budget."""

import pytest

from memory.actors import Actor
from memory.errors import InsufficientPermission, InvalidInput, StateConflict
from memory.models import AuditEvent, Policy
from memory.services.policies import (
    activate_policy,
    active_policy_chars,
    deactivate_policy,
    policy_budget,
    policy_line,
    propose_policy,
    rule_max,
    supersede_policy,
)
from memory.services.tenancy import set_grant
from tests.factories import FactFactory, PolicyFactory, RoleFactory

SYSTEM = Actor.system("test")


@pytest.fixture
def writable(world):
    """The coder role holds `write` on architecture and on the repo domain."""
    set_grant(role=world.coder_role, domain=world.architecture, level="write", by=SYSTEM)
    set_grant(role=world.coder_role, domain=world.repo_context, level="write", by=SYSTEM)
    return world


def _counts():
    return Policy.objects.count(), AuditEvent.objects.count()


def test_propose_policy_without_write_raises_and_writes_nothing(world):
    set_grant(role=world.coder_role, domain=world.architecture, level="read", by=SYSTEM)
    before = _counts()
    with pytest.raises(InsufficientPermission) as caught:
        propose_policy(domain=world.architecture, rule="Use UTC everywhere.", by=Actor.of_agent(world.coder))
    assert caught.value.code == "insufficient_memory_permission"
    assert caught.value.status == 403
    assert _counts() == before


def test_propose_policy_with_no_grant_row_is_read_only_and_refused(world):
    with pytest.raises(InsufficientPermission):
        propose_policy(domain=world.conventions, rule="Tabs.", by=Actor.of_agent(world.coder))


def test_propose_policy_with_write_creates_an_active_audited_policy(writable):
    fact = FactFactory(domain=writable.architecture)
    policy = propose_policy(
        domain=writable.architecture,
        rule="  Use UTC everywhere.  ",
        required_role="planner",
        derived_from_ids=[fact.pk],
        by=Actor.of_agent(writable.coder),
    )
    assert policy.active and policy.superseded_by_id is None
    assert policy.rule == "Use UTC everywhere."
    assert policy.required_role == writable.planner_role
    assert [f.pk for f in policy.derived_from.all()] == [fact.pk]
    assert policy.created_by_agent == writable.coder
    event = AuditEvent.objects.get(verb="policy.proposed", target_id=policy.pk)
    assert event.actor_agent == writable.coder
    assert event.detail["derived_from"] == [fact.pk]


def test_people_are_not_grant_checked(world):
    set_grant(role=world.coder_role, domain=world.architecture, level="none", by=SYSTEM)
    policy = propose_policy(domain=world.architecture, rule="Review every migration.", by=Actor.of_user(world.reviewer))
    assert policy.created_by_user == world.reviewer


def test_propose_policy_refuses_a_role_of_another_workspace_or_unknown_name(writable):
    foreign_role = RoleFactory(workspace=writable.other_workspace, name="coder")
    before = _counts()
    for role in (foreign_role, "nobody"):
        with pytest.raises(InvalidInput) as caught:
            propose_policy(
                domain=writable.architecture, rule="x", required_role=role, by=Actor.of_agent(writable.coder)
            )
        assert "required_role" in caught.value.fields
    assert _counts() == before


def test_propose_policy_refuses_facts_the_agent_cannot_see(writable):
    set_grant(role=writable.coder_role, domain=writable.conventions, level="none", by=SYSTEM)
    hidden = FactFactory(domain=writable.conventions)
    foreign = FactFactory(domain__workspace=writable.other_workspace)
    before = _counts()
    for fact_id in (hidden.pk, foreign.pk, 999_999):
        with pytest.raises(InvalidInput) as caught:
            propose_policy(
                domain=writable.architecture, rule="x", derived_from_ids=[fact_id], by=Actor.of_agent(writable.coder)
            )
        assert caught.value.code == "unknown_fact"
        assert "derived_from" in caught.value.fields
    assert _counts() == before


@pytest.mark.parametrize("rule", ["", "   ", "x" * (rule_max() + 1)])
def test_propose_policy_refuses_empty_or_oversized_rules(writable, rule):
    before = _counts()
    with pytest.raises(InvalidInput) as caught:
        propose_policy(domain=writable.architecture, rule=rule, by=Actor.of_agent(writable.coder))
    assert "rule" in caught.value.fields
    assert _counts() == before


def test_supersede_policy_chains_versions_and_refuses_superseding_twice(writable):
    by = Actor.of_agent(writable.coder)
    fact = FactFactory(domain=writable.architecture)
    first = propose_policy(
        domain=writable.architecture, rule="v1", required_role="planner", derived_from_ids=[fact.pk], by=by
    )
    second = supersede_policy(policy=first, rule="v2", reason="clearer", by=by)
    first.refresh_from_db()
    assert second.active and second.rule == "v2"
    assert second.required_role == writable.planner_role
    assert [f.pk for f in second.derived_from.all()] == [fact.pk]
    assert not first.active
    assert first.superseded_by == second
    assert first.superseded_at is not None and first.supersede_reason == "clearer"
    assert AuditEvent.objects.filter(verb="policy.superseded", target_id=first.pk).exists()

    third = supersede_policy(policy=second, rule="v3", by=by)
    second.refresh_from_db()
    assert second.superseded_by == third

    before = _counts()
    with pytest.raises(StateConflict) as caught:
        supersede_policy(policy=first, rule="v2 again", by=by)
    assert caught.value.code == "policy_not_live"
    assert caught.value.status == 409
    assert _counts() == before


def test_supersede_policy_needs_write(writable):
    policy = propose_policy(domain=writable.architecture, rule="v1", by=Actor.of_agent(writable.coder))
    set_grant(role=writable.coder_role, domain=writable.architecture, level="read", by=SYSTEM)
    before = _counts()
    with pytest.raises(InsufficientPermission):
        supersede_policy(policy=policy, rule="v2", by=Actor.of_agent(writable.coder2))
    assert _counts() == before


def test_supersede_policy_refuses_oversized_reason(writable):
    policy = propose_policy(domain=writable.architecture, rule="v1", by=Actor.of_agent(writable.coder))
    with pytest.raises(InvalidInput) as caught:
        supersede_policy(policy=policy, rule="v2", reason="r" * 501, by=Actor.of_agent(writable.coder))
    assert "reason" in caught.value.fields


def test_revision_of_a_deactivated_policy_stays_deactivated(writable):
    policy = propose_policy(domain=writable.architecture, rule="v1", by=Actor.of_agent(writable.coder))
    deactivate_policy(policy=policy, by=Actor.of_user(writable.admin_user))
    new = supersede_policy(policy=policy, rule="v2", by=Actor.of_agent(writable.coder))
    assert not new.active


def test_activate_and_deactivate_are_audited_and_idempotent(world):
    person = Actor.of_user(world.admin_user)
    policy = PolicyFactory(domain=world.architecture)
    deactivate_policy(policy=policy, by=person)
    policy.refresh_from_db()
    assert not policy.active
    deactivate_policy(policy=policy, by=person)
    assert AuditEvent.objects.filter(verb="policy.deactivated", target_id=policy.pk).count() == 1
    activate_policy(policy=policy, by=person)
    policy.refresh_from_db()
    assert policy.active
    assert AuditEvent.objects.filter(verb="policy.activated", target_id=policy.pk).count() == 1


def test_activate_refuses_a_superseded_policy(world):
    person = Actor.of_user(world.admin_user)
    policy = PolicyFactory(domain=world.architecture)
    supersede_policy(policy=policy, rule="v2", by=person)
    for change in (activate_policy, deactivate_policy):
        with pytest.raises(StateConflict) as caught:
            change(policy=policy, by=person)
        assert caught.value.code == "policy_not_live"
    policy.refresh_from_db()
    assert not policy.active


def test_policy_line_shows_domain_label_rule_and_advisory_role(world):
    plain = PolicyFactory(domain=world.architecture, rule="Use UTC.")
    scoped = PolicyFactory(domain=world.repo_context, rule="Run\nmake  lint.", required_role=world.planner_role)
    assert policy_line(plain) == "- [architecture] Use UTC."
    assert policy_line(scoped) == "- [repo:web/context] Run make lint. (role: planner)"


def test_budget_chars_equal_the_exact_active_lines(world):
    person = Actor.of_user(world.admin_user)
    a = PolicyFactory(domain=world.architecture, rule="Use UTC everywhere.")
    b = PolicyFactory(domain=world.repo_context, rule="Run make lint.", required_role=world.coder_role)
    inactive = PolicyFactory(domain=world.conventions, rule="Not counted.")
    deactivate_policy(policy=inactive, by=person)
    PolicyFactory(workspace=world.other_workspace, domain__workspace=world.other_workspace, rule="Other ws.")
    expected = "- [architecture] Use UTC everywhere.\n- [repo:web/context] Run make lint. (role: coder)"
    assert active_policy_chars(world.workspace.pk) == len(expected)
    assert policy_line(a) + "\n" + policy_line(b) == expected

    world.workspace.policy_budget_chars = len(expected)
    assert policy_budget(world.workspace) == {"chars": len(expected), "budget": len(expected), "over": False}
    world.workspace.policy_budget_chars = len(expected) - 1
    assert policy_budget(world.workspace)["over"] is True


def test_budget_of_a_workspace_without_policies_is_zero(world):
    assert policy_budget(world.workspace) == {"chars": 0, "budget": 2000, "over": False}
