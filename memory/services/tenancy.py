"""Workspaces, repos, roles, domains and grants (SPEC §1–§2)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from memory.actors import Actor
from memory.audit import record_event
from memory.errors import InvalidInput, NotFound
from memory.models import AccessGrant, GrantLevel, MemoryDomain, Repo, Role, Workspace

if TYPE_CHECKING:
    from memory.models import Agent

_LABEL = re.compile(r"^(?:repo:(?P<repo>[-a-zA-Z0-9_]+)/)?(?P<name>[-a-zA-Z0-9_]+)$")


def parse_domain_label(label: str) -> tuple[str | None, str]:
    """`architecture` → (None, "architecture"); `repo:web/context` → ("web", "context")."""
    match = _LABEL.match(label.strip())
    if not match:
        raise InvalidInput(
            f"{label!r} is not a domain label: use `name` or `repo:<slug>/name`.",
            code="invalid_domain",
            fields={"domain": ["Use `name` or `repo:<slug>/name`."]},
        )
    return match.group("repo"), match.group("name")


def unknown_domain(shown: str) -> InvalidInput:
    """The one answer for a domain an agent may not name: a missing domain and one its role
    holds `none` on read the same, so an answer never tells that a hidden domain exists."""
    return InvalidInput(
        f"Unknown domain {shown!r}.",
        code="unknown_domain",
        fields={"domain": [f"No domain {shown!r} in this workspace."]},
    )


def require_visible_domain(agent: Agent, domain: MemoryDomain) -> None:
    """Writes resolve domains by the rule reads use (`MemoryDomain.objects.visible_to`): raise
    `unknown_domain` (400) for another workspace's domain or one the agent's role holds `none` on."""
    if (hidden := hidden_domains(agent, [domain]).get(domain.pk)) is not None:
        raise hidden


def hidden_domains(agent: Agent, domains: Iterable[MemoryDomain]) -> dict[int, InvalidInput]:
    """require_visible_domain for several domains in one query: the `unknown_domain` error of each
    domain (by pk) the agent may not write to; a visible domain has no entry."""
    wanted = {domain.pk: domain for domain in domains}
    if not wanted:
        return {}
    visible = set(MemoryDomain.objects.visible_to(agent).filter(pk__in=wanted).values_list("pk", flat=True))
    return {pk: unknown_domain(domain.label) for pk, domain in wanted.items() if pk not in visible}


@transaction.atomic
def get_or_create_workspace(*, slug: str, name: str = "", by: Actor) -> Workspace:
    workspace, created = Workspace.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    if created:
        record_event(actor=by, verb="workspace.created", workspace_id=workspace.pk, target=workspace)
    return workspace


@transaction.atomic
def get_or_create_repo(*, workspace: Workspace, slug: str, by: Actor) -> Repo:
    repo, created = Repo.objects.get_or_create(workspace=workspace, slug=slug, defaults={"name": slug})
    if created:
        record_event(actor=by, verb="repo.created", workspace_id=workspace.pk, target=repo)
    return repo


@transaction.atomic
def get_or_create_role(*, workspace: Workspace, name: str, by: Actor) -> Role:
    role, created = Role.objects.get_or_create(workspace=workspace, name=name)
    if created:
        record_event(actor=by, verb="role.created", workspace_id=workspace.pk, target=role)
    return role


@transaction.atomic
def create_domain(
    *, workspace: Workspace, name: str, repo: Repo | None = None, description: str = "", by: Actor
) -> MemoryDomain:
    """Create a domain and give `write` on it to every role that exists now (SPEC §2).

    Returns the existing domain unchanged when it is already there."""
    if repo is not None and repo.workspace_id != workspace.pk:
        raise InvalidInput("The repo belongs to another workspace.", code="invalid_repo")
    existing = MemoryDomain.objects.filter(workspace=workspace, repo=repo, name=name).first()
    if existing:
        return existing
    domain = MemoryDomain.objects.create(workspace=workspace, repo=repo, name=name, description=description)
    roles = list(Role.objects.filter(workspace=workspace).order_by("pk"))
    AccessGrant.objects.bulk_create([AccessGrant(role=r, domain=domain, level=GrantLevel.WRITE) for r in roles])
    record_event(
        actor=by,
        verb="domain.created",
        workspace_id=workspace.pk,
        target=domain,
        detail={"label": domain.label, "write_granted_to": [r.name for r in roles]},
    )
    return domain


def resolve_domain(
    *, workspace_id: int, label: str | None = None, name: str | None = None, repo_slug: str | None = None
) -> MemoryDomain:
    """Find a domain by label (`repo:<slug>/name`) or by name plus optional repo. Raises NotFound."""
    if label is not None:
        repo_slug, name = parse_domain_label(label)
    qs = MemoryDomain.objects.select_related("repo").filter(workspace_id=workspace_id, name=name)
    qs = qs.filter(repo__slug=repo_slug) if repo_slug else qs.filter(repo__isnull=True)
    domain = qs.first()
    if domain is None:
        shown = f"repo:{repo_slug}/{name}" if repo_slug else name
        raise NotFound(
            f"No domain {shown!r} in this workspace.",
            code="unknown_domain",
            fields={"domain": [f"Unknown domain {shown!r}."]},
        )
    return domain


@transaction.atomic
def set_grant(*, role: Role, domain: MemoryDomain, level: str, by: Actor) -> AccessGrant:
    """Set one (role, domain) grant; audited with the previous level."""
    if level not in GrantLevel.values:
        raise InvalidInput(
            f"Grant level must be one of {', '.join(GrantLevel.values)}.",
            code="invalid_grant_level",
            fields={"level": ["Use none, read or write."]},
        )
    if role.workspace_id != domain.workspace_id:
        raise InvalidInput("Role and domain belong to different workspaces.", code="invalid_grant")
    grant = AccessGrant.objects.select_for_update().filter(role=role, domain=domain).first()
    previous = grant.level if grant else f"{GrantLevel.READ} (default)"
    if grant is None:
        grant = AccessGrant.objects.create(role=role, domain=domain, level=level)
    else:
        grant.level = level
        grant.updated_at = timezone.now()
        grant.save(update_fields=["level", "updated_at"])
    record_event(
        actor=by,
        verb="grant.changed",
        workspace_id=domain.workspace_id,
        target=grant,
        detail={"role": role.name, "domain": domain.label, "from": previous, "to": level},
    )
    return grant


def effective_level(*, role_id: int, domain_id: int) -> str:
    """The grant row's level, or `read` when there is none (reads fail open, SPEC §2)."""
    level = AccessGrant.objects.filter(role_id=role_id, domain_id=domain_id).values_list("level", flat=True).first()
    return level or GrantLevel.READ
