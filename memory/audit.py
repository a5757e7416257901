"""The audit trail: every service that changes state calls record_event inside its transaction."""

from __future__ import annotations

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
