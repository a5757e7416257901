"""An agent's private memory (SPEC §4): its working-memory scratchpad and its observations.

Both belong to one agent: no other agent, not even one of the same role, ever reads them. The
audit trail records that they changed and how long they are, never their text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from memory.actors import Actor
from memory.audit import record_event
from memory.errors import InvalidInput
from memory.models import Observation, WorkingMemory

if TYPE_CHECKING:
    from memory.models import Agent

NOTES_MAX = 20_000
OBSERVATION_MAX = 4_000


@transaction.atomic
def update_notes(*, agent: Agent, notes: str, by: Actor) -> WorkingMemory:
    """Replace the agent's scratchpad with `notes` (kept verbatim; empty clears it).

    Raises InvalidInput past NOTES_MAX characters; writes nothing then."""
    if len(notes) > NOTES_MAX:
        raise InvalidInput("The notes are too long.", fields={"notes": [f"At most {NOTES_MAX} characters."]})
    memory, _ = WorkingMemory.objects.select_for_update().get_or_create(agent=agent)
    before = len(memory.notes)
    memory.notes = notes
    memory.updated_at = timezone.now()
    memory.save(update_fields=["notes", "updated_at"])
    record_event(
        actor=by,
        verb="notes.updated",
        workspace_id=agent.workspace_id,
        target=memory,
        detail={"chars_before": before, "chars": len(notes)},
    )
    return memory


@transaction.atomic
def record_observation(*, agent: Agent, text: str, by: Actor) -> Observation:
    """Append an observation to the agent's private record; it can later be cited as a fact's source.

    Raises InvalidInput for empty text or text past OBSERVATION_MAX characters."""
    if not text.strip():
        raise InvalidInput("The observation is empty.", fields={"text": ["Text is required."]})
    if len(text) > OBSERVATION_MAX:
        raise InvalidInput("The observation is too long.", fields={"text": [f"At most {OBSERVATION_MAX} characters."]})
    observation = Observation.objects.create(workspace_id=agent.workspace_id, agent=agent, text=text)
    record_event(
        actor=by,
        verb="observation.recorded",
        workspace_id=agent.workspace_id,
        target=observation,
        detail={"chars": len(text)},
    )
    return observation
