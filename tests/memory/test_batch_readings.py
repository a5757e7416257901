"""A batch whose write stops for pairs its plan did not read (issue 38): write_planned reads them
outside the transaction and writes the same plan again as often as the batch has comparisons, not
three times (the bench's batches of 100 failed with 409 domain_busy); and a batch's plan reads the
pairs of a few more of each item's nearest live facts than the write compares, so a fact moving
into an item's nearest when an earlier item decides a conflict has its pair read already."""

from __future__ import annotations

import pytest

from memory import pair_model
from memory.actors import Actor
from memory.embeddings import embed_meanings
from memory.errors import StateConflict
from memory.inference import NeedsInference
from memory.services import batch, facts, locking
from memory.services.nearby import NEIGHBOURS


def _stopping(times: int):
    """A write step that stops for a reading `times` times, each stop's work letting it get one
    step further, then writes."""
    done = {"read": 0, "writes": 0}

    def write(_plan):
        done["writes"] += 1
        if done["read"] < times:
            raise NeedsInference("unread", lambda: done.__setitem__("read", done["read"] + 1))
        return "written"

    return write, done


def _write(write, **kw):
    return locking.write_planned(
        lambda _hint: None, write, domains=lambda _: (), changed=StateConflict("busy", code="domain_busy"), **kw
    )


@pytest.mark.django_db(transaction=True)
def test_by_default_a_plan_is_written_again_three_times_at_most():
    write, done = _stopping(locking.ATTEMPTS + 1)
    with pytest.raises(StateConflict):
        _write(write)
    assert done["read"] == locking.ATTEMPTS  # a plan that keeps needing readings is given up


@pytest.mark.django_db(transaction=True)
def test_a_write_allowed_more_readings_reads_them_all_and_writes_once_through():
    write, done = _stopping(7)
    assert _write(write, readings=8) == "written"
    assert done == {"read": 7, "writes": 8}


def test_a_batch_allows_two_readings_per_item(monkeypatch, world):
    seen = {}
    real = locking.write_planned

    def spy(plan, write, **kw):
        seen.update(kw)
        return real(plan, write, **kw)

    monkeypatch.setattr(batch, "write_planned", spy)
    items = [
        batch.IngestItem(
            domain=world.architecture,
            data=facts.FactInput(
                topic=f"t{i}", content=f"Service {i} listens on port 80{i:02d}.", memory_type="decision"
            ),
        )
        for i in range(5)
    ]
    batch.propose_facts(items=items, by=Actor.of_agent(world.coder))
    assert seen["readings"] == 2 * len(items) + 1


def test_a_batch_plan_reads_the_pairs_of_more_neighbours_than_the_write_compares(monkeypatch, world):
    asked = []
    monkeypatch.setattr(facts, "nearest_ids_many", lambda queries, limit: asked.append(limit) or [[] for _ in queries])
    monkeypatch.setattr(facts, "read_ahead", lambda statements: list(statements))
    monkeypatch.setattr(pair_model, "enabled", lambda: True)
    meaning = embed_meanings([("t", "Service a listens on port 8000.")])[0]
    facts.read_before_locking([((world.architecture.pk, "t"), "Service a listens on port 8000.", meaning)])
    facts.read_before_locking(
        [((world.architecture.pk, "t"), "Service a listens on port 8000.", meaning)], beyond=batch.PLAN_BEYOND
    )
    assert asked == [NEIGHBOURS, NEIGHBOURS + batch.PLAN_BEYOND]
