"""The batch import path (ingest_facts) follows propose_fact's rules with the same outcomes:
new facts inserted in bulk, restatements and contradictions — against the database or earlier
items of the same batch — through the row-by-row path. Real model (the rules are semantic)."""

import pytest

from memory.actors import Actor
from memory.models import AuditEvent, Conflict, Fact, Veracity
from memory.services.batch import IngestItem, ingest_facts
from memory.services.facts import FactInput, propose_fact
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

SEQUENCE = [
    ("deploys", "Production deploys happen on Tuesdays.", Veracity.AGENT_INFERRED),
    ("database", "The primary database is PostgreSQL 16 with pgvector.", Veracity.AGENT_INFERRED),
    ("deploys", "Production deploys happen on Tuesdays.", Veracity.AGENT_INFERRED),  # restated in the batch
    ("cache", "The session cache lives in Redis with a 30 minute TTL.", Veracity.AGENT_INFERRED),
    ("cache", "The session cache lives in Redis with a 45 minute TTL.", Veracity.HUMAN_STATED),  # contradicts
    ("queues", "Background jobs run on Celery workers.", Veracity.AGENT_INFERRED),
    ("queues", "Emails are sent by a separate mailer service.", Veracity.AGENT_INFERRED),  # same topic, unrelated
]


def _state(domain):
    return sorted(
        (f.topic, f.content, f.mention_count, round(f.confidence, 6), f.superseded_by_id is None)
        for f in Fact.objects.filter(domain=domain)
    )


def test_ingest_gives_the_same_outcomes_and_state_as_proposing_one_by_one(world):
    # The sequence holds a person's statement (human_stated): an importer relaying people's words.
    importer = AgentFactory(workspace=world.workspace, role=world.coder_role, name="importer", relays_human_words=True)
    by = Actor.of_agent(importer)
    one_by_one = [
        propose_fact(
            domain=world.architecture, data=FactInput(topic=t, content=c, memory_type="decision", veracity=v), by=by
        )
        for t, c, v in SEQUENCE
    ]
    counts = ingest_facts(
        items=[
            IngestItem(domain=world.conventions, data=FactInput(topic=t, content=c, memory_type="decision", veracity=v))
            for t, c, v in SEQUENCE
        ],
        by=by,
        batch_size=64,
    )
    expected: dict[str, int] = {}
    for result in one_by_one:
        expected[result.outcome] = expected.get(result.outcome, 0) + 1
    assert counts == expected
    assert counts == {"created": 5, "re_mentioned": 1, "conflict_won": 1}
    assert _state(world.conventions) == _state(world.architecture)
    assert Conflict.objects.filter(domain=world.conventions).count() == 1
    ingested = Fact.objects.filter(domain=world.conventions)
    assert all(f.embedding is not None and f.created_by_agent_id == importer.pk for f in ingested)
    created_events = AuditEvent.objects.filter(
        verb="fact.created", target_id__in=[f.pk for f in ingested], target_type="fact"
    )
    assert created_events.count() == 5
    assert {e.detail["topic"] for e in created_events} == {"deploys", "database", "cache", "queues"}


def test_ingest_across_batches_matches_facts_already_in_the_database(world):
    by = Actor.of_agent(world.coder)
    existing = propose_fact(
        domain=world.architecture,
        data=FactInput(topic="deploys", content="Production deploys happen on Tuesdays.", memory_type="decision"),
        by=by,
    ).fact
    items = [
        IngestItem(
            domain=world.architecture,
            data=FactInput(topic=f"topic {i}", content=f"Service {i} owns the {i}th queue.", memory_type="decision"),
        )
        for i in range(5)
    ] + [
        IngestItem(
            domain=world.architecture,
            data=FactInput(topic="deploys", content="Production deploys happen on Tuesdays.", memory_type="decision"),
        )
    ]
    seen = []
    counts = ingest_facts(items=items, by=by, batch_size=2, progress=seen.append)
    assert counts == {"created": 5, "re_mentioned": 1}
    assert seen == [2, 2, 2]
    existing.refresh_from_db()
    assert existing.mention_count == 2
    assert Fact.objects.filter(domain=world.architecture, topic="deploys").count() == 1


def test_invalid_item_rejects_the_whole_import_before_writing(world):
    from memory.errors import InvalidInput

    by = Actor.of_agent(world.coder)
    items = [
        IngestItem(
            domain=world.architecture, data=FactInput(topic="fine", content="A fine fact.", memory_type="decision")
        ),
        IngestItem(domain=world.architecture, data=FactInput(topic="", content="No topic.", memory_type="decision")),
    ]
    with pytest.raises(InvalidInput):
        ingest_facts(items=items, by=by)
    assert not Fact.objects.filter(domain=world.architecture).exists()
