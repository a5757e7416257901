"""Policies (SPEC §2, §4): normative rules derived from facts, one domain each.

Agents need `write` on the domain to propose or supersede a policy (SPEC §2, HTTP 403
`insufficient_memory_permission` otherwise); people acting in the pages are not grant-checked.
A policy is never edited in place: a new version supersedes it. Every active policy of a
workspace goes into every dispatch, so the character cost of those lines is computed here, on
the very line format the preamble uses (`policy_line`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.actors import Actor
from memory.audit import record_event
from memory.errors import InsufficientPermission, InvalidInput, StateConflict
from memory.models import Fact, GrantLevel, MemoryDomain, Policy, Role, Workspace
from memory.services.tenancy import effective_level

RULE_MAX = 2000
REASON_MAX = 500
DERIVED_FROM_MAX = 50


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


def active_policy_chars(workspace_id: int) -> int:
    """Characters the active policies add to every dispatch: their lines joined by newlines."""
    return len("\n".join(policy_line(p) for p in active_policies(workspace_id)))


def policy_budget(workspace: Workspace) -> dict[str, Any]:
    """`chars` the active policies cost each dispatch, the workspace's `budget`, and `over`."""
    chars = active_policy_chars(workspace.pk)
    return {"chars": chars, "budget": workspace.policy_budget_chars, "over": chars > workspace.policy_budget_chars}


def _require_write(by: Actor, domain: MemoryDomain) -> None:
    """Agents need `write` on the domain; people and the system are not grant-checked here."""
    agent = by.agent
    if agent is None:
        return
    if agent.workspace_id != domain.workspace_id:
        raise InvalidInput(
            "Unknown domain.", code="unknown_domain", fields={"domain": ["No such domain in this workspace."]}
        )
    if effective_level(role_id=agent.role_id, domain_id=domain.pk) != GrantLevel.WRITE:
        raise InsufficientPermission(
            f"Role {agent.role.name!r} needs `write` on domain {domain.label!r} to change its policies.",
            fields={"domain": [f"No write access to {domain.label!r}."]},
        )


def _clean_rule(rule: str, errors: dict[str, list[str]]) -> str:
    rule = rule.strip()
    if not rule:
        errors["rule"] = ["A rule is required."]
    elif len(rule) > RULE_MAX:
        errors["rule"] = [f"At most {RULE_MAX} characters."]
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
    `write` on the domain. Writes nothing when it raises."""
    errors: dict[str, list[str]] = {}
    rule = _clean_rule(rule, errors)
    if errors:
        raise InvalidInput("The policy has invalid fields; see `fields`.", fields=errors)
    _require_write(by, domain)
    role = _resolve_role(domain.workspace_id, required_role, errors)
    if errors:
        raise InvalidInput("The policy has invalid fields; see `fields`.", code="unknown_role", fields=errors)
    facts = _resolve_facts(domain, derived_from_ids, by)
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

    Raises InvalidInput, InsufficientPermission (agents without `write`), or StateConflict
    `policy_not_live` when the policy was already superseded."""
    errors: dict[str, list[str]] = {}
    rule = _clean_rule(rule, errors)
    if len(reason) > REASON_MAX:
        errors["reason"] = [f"At most {REASON_MAX} characters."]
    if errors:
        raise InvalidInput("The policy has invalid fields; see `fields`.", fields=errors)
    _require_write(by, policy.domain)
    policy = Policy.objects.select_for_update().get(pk=policy.pk)  # lock, then re-check
    if policy.superseded_by_id is not None:
        raise StateConflict(
            f"Policy {policy.pk} was already superseded; supersede its live successor instead.",
            code="policy_not_live",
        )
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
    policy = Policy.objects.select_for_update().get(pk=policy.pk)
    if policy.superseded_by_id is not None:
        raise StateConflict(
            f"Policy {policy.pk} was superseded; change its live successor instead.", code="policy_not_live"
        )
    if policy.active == active:
        return policy  # nothing changes, nothing to audit
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
    """Put a policy back into every dispatch. Idempotent; StateConflict `policy_not_live` when superseded."""
    return _set_active(policy=policy, active=True, by=by)


@transaction.atomic
def deactivate_policy(*, policy: Policy, by: Actor) -> Policy:
    """Take a policy out of dispatches (kept for the record). Idempotent; StateConflict when superseded."""
    return _set_active(policy=policy, active=False, by=by)
