"""Creating, revoking and rotating agent keys. The plain key exists only in the return value."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from agents.models import Agent, generate_key, hash_key
from memory.actors import Actor
from memory.audit import record_event
from memory.errors import InvalidInput, StateConflict
from memory.models import Role, Workspace
from memory.services.tenancy import get_or_create_role, get_or_create_workspace


@transaction.atomic
def create_agent(*, workspace: Workspace, name: str, role: Role, by: Actor) -> tuple[Agent, str]:
    """Create an agent and return it with its key (shown once, stored hashed)."""
    if role.workspace_id != workspace.pk:
        raise InvalidInput("The role belongs to another workspace.", code="invalid_role")
    if Agent.objects.filter(workspace=workspace, name=name).exists():
        raise StateConflict(f"An agent named {name!r} already exists in {workspace.slug}.", code="agent_exists")
    key = generate_key()
    agent = Agent.objects.create(workspace=workspace, name=name, role=role, key_hash=hash_key(key), key_hint=key[:12])
    record_event(actor=by, verb="agent.created", workspace_id=workspace.pk, target=agent, detail={"role": role.name})
    return agent, key


def create_agent_by_names(*, workspace_slug: str, name: str, role_name: str, by: Actor) -> tuple[Agent, str]:
    """Create the workspace and role when missing, then the agent (manage.py create_agent)."""
    with transaction.atomic():
        workspace = get_or_create_workspace(slug=workspace_slug, by=by)
        role = get_or_create_role(workspace=workspace, name=role_name, by=by)
        return create_agent(workspace=workspace, name=name, role=role, by=by)


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
