"""The audit trail: every service that changes state calls record_event inside its transaction.

Recording an event also queues its webhooks (memory.webhooks.emit): the deliveries are written in
the same transaction and sent after it commits."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import models

from memory import webhooks
from memory.actors import Actor
from memory.models import AuditEvent


def record_event(
    *,
    actor: Actor,
    verb: str,
    workspace_id: int | None,
    target: models.Model | None = None,
    detail: dict[str, Any] | None = None,
) -> AuditEvent:
    event = AuditEvent.objects.create(
        workspace_id=workspace_id,
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


def record_events(
    *,
    actor: Actor,
    verb: str,
    target_type: str,
    events: Iterable[tuple[int | None, int, dict[str, Any]]],
    at: datetime | None = None,
) -> None:
    """One event per target, like record_event writes, in one INSERT (batch paths, which may
    touch thousands of rows): `events` are (workspace_id, target_id, detail)."""
    created = AuditEvent.objects.bulk_create(
        AuditEvent(
            workspace_id=workspace_id,
            actor_agent=actor.agent,
            actor_user=actor.user,
            actor_label=actor.label,
            verb=verb,
            target_type=target_type,
            target_id=target_id,
            detail=detail,
            **({"created_at": at} if at is not None else {}),
        )
        for workspace_id, target_id, detail in events
    )
    webhooks.emit(created)
