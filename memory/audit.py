"""The audit trail: every service that changes state calls record_event inside its transaction.

Each event carries the domain of what it is about (AuditEvent.domain), so it is seen by exactly
the people who may see that domain (memory.access): taken from the target by the same lookups
`access.restrict` scopes that model with (a fact's, candidate's, policy's, conflict's or grant's
domain, a mention's fact's domain, a domain itself), or passed as `domain` by a service whose
target does not say it. An event about something of no domain is workspace-level.

Recording an event also queues its webhooks (memory.webhooks.emit): the deliveries are written in
the same transaction and sent after it commits."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import cache
from typing import Any

from django.apps import apps
from django.db import models

from memory import access, webhooks
from memory.actors import Actor, require_actor
from memory.models import AuditEvent, MemoryDomain

_UNSET: Any = object()


def domain_of(target: models.Model | None) -> int | None:
    """The id of the domain `target` belongs to (None: none, or a workspace-level row)."""
    if target is None or target.pk is None:
        return None
    lookup = access.scope_of(type(target))[1]
    if lookup is None:
        return None
    if lookup == "pk":
        return int(target.pk)
    *path, last = lookup.split("__")
    row: Any = target
    for name in path:  # e.g. a mention's fact: read through the relation (cached when loaded)
        row = getattr(row, name, None)
        if row is None:
            return None
    value = getattr(row, f"{last}_id", None)
    return int(value) if value is not None else None


def _pk(domain: MemoryDomain | int | None) -> int | None:
    return domain.pk if isinstance(domain, MemoryDomain) else domain


def record_event(
    *,
    actor: Actor,
    verb: str,
    workspace_id: int | None,
    target: models.Model | None = None,
    detail: dict[str, Any] | None = None,
    domain: MemoryDomain | int | None = _UNSET,
) -> AuditEvent:
    """Write one event. `domain` defaults to the target's (domain_of); pass it (or None) when the
    target does not carry the domain the event is about."""
    actor = require_actor(actor)  # nobody identified: refused, the caller's transaction undone
    domain_id = domain_of(target) if domain is _UNSET else _pk(domain)
    event = AuditEvent.objects.create(
        workspace_id=workspace_id,
        domain_id=domain_id,
        actor_agent=actor.agent,
        actor_user=actor.user,
        actor_label=actor.label,
        verb=verb,
        target_type=(target._meta.model_name or "") if target is not None else "",
        target_id=target.pk if target is not None else None,
        detail=detail or {},
    )
    webhooks.emit([event])
    return event


@cache
def _model_named(target_type: str) -> type[models.Model] | None:
    """The model an event's `target_type` (a model name) stands for, memory's first."""
    found = [m for m in apps.get_models() if m._meta.model_name == target_type]
    found.sort(key=lambda m: m._meta.app_label != "memory")
    return found[0] if found else None


def _domains_of(target_type: str, target_ids: list[int]) -> dict[int, int | None]:
    """target id → its domain id, for a batch of targets of one type (one query, or none)."""
    model = _model_named(target_type)
    lookup = access.scope_of(model)[1] if model is not None else None
    if model is None or lookup is None or not target_ids:
        return {}
    return dict(model._default_manager.filter(pk__in=target_ids).values_list("pk", lookup))


def record_events(
    *,
    actor: Actor,
    verb: str,
    target_type: str,
    events: Iterable[tuple[int | None, int, dict[str, Any]]],
    at: datetime | None = None,
) -> None:
    """One event per target, like record_event writes, in one INSERT (batch paths, which may
    touch thousands of rows): `events` are (workspace_id, target_id, detail). The targets'
    domains are read in one query."""
    actor = require_actor(actor)
    rows = list(events)
    domains = _domains_of(target_type, [target_id for _, target_id, _ in rows])
    created = AuditEvent.objects.bulk_create(
        AuditEvent(
            workspace_id=workspace_id,
            domain_id=domains.get(target_id),
            actor_agent=actor.agent,
            actor_user=actor.user,
            actor_label=actor.label,
            verb=verb,
            target_type=target_type,
            target_id=target_id,
            detail=detail,
            **({"created_at": at} if at is not None else {}),
        )
        for workspace_id, target_id, detail in rows
    )
    webhooks.emit(created)
