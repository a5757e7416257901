"""QuerySet methods that read like English. `visible_to(agent)` is the only place that applies
workspaces and grants: every read path (API, preamble, search, MCP) starts from it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.db import models
from django.db.models import BooleanField, Case, CharField, Exists, F, OuterRef, Q, Subquery, Value, When
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Now

from memory.choices import FactStatus, GrantLevel, PromotionStatus

if TYPE_CHECKING:
    from datetime import datetime

    from memory.models import Agent


def _none_grant_for(agent: Agent, domain_ref: str) -> Exists:
    # memory.models imports this module for its managers: look the model up in the registry
    # instead of importing it back.
    grants = apps.get_model("memory", "AccessGrant")
    return Exists(grants.objects.filter(role_id=agent.role_id, domain_id=OuterRef(domain_ref), level=GrantLevel.NONE))


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

    def of_topics(self, keys: Iterable[tuple[int, str]]) -> FactQuerySet:
        """Facts of any of the (domain id, topic) `keys`, in one condition whatever their number: a
        semi-join against the keys unnested from two arrays, which PostgreSQL runs as one lookup per
        key in fact_live_by_topic (an OR of one `Q(domain_id=…, topic=…)` per key cost Django a
        filter to build and compile per key, and PostgreSQL a planning branch per key). The
        redundant topic array keeps it fast on a table not analyzed yet (a new database's first
        writes), where the planner would otherwise scan the keys again for every live fact."""
        pairs = sorted(set(keys))
        topics = [topic for _, topic in pairs]
        return self.filter(
            RawSQL(
                '"memory_fact"."topic" = ANY(%s::text[]) AND ("memory_fact"."domain_id", "memory_fact"."topic") IN '
                "(SELECT * FROM unnest(%s::bigint[], %s::text[]))",
                (topics, [domain_id for domain_id, _ in pairs], topics),
                output_field=BooleanField(),
            )
        )

    def live(self) -> FactQuerySet:
        """Not superseded and not retired (active or challenged): what conflicts compare against."""
        return self.filter(superseded_by__isnull=True, status__in=[FactStatus.ACTIVE, FactStatus.CHALLENGED])

    def recallable(self, now: Any = None) -> FactQuerySet:
        """What agents may be shown: live, active, and not past valid_until (the database's
        clock unless `now` is given, so the SQL of a scope is the same from call to call)."""
        return self.filter(superseded_by__isnull=True, status=FactStatus.ACTIVE).filter(
            Q(valid_until__isnull=True) | Q(valid_until__gt=now or Now())
        )

    def believed_at(self, moment: datetime) -> FactQuerySet:
        """As-of recall, transaction time: facts recorded by `moment`, not yet superseded then, and
        active then (status_then). Expiry is not applied here (see recallable_then)."""
        return (
            self.filter(created_at__lte=moment)
            .filter(Q(superseded_at__isnull=True) | Q(superseded_at__gt=moment))
            .alias(status_then=status_then(moment))
            .filter(status_then=FactStatus.ACTIVE)
        )

    def true_at(self, moment: datetime) -> FactQuerySet:
        """As-of recall, valid time: observed by `moment` and not past valid_until at it."""
        return self.filter(observed_at__lte=moment).filter(Q(valid_until__isnull=True) | Q(valid_until__gt=moment))

    def recallable_then(self, *, as_of: datetime | None = None, valid_at: datetime | None = None) -> FactQuerySet:
        """What agents would be shown as believed at `as_of` (default now) and true at `valid_at`
        (default: not expired at `as_of`). With neither, exactly `recallable()`."""
        if as_of is None and valid_at is None:
            return self.recallable()
        qs = (
            self.believed_at(as_of)
            if as_of is not None
            else self.filter(superseded_by__isnull=True, status=FactStatus.ACTIVE)
        )
        if valid_at is not None:
            return qs.true_at(valid_at)
        return qs.filter(Q(valid_until__isnull=True) | Q(valid_until__gt=as_of))

    def needing_embedding(self) -> FactQuerySet:
        return self.filter(Q(embedding__isnull=True) | Q(content_embedding__isnull=True))


# The audit verbs that move a fact's status; each carries the status it left in detail["from"].
STATUS_VERBS = ("fact.challenged", "fact.revalidated", "fact.deprecated", "fact.archived", "fact.status_changed")


def status_then(moment: datetime) -> Case:
    """A fact's status at `moment`: today's when it has not changed since (status_changed_at ≤
    moment), else the `from` of its first status event after `moment`; `active` when no such
    event exists (facts are created active; rows changed outside the services left no trail)."""
    events = apps.get_model("memory", "AuditEvent").objects.filter(
        target_type="fact", target_id=OuterRef("pk"), verb__in=STATUS_VERBS, created_at__gt=moment
    )
    first = events.order_by("created_at", "id").annotate(previous=KT("detail__from")).values("previous")[:1]
    return Case(
        When(status_changed_at__lte=moment, then=F("status")),
        default=Coalesce(Subquery(first), Value(FactStatus.ACTIVE)),
        output_field=CharField(),
    )


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
