"""Creating, revoking and rotating agent keys. The plain key exists only in the return value."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from memory import access
from memory.actors import Actor, require_actor
from memory.audit import record_event
from memory.errors import InsufficientPermission, InvalidInput, StateConflict
from memory.models import Agent, Role, Workspace, generate_key, hash_key
from memory.services.tenancy import get_or_create_role, get_or_create_workspace

# The trust flags of an agent (issue 13): who sets them is checked here, and every change is audited.
TRUST_FLAGS = ("relays_human_words", "is_verifier")


def may_manage_trust(by: Actor, workspace_id: int) -> bool:
    """Whether `by` may set an agent's trust flags in that workspace: a superuser, an admin of the
    workspace (memory.access), or the system acting for an operator (management
    commands). Never an agent, never other staff."""
    by = require_actor(by)
    if by.is_agent:
        return False
    if by.is_system:
        return True
    return access.is_workspace_admin(by.user, workspace_id)  # the one rule: active admins, superusers


@transaction.atomic
def set_trust_flags(*, agent: Agent, by: Actor, **flags: bool) -> Agent:
    """Set `relays_human_words` and/or `is_verifier`. Raises InsufficientPermission (403,
    `not_workspace_admin`) unless may_manage_trust; one `agent.trust_changed` event per flag
    that changes, with its old and new value."""
    unknown = set(flags) - set(TRUST_FLAGS)
    if unknown:
        raise InvalidInput(f"Unknown trust flags: {sorted(unknown)}.", code="invalid_trust_flag")
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    changes = {name: bool(value) for name, value in flags.items() if bool(value) != getattr(agent, name)}
    if not changes:
        return agent
    if not may_manage_trust(by, agent.workspace_id):
        raise InsufficientPermission(
            "Only an admin of the agent's workspace may change its trust flags.", code="not_workspace_admin"
        )
    for name, value in changes.items():
        old = getattr(agent, name)
        setattr(agent, name, value)
        record_event(
            actor=by,
            verb="agent.trust_changed",
            workspace_id=agent.workspace_id,
            target=agent,
            detail={"flag": name, "old": old, "new": value},
        )
    agent.save(update_fields=list(changes))
    return agent


@transaction.atomic
def create_agent(
    *,
    workspace: Workspace,
    name: str,
    role: Role,
    by: Actor,
    relays_human_words: bool = False,
    is_verifier: bool = False,
) -> tuple[Agent, str]:
    """Create an agent and return it with its key (shown once, stored hashed). Trust flags asked
    for at creation go through set_trust_flags (the same check, the same audit events)."""
    if role.workspace_id != workspace.pk:
        raise InvalidInput("The role belongs to another workspace.", code="invalid_role")
    if Agent.objects.filter(workspace=workspace, name=name).exists():
        raise StateConflict(f"An agent named {name!r} already exists in {workspace.slug}.", code="agent_exists")
    key = generate_key()
    agent = Agent.objects.create(workspace=workspace, name=name, role=role, key_hash=hash_key(key), key_hint=key[:12])
    record_event(actor=by, verb="agent.created", workspace_id=workspace.pk, target=agent, detail={"role": role.name})
    flags: dict[str, Any] = {"relays_human_words": relays_human_words, "is_verifier": is_verifier}
    if any(flags.values()):
        agent = set_trust_flags(agent=agent, by=by, **flags)
    return agent, key


def create_agent_by_names(
    *,
    workspace_slug: str,
    name: str,
    role_name: str,
    by: Actor,
    relays_human_words: bool = False,
    is_verifier: bool = False,
) -> tuple[Agent, str]:
    """Create the workspace and role when missing, then the agent (manage.py create_agent)."""
    with transaction.atomic():
        workspace = get_or_create_workspace(slug=workspace_slug, by=by)
        role = get_or_create_role(workspace=workspace, name=role_name, by=by)
        return create_agent(
            workspace=workspace,
            name=name,
            role=role,
            by=by,
            relays_human_words=relays_human_words,
            is_verifier=is_verifier,
        )


@transaction.atomic
def revoke_agent(*, agent: Agent, by: Actor) -> Agent:
    """Revoke the agent's key; every later call with it gets 401."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    if agent.revoked_at is None:
        agent.revoked_at = timezone.now()
        agent.save(update_fields=["revoked_at"])
        record_event(actor=by, verb="agent.revoked", workspace_id=agent.workspace_id, target=agent)
    return agent


@transaction.atomic
def rotate_key(*, agent: Agent, by: Actor) -> str:
    """Issue a new key for the agent (the old one stops working) and return it."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    key = generate_key()
    agent.key_hash, agent.key_hint, agent.revoked_at = hash_key(key), key[:12], None
    agent.save(update_fields=["key_hash", "key_hint", "revoked_at"])
    record_event(actor=by, verb="agent.key_rotated", workspace_id=agent.workspace_id, target=agent)
    return key
