"""Policies (SPEC §2, §4): normative rules derived from facts, one domain each.

Agents need `write` on the domain to propose or supersede a policy (SPEC §2, HTTP 403
`insufficient_memory_permission` otherwise); people acting in the pages are not grant-checked.
A policy is never edited in place: a new version supersedes it. Every active policy of a
workspace goes into every dispatch, so the character cost of those lines is computed here, on
the very line format the preamble uses (`policy_line`), and bounded: one rule has at most
ENGRAM_POLICY_MAX_CHARS characters, and a proposal, revision or activation that would take the
active lines past the workspace's `policy_budget_chars` is refused (409 `policy_budget_exceeded`).
The check runs under a lock on the workspace row, so two concurrent proposals cannot both fit
into the same remaining room.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.actors import Actor
from memory.audit import record_event
from memory.errors import InsufficientPermission, InvalidInput, StateConflict
from memory.models import POLICY_BUDGET_MAX, Fact, GrantLevel, MemoryDomain, Policy, Role, Workspace
from memory.services.tenancy import effective_level, require_visible_domain

REASON_MAX = 500
DERIVED_FROM_MAX = 50


def rule_max() -> int:
    """The longest rule one policy may have (ENGRAM_POLICY_MAX_CHARS)."""
    return int(settings.ENGRAM_POLICY_MAX_CHARS)


class PolicyBudgetExceeded(StateConflict):
    """The change would make the active policies cost more than the workspace's budget. The body
    carries the numbers: `budget` {chars (now), chars_after, budget}."""

    code = "policy_budget_exceeded"

    def __init__(self, *, chars: int, chars_after: int, budget: int) -> None:
        super().__init__(
            f"The active policies would cost {chars_after} characters on every dispatch, over this "
            f"workspace's budget of {budget} (now {chars}). Shorten or deactivate a policy first, "
            "or ask a workspace admin to raise the budget."
        )
        self.extra = {"budget": {"chars": chars, "chars_after": chars_after, "budget": budget}}


def policy_line(policy: Policy) -> str:
    """The one line a policy adds to every dispatch: `- [<domain label>] <rule>`, plus
    ` (role: <name>)` when a role is set (advisory: it never hides the rule). Whitespace runs in
    the rule collapse to one space, so each policy stays exactly one line."""
    line = f"- [{policy.domain.label}] {' '.join(policy.rule.split())}"
    if policy.required_role is not None:
        line += f" (role: {policy.required_role.name})"
    return line


def active_policies(workspace_id: int) -> list[Policy]:
    """Every active, not superseded policy of the workspace, in the order dispatches show them."""
    return list(
        Policy.objects.filter(workspace_id=workspace_id)
        .active()
        .select_related("domain__repo", "required_role")
        .order_by("domain__name", "created_at", "pk")
    )


def _cost(lines: Sequence[str]) -> int:
    """Characters of `lines` as the preamble joins them (one newline between two lines)."""
    return sum(len(line) for line in lines) + max(len(lines) - 1, 0)


def active_policy_chars(workspace_id: int) -> int:
    """Characters the active policies add to every dispatch: their lines joined by newlines."""
    return _cost([policy_line(p) for p in active_policies(workspace_id)])


def _lock_workspace(workspace_id: int) -> Workspace:
    """Lock the workspace row: every change to the set of active policies takes this lock first
    (before any policy row), so budget checks of concurrent changes run one after another."""
    return Workspace.objects.select_for_update().get(pk=workspace_id)


def _check_budget(workspace: Workspace, *, adding: Policy, replacing: Policy | None = None) -> None:
    """Raise PolicyBudgetExceeded if making `adding` active (in place of `replacing`) takes the
    active lines past the budget. A change that does not grow the cost is always allowed, so a
    workspace already over its budget (e.g. after an admin lowered it) can still shrink."""
    lines = {p.pk: policy_line(p) for p in active_policies(workspace.pk)}
    before = _cost(list(lines.values()))
    if replacing is not None:
        lines.pop(replacing.pk, None)
    after = _cost([*lines.values(), policy_line(adding)])
    if after > workspace.policy_budget_chars and after > before:
        raise PolicyBudgetExceeded(chars=before, chars_after=after, budget=workspace.policy_budget_chars)


def policy_budget(workspace: Workspace) -> dict[str, Any]:
    """`chars` the active policies cost each dispatch, the workspace's `budget`, and `over`."""
    chars = active_policy_chars(workspace.pk)
    return {"chars": chars, "budget": workspace.policy_budget_chars, "over": chars > workspace.policy_budget_chars}


