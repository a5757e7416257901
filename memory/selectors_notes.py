"""Reads of an agent's private memory. Only the agent itself is ever given these: every query
filters on that one agent, never on its role or workspace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory.models import Observation, WorkingMemory

if TYPE_CHECKING:
    from memory.models import Agent

RECENT_OBSERVATIONS = 20


def notes_for(agent: Agent) -> dict[str, Any]:
    """The agent's scratchpad (`notes`, `updated_at`, empty and None before its first write) and
    its last RECENT_OBSERVATIONS observations, oldest first, as appended to the scratchpad view."""
    memory = WorkingMemory.objects.filter(agent=agent).only("notes", "updated_at").first()
    recent = list(
        Observation.objects.filter(agent=agent)
        .order_by("-created_at", "-id")
        .values("id", "text", "created_at")[:RECENT_OBSERVATIONS]
    )
    return {
        "notes": memory.notes if memory is not None else "",
        "updated_at": memory.updated_at if memory is not None else None,
        "observations": recent[::-1],
    }
