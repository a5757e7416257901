"""A batch (propose_facts) reads the neighbours of its items once and keeps them true as it writes:
a fact written on the row-by-row path, or the new facts written together before it, join what the
later items of their domain are compared with (memory.services.batch._join_nearby), so a later
item restating one re-mentions it instead of writing it twice. Real PostgreSQL and the real models
(the outcomes are semantic)."""

from __future__ import annotations

import pytest

from memory.actors import Actor
from memory.models import Fact
from memory.services.batch import IngestItem, propose_facts
from memory.services.facts import FactInput, create_episode

pytestmark = pytest.mark.django_db


def items_in(domain, texts: list[tuple[str, str]]) -> list[IngestItem]:
    return [IngestItem(domain=domain, data=FactInput(topic=t, content=c, memory_type="convention")) for t, c in texts]


def test_an_item_restating_one_written_row_by_row_re_mentions_it(world):
    """An item that takes the row-by-row path (here: it names an episode) adds its fact to what the
    later items of the batch are compared with, without reading their neighbours again: the next
    item restating it re-mentions it instead of writing it twice."""
    by = Actor.of_agent(world.coder)
    episode = create_episode(workspace_id=world.workspace.pk, by=by, kind="session")
    first = IngestItem(
        domain=world.architecture,
        data=FactInput(
            topic="builds", content="Builds run on GitHub Actions.", memory_type="convention", episode_id=episode.pk
        ),
    )
    texts = [("builds", "Builds run on GitHub Actions."), ("queues", "Emails are sent by a separate mailer service.")]
    results = propose_facts(items=[first, *items_in(world.architecture, texts)], by=by)
    assert [r.outcome for r in results] == ["created", "re_mentioned", "created"]
    assert results[1].fact.pk == results[0].fact.pk
    assert Fact.objects.filter(content="Builds run on GitHub Actions.").count() == 1


def test_an_item_restating_one_written_before_a_row_by_row_item_re_mentions_it(world):
    """The batch's new facts written together when a later item takes the row-by-row path join what
    the items after it are compared with: restating one of them re-mentions it."""
    by = Actor.of_agent(world.coder)
    episode = create_episode(workspace_id=world.workspace.pk, by=by, kind="session")
    unrelated = IngestItem(
        domain=world.architecture,
        data=FactInput(
            topic="queues",
            content="Emails are sent by a separate mailer service.",
            memory_type="convention",
            episode_id=episode.pk,
        ),
    )
    [first, again] = items_in(world.architecture, [("builds", "Builds run on GitHub Actions.")] * 2)
    results = propose_facts(items=[first, unrelated, again], by=by)
    assert [r.outcome for r in results] == ["created", "created", "re_mentioned"]
    assert results[2].fact.pk == results[0].fact.pk
    assert Fact.objects.filter(content="Builds run on GitHub Actions.").count() == 1