def _require_write(by: Actor, domain: MemoryDomain) -> None:
    """Agents need `write` on the domain; people and the system are not grant-checked here.
    Another workspace's domain or a `none` one is `unknown_domain` (400), like a missing one."""
    agent = by.agent
    if agent is None:
        return
    require_visible_domain(agent, domain)
    if effective_level(role_id=agent.role_id, domain_id=domain.pk) != GrantLevel.WRITE:
        raise InsufficientPermission(
            f"Role {agent.role.name!r} needs `write` on domain {domain.label!r} to change its policies.",
            fields={"domain": [f"No write access to {domain.label!r}."]},
        )


def check_budget_for_proposal(*, domain: MemoryDomain, rule: str, required_role: Role | None = None) -> None:
    """A form's early answer (no lock): PolicyBudgetExceeded if proposing `rule` now would take the
    active policies past the budget. propose_policy checks again under the lock."""
    workspace = Workspace.objects.get(pk=domain.workspace_id)
    _check_budget(workspace, adding=Policy(domain=domain, rule=" ".join(rule.split()), required_role=required_role))


def _clean_rule(rule: str, errors: dict[str, list[str]]) -> str:
    rule = rule.strip()
    if not rule:
        errors["rule"] = ["A rule is required."]
    elif len(rule) > rule_max():
        errors["rule"] = [f"At most {rule_max()} characters (ENGRAM_POLICY_MAX_CHARS)."]
    return rule


def _resolve_role(workspace_id: int, required_role: Role | str | None, errors: dict[str, list[str]]) -> Role | None:
    if required_role is None or required_role == "":
        return None
    if isinstance(required_role, Role):
        if required_role.workspace_id == workspace_id:
            return required_role
        name = required_role.name
    else:
        name = required_role
        found = Role.objects.filter(workspace_id=workspace_id, name=name).first()
        if found is not None:
            return found
    errors["required_role"] = [f"No role {name!r} in this workspace."]
    return None


def _resolve_facts(domain: MemoryDomain, ids: Sequence[int], by: Actor) -> list[Fact]:
    """Cited facts must be visible to the proposing agent (its workspace, no `none` domain)."""
    wanted = sorted(set(ids))
    if not wanted:
        return []
    if len(wanted) > DERIVED_FROM_MAX:
        raise InvalidInput("Too many facts cited.", fields={"derived_from": [f"At most {DERIVED_FROM_MAX} facts."]})
    qs = Fact.objects.visible_to(by.agent) if by.agent is not None else Fact.objects.in_workspace(domain.workspace_id)
    found = list(qs.filter(pk__in=wanted).only("pk"))
    if len(found) != len(wanted):
        missing = sorted(set(wanted) - {f.pk for f in found})
        raise InvalidInput(
            "Unknown facts in derived_from.",
            code="unknown_fact",
            fields={"derived_from": [f"Unknown fact ids: {missing}."]},
        )
    return found


@transaction.atomic
def propose_policy(
    *,
    domain: MemoryDomain,
    rule: str,
    required_role: Role | str | None = None,
    derived_from_ids: Sequence[int] = (),
    by: Actor,
) -> Policy:
    """Create an active policy in `domain`. Raises InvalidInput (400) for a bad rule, an unknown
    role of the workspace or unknown facts, InsufficientPermission (403) when an agent's role lacks
    `write` on the domain, PolicyBudgetExceeded (409) when the active policies would cost more
    than the workspace's budget. Writes nothing when it raises."""
    errors: dict[str, list[str]] = {}
    rule = _clean_rule(rule, errors)
    if errors:
        raise InvalidInput("The policy has invalid fields; see `fields`.", fields=errors)
    _require_write(by, domain)
    role = _resolve_role(domain.workspace_id, required_role, errors)
    if errors:
        raise InvalidInput("The policy has invalid fields; see `fields`.", code="unknown_role", fields=errors)
    facts = _resolve_facts(domain, derived_from_ids, by)
    workspace = _lock_workspace(domain.workspace_id)
    _check_budget(workspace, adding=Policy(domain=domain, rule=rule, required_role=role))
    policy = Policy.objects.create(
        workspace_id=domain.workspace_id,
        domain=domain,
        rule=rule,
        required_role=role,
        active=True,
        created_by_agent=by.agent,
        created_by_user=by.user,
    )
    if facts:
        policy.derived_from.add(*facts)
    record_event(
        actor=by,
        verb="policy.proposed",
        workspace_id=domain.workspace_id,
        target=policy,
        detail={
            "domain": domain.label,
            "required_role": role.name if role else None,
            "derived_from": [f.pk for f in facts],
        },
    )
    return policy


