"""Who may see and decide what in the review site (SPEC §1, issue: per-domain reviewers).

Workspace admins (and superusers) hold every domain of their workspaces; other members hold the
domains on which they have guardian's object permission `memory.review_domain`. Selectors call
these; templates never decide access."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from guardian.shortcuts import get_objects_for_user

from memory.models import MemoryDomain, Workspace, WorkspaceMembership


def workspace_for(user: Any, slug: str) -> Workspace:
    """The workspace if the person is a member (or superuser); 404 otherwise (no existence leak)."""
    workspace = Workspace.objects.for_user(user).filter(slug=slug).first()
    if workspace is None:
        raise Http404("No such workspace.")
    return workspace


def is_workspace_admin(user: Any, workspace: Workspace) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return WorkspaceMembership.objects.filter(user=user, workspace=workspace, is_admin=True).exists()


def reviewable_domains(user: Any, workspace: Workspace) -> QuerySet[MemoryDomain]:
    """The domains of `workspace` this person may see and decide in."""
    domains = MemoryDomain.objects.filter(workspace=workspace).select_related("repo")
    if is_workspace_admin(user, workspace):
        return domains
    if not WorkspaceMembership.objects.filter(user=user, workspace=workspace).exists():
        return domains.none()
    allowed = get_objects_for_user(user, "memory.review_domain", klass=domains, accept_global_perms=False)
    return domains.filter(pk__in=allowed.values("pk"))


def reviewable_domain_ids(user: Any, workspace_ids: list[int] | None = None) -> set[int]:
    """Domain ids across the person's workspaces (or the given ones) that they may review."""
    ids: set[int] = set()
    for workspace in Workspace.objects.for_user(user):
        if workspace_ids is None or workspace.pk in workspace_ids:
            ids.update(reviewable_domains(user, workspace).values_list("pk", flat=True))
    return ids
