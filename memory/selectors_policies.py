"""Reads of policies for the agent API. They start from `selectors.policies_for_agent`, i.e.
`Policy.objects.visible_to(agent)`: another workspace's or a `none` domain's policy is not found."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Prefetch, QuerySet

from memory.errors import NotFound
from memory.models import Fact, Policy
from memory.selectors import policies_for_agent

if TYPE_CHECKING:
    from memory.models import Agent


def policy_list_for_agent(agent: Agent, *, active: bool | None = None) -> QuerySet[Policy]:
    """Visible policies, newest first; `active=True` keeps live active ones, `False` the rest.
    `derived_from` is prefetched as ids of facts the agent may see (never a `none` domain's)."""
    qs = policies_for_agent(agent, active_only=bool(active))
    if active is False:
        qs = qs.exclude(active=True, superseded_by__isnull=True)
    return qs.prefetch_related(
        Prefetch("derived_from", queryset=Fact.objects.visible_to(agent).only("pk").order_by("pk"))
    ).order_by("-created_at", "-id")


def policy_for_agent(agent: Agent, policy_id: int) -> Policy:
    """One visible policy. Raises NotFound (`policy_not_found`) for another workspace's or a
    `none` domain's policy, exactly as for a missing one."""
    policy = policies_for_agent(agent).filter(pk=policy_id).first()
    if policy is None:
        raise NotFound(f"No policy {policy_id}.", code="policy_not_found")
    return policy