@transaction.atomic
def supersede_policy(*, policy: Policy, rule: str, reason: str = "", by: Actor) -> Policy:
    """Replace `policy` with a new version (same domain, role and sources); the old row becomes
    inactive and points at its successor. A revision of a deactivated policy stays deactivated:
    only `activate_policy` (a person) turns a rule back on.

    Raises InvalidInput, InsufficientPermission (agents without `write`), StateConflict
    `policy_not_live` when the policy was already superseded, or PolicyBudgetExceeded when the
    longer revision of an active policy would take the active ones past the budget."""
    errors: dict[str, list[str]] = {}
    rule = _clean_rule(rule, errors)
    if len(reason) > REASON_MAX:
        errors["reason"] = [f"At most {REASON_MAX} characters."]
    if errors:
        raise InvalidInput("The policy has invalid fields; see `fields`.", fields=errors)
    _require_write(by, policy.domain)
    workspace = _lock_workspace(policy.workspace_id)
    policy = (
        Policy.objects.select_for_update(of=("self",)).select_related("domain__repo", "required_role").get(pk=policy.pk)
    )  # lock, then re-check
    if policy.superseded_by_id is not None:
        raise StateConflict(
            f"Policy {policy.pk} was already superseded; supersede its live successor instead.",
            code="policy_not_live",
        )
    if policy.active:
        revision = Policy(domain=policy.domain, rule=rule, required_role=policy.required_role)
        _check_budget(workspace, adding=revision, replacing=policy)
    now = timezone.now()
    new = Policy.objects.create(
        workspace_id=policy.workspace_id,
        domain_id=policy.domain_id,
        rule=rule,
        required_role_id=policy.required_role_id,
        active=policy.active,
        created_at=now,
        created_by_agent=by.agent,
        created_by_user=by.user,
    )
    sources = list(policy.derived_from.values_list("pk", flat=True))
    if sources:
        new.derived_from.add(*sources)
    was_active = policy.active
    policy.active, policy.superseded_by, policy.superseded_at, policy.supersede_reason = False, new, now, reason
    policy.save(update_fields=["active", "superseded_by", "superseded_at", "supersede_reason"])
    record_event(
        actor=by,
        verb="policy.superseded",
        workspace_id=policy.workspace_id,
        target=policy,
        detail={"successor": new.pk, "reason": reason, "was_active": was_active},
    )
    return new


def _set_active(*, policy: Policy, active: bool, by: Actor) -> Policy:
    _require_write(by, policy.domain)
    workspace = _lock_workspace(policy.workspace_id)
    policy = (
        Policy.objects.select_for_update(of=("self",)).select_related("domain__repo", "required_role").get(pk=policy.pk)
    )
    if policy.superseded_by_id is not None:
        raise StateConflict(
            f"Policy {policy.pk} was superseded; change its live successor instead.", code="policy_not_live"
        )
    if policy.active == active:
        return policy  # nothing changes, nothing to audit
    if active:
        _check_budget(workspace, adding=policy)
    policy.active = active
    policy.save(update_fields=["active"])
    record_event(
        actor=by,
        verb="policy.activated" if active else "policy.deactivated",
        workspace_id=policy.workspace_id,
        target=policy,
    )
    return policy


@transaction.atomic
def activate_policy(*, policy: Policy, by: Actor) -> Policy:
    """Put a policy back into every dispatch. Idempotent; StateConflict `policy_not_live` when superseded,
    PolicyBudgetExceeded (409) when the active policies would then cost more than the budget."""
    return _set_active(policy=policy, active=True, by=by)


@transaction.atomic
def deactivate_policy(*, policy: Policy, by: Actor) -> Policy:
    """Take a policy out of dispatches (kept for the record). Idempotent; StateConflict when superseded."""
    return _set_active(policy=policy, active=False, by=by)


@transaction.atomic
def set_policy_budget(*, workspace: Workspace, chars: int, by: Actor) -> Workspace:
    """Set how many characters the active policies may add to every dispatch (0..POLICY_BUDGET_MAX).
    Lowering it below the current cost keeps the active policies; only growth is refused after.
    Raises InvalidInput on `policy_budget_chars`."""
    if isinstance(chars, bool) or not isinstance(chars, int) or not 0 <= chars <= POLICY_BUDGET_MAX:
        raise InvalidInput(
            "The budget is out of range.",
            fields={"policy_budget_chars": [f"A whole number of characters, 0 to {POLICY_BUDGET_MAX}."]},
        )
    workspace = _lock_workspace(workspace.pk)
    before = workspace.policy_budget_chars
    if before == chars:
        return workspace
    workspace.policy_budget_chars = chars
    workspace.save(update_fields=["policy_budget_chars"])
    record_event(
        actor=by,
        verb="workspace.policy_budget_changed",
        workspace_id=workspace.pk,
        target=workspace,
        detail={"from": before, "to": chars, "active_chars": active_policy_chars(workspace.pk)},
    )
    return workspace
