"""The audit trail: every service that changes state calls record_event inside its transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import models

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
    return AuditEvent.objects.create(
        workspace_id=workspace_id,
        actor_agent=actor.agent,
        actor_user=actor.user,
        actor_label=actor.label,
        verb=verb,
        target_type=(target._meta.model_name or "") if target is not None else "",
        target_id=target.pk if target is not None else None,
        detail=detail or {},
    )


def record_events(
    *, actor: Actor, verb: str, events: Sequence[tuple[int | None, models.Model, dict[str, Any]]]
) -> None:
    """Several events of one verb in one INSERT (batch paths): (workspace_id, target, detail)."""
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                workspace_id=workspace_id,
                actor_agent=actor.agent,
                actor_user=actor.user,
                actor_label=actor.label,
                verb=verb,
                target_type=target._meta.model_name or "",
                target_id=target.pk,
                detail=detail,
            )
            for workspace_id, target, detail in events
        ]
    )
