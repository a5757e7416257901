"""QuerySet methods that read like English. `visible_to(agent)` is the only place that applies
workspaces and grants: every read path (API, preamble, search, MCP) starts from it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.db import models
from django.db.models import Exists, OuterRef, Q
from django.db.models.functions import Now

from memory.choices import FactStatus, GrantLevel, PromotionStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    from memory.models import Agent


def _none_grant_for(agent: Agent, domain_ref: str) -> Exists:
    # memory.models imports this module for its managers: look the model up in the registry
    # instead of importing it back.
    grants = apps.get_model("memory", "AccessGrant")
    return Exists(grants.objects.filter(role_id=agent.role_id, domain_id=OuterRef(domain_ref), level=GrantLevel.NONE))


class WorkspaceQuerySet(models.QuerySet):
    def for_user(self, user: AbstractBaseUser | AnonymousUser) -> WorkspaceQuerySet:
        """Workspaces a person may see: all for superusers, their memberships otherwise."""
        if not user.is_authenticated:
            return self.none()
        if getattr(user, "is_superuser", False):
            return self
        return self.filter(memberships__user=user).distinct()


class MemoryDomainQuerySet(models.QuerySet):
    def visible_to(self, agent: Agent) -> MemoryDomainQuerySet:
        """Domains of the agent's workspace on which its role does not hold `none`."""
        return self.filter(workspace_id=agent.workspace_id).exclude(_none_grant_for(agent, "pk"))


class FactQuerySet(models.QuerySet):
    def visible_to(self, agent: Agent) -> FactQuerySet:
        """Facts of the agent's workspace outside the domains its role holds `none` on."""
        return self.filter(workspace_id=agent.workspace_id).exclude(_none_grant_for(agent, "domain_id"))

    def in_workspace(self, workspace_id: int) -> FactQuerySet:
        return self.filter(workspace_id=workspace_id)

    def live(self) -> FactQuerySet:
        """Not superseded and not retired (active or challenged): what conflicts compare against."""
        return self.filter(superseded_by__isnull=True, status__in=[FactStatus.ACTIVE, FactStatus.CHALLENGED])

    def recallable(self, now: Any = None) -> FactQuerySet:
        """What agents may be shown: live, active, and not past valid_until (the database's
        clock unless `now` is given, so the SQL of a scope is the same from call to call)."""
        return self.filter(superseded_by__isnull=True, status=FactStatus.ACTIVE).filter(
            Q(valid_until__isnull=True) | Q(valid_until__gt=now or Now())
        )

    def needing_embedding(self) -> FactQuerySet:
        return self.filter(embedding__isnull=True)


class PolicyQuerySet(models.QuerySet):
    def visible_to(self, agent: Agent) -> PolicyQuerySet:
        """Policies of the agent's workspace outside `none` domains."""
        return self.filter(workspace_id=agent.workspace_id).exclude(_none_grant_for(agent, "domain_id"))

    def active(self) -> PolicyQuerySet:
        return self.filter(active=True, superseded_by__isnull=True)


class CandidateQuerySet(models.QuerySet):
    def visible_to(self, agent: Agent) -> CandidateQuerySet:
        """Promotion candidates of the agent's workspace outside the domains its role holds `none` on."""
        return self.filter(workspace_id=agent.workspace_id).exclude(_none_grant_for(agent, "domain_id"))

    def open(self) -> CandidateQuerySet:
        """Not decided yet (neither promoted nor denied)."""
        return self.exclude(promotion_status__in=[PromotionStatus.ACTIVE, PromotionStatus.DENIED])
