"""Working memory and observations (SPEC §4): private to one agent, audited, bounded."""

import pytest

from memory.actors import Actor
from memory.errors import InvalidInput
from memory.models import AuditEvent, Observation, WorkingMemory
from memory.selectors_notes import RECENT_OBSERVATIONS, notes_for
from memory.services.notes import NOTES_MAX, OBSERVATION_MAX, record_observation, update_notes


def test_update_notes_creates_then_replaces_the_scratchpad_verbatim(world):
    by = Actor.of_agent(world.coder)
    update_notes(agent=world.coder, notes="first", by=by)
    update_notes(agent=world.coder, notes="  second\n  line  ", by=by)
    assert WorkingMemory.objects.get(agent=world.coder).notes == "  second\n  line  "
    assert WorkingMemory.objects.filter(agent=world.coder).count() == 1
    events = AuditEvent.objects.filter(verb="notes.updated", actor_agent=world.coder)
    assert events.count() == 2
    assert "second" not in str(events.first().detail)  # the audit row never copies private text


def test_update_notes_refuses_oversized_notes_and_writes_nothing(world):
    before = AuditEvent.objects.count()
    with pytest.raises(InvalidInput) as caught:
        update_notes(agent=world.coder, notes="x" * (NOTES_MAX + 1), by=Actor.of_agent(world.coder))
    assert "notes" in caught.value.fields
    assert not WorkingMemory.objects.filter(agent=world.coder).exists()
    assert AuditEvent.objects.count() == before


def test_notes_may_be_cleared(world):
    by = Actor.of_agent(world.coder)
    update_notes(agent=world.coder, notes="something", by=by)
    update_notes(agent=world.coder, notes="", by=by)
    assert notes_for(world.coder)["notes"] == ""


def test_record_observation_is_audited(world):
    observation = record_observation(agent=world.coder, text="CI took 14 minutes.", by=Actor.of_agent(world.coder))
    assert observation.workspace == world.workspace
    assert AuditEvent.objects.filter(verb="observation.recorded", target_id=observation.pk).exists()


@pytest.mark.parametrize("text", ["", "   \n", "x" * (OBSERVATION_MAX + 1)])
def test_record_observation_refuses_empty_or_oversized_text(world, text):
    before = Observation.objects.count(), AuditEvent.objects.count()
    with pytest.raises(InvalidInput) as caught:
        record_observation(agent=world.coder, text=text, by=Actor.of_agent(world.coder))
    assert "text" in caught.value.fields
    assert (Observation.objects.count(), AuditEvent.objects.count()) == before


def test_notes_and_observations_are_private_even_within_a_role(world):
    update_notes(agent=world.coder, notes="coder secret", by=Actor.of_agent(world.coder))
    record_observation(agent=world.coder, text="coder saw this", by=Actor.of_agent(world.coder))
    other = notes_for(world.coder2)
    assert other == {"notes": "", "updated_at": None, "observations": []}
    mine = notes_for(world.coder)
    assert mine["notes"] == "coder secret"
    assert [o["text"] for o in mine["observations"]] == ["coder saw this"]


def test_notes_view_keeps_the_last_observations_oldest_first(world):
    by = Actor.of_agent(world.coder)
    for i in range(RECENT_OBSERVATIONS + 3):
        record_observation(agent=world.coder, text=f"obs {i}", by=by)
    texts = [o["text"] for o in notes_for(world.coder)["observations"]]
    assert texts == [f"obs {i}" for i in range(3, RECENT_OBSERVATIONS + 3)]
