"""As-of recall (issue 21): what Engram believed at a moment, and what was true at a moment.

Two independent, optional moments; with neither, every read path is exactly today's (the
current-only SQL gains nothing):

- `as_of` — transaction time. A fact counts when it was recorded by then (created_at ≤ as_of),
  not superseded by then (superseded_at null or > as_of), active then and not expired then
  (valid_until null or > as_of). Its status then is today's when it has not changed since
  (status_changed_at ≤ as_of), else the `from` of its first status audit event after as_of
  (fact.challenged / revalidated / deprecated / archived / status_changed); with no such event,
  `active`. A policy counts when created by then, not superseded by then, and active then (the
  first policy.activated / deactivated / superseded event after as_of tells; else today's flag).
- `valid_at` — valid time, among the facts believed at as_of (default now): observed_at ≤
  valid_at and (valid_until null or > valid_at). It replaces the expiry check: a fact that has
  expired since was true then.

What is not reconstructed (today's values are used): grants (a domain hidden today stays hidden),
the working memory, confidence, and the texts of facts (never edited in place anyway). Decay is
measured at as_of from the last mention recorded by then (FactMention rows; a fact's mentions
that moved with a merge count for the fact they moved to).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import Max, Q

from memory.models import AuditEvent, FactMention, Policy

if TYPE_CHECKING:
    from memory.models import Agent

POLICY_VERBS = ("policy.activated", "policy.deactivated", "policy.superseded")

# A fact's last mention as of %s (twice): today's when it is not later, else the latest
# mention recorded by then, else its creation.
_MENTIONED_THEN = (
    "(CASE WHEN memory_fact.last_mentioned_at <= %s THEN memory_fact.last_mentioned_at"
    " ELSE coalesce((SELECT max(m.created_at) FROM memory_factmention m"
    " WHERE m.fact_id = memory_fact.id AND m.created_at <= %s), memory_fact.created_at) END)"
)


def mentioned_then_sql(as_of: datetime | None) -> tuple[str, list[Any]]:
    """The SQL of a memory_fact row's last mention as of `as_of` (the column itself when None)."""
    if as_of is None:
        return "memory_fact.last_mentioned_at", []
    return _MENTIONED_THEN, [as_of, as_of]


def mentioned_then(facts: Sequence[tuple[int, datetime, datetime]], as_of: datetime) -> dict[int, datetime]:
    """(id, last_mentioned_at, created_at) → the last mention as of `as_of`; one query for the
    facts mentioned again since."""
    later = [pk for pk, mentioned, _ in facts if mentioned > as_of]
    found: dict[int, datetime] = {}
    if later:
        rows = (
            FactMention.objects.filter(fact_id__in=later, created_at__lte=as_of)
            .values("fact_id")
            .annotate(last=Max("created_at"))
            .values_list("fact_id", "last")
        )
        found = dict(rows)
    return {pk: mentioned if mentioned <= as_of else found.get(pk, created) for pk, mentioned, created in facts}


def policies_then(agent: Agent, as_of: datetime) -> list[Policy]:
    """The policies every dispatch carried at `as_of`, visible to the agent today, in preamble order."""
    candidates = list(
        Policy.objects.visible_to(agent)
        .filter(created_at__lte=as_of)
        .filter(Q(superseded_at__isnull=True) | Q(superseded_at__gt=as_of))
        .select_related("domain__repo", "required_role")
        .order_by("domain__name", "created_at", "pk")
    )
    if not candidates:
        return []
    first_after: dict[int, AuditEvent] = {}
    events = AuditEvent.objects.filter(
        target_type="policy", target_id__in=[p.pk for p in candidates], verb__in=POLICY_VERBS, created_at__gt=as_of
    ).order_by("target_id", "created_at", "id")
    for event in events:
        if event.target_id is not None:
            first_after.setdefault(event.target_id, event)
    chosen = []
    for policy in candidates:
        later = first_after.get(policy.pk)
        if later is None:
            active = policy.active
        elif later.verb == "policy.superseded":
            active = bool((later.detail or {}).get("was_active", True))
        else:
            active = later.verb == "policy.deactivated"  # it was deactivated later: active then
        if active:
            chosen.append(policy)
    return chosen


def header(as_of: datetime | None, valid_at: datetime | None) -> str:
    """The preamble's first line for an as-of call; empty for a current one."""
    parts = []
    if as_of is not None:
        parts.append(f"as believed at {as_of.isoformat()}")
    if valid_at is not None:
        parts.append(f"true at {valid_at.isoformat()}")
    if not parts:
        return ""
    return f"Memory {' and '.join(parts)} (policies and facts of then; your working memory is today's)."
