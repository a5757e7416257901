"""Issue 22: a preamble's or search's episode is answered at once (its id reserved by a query the
request sends anyway) and written by the recall buffer's flush. A write naming it right away —
`POST facts/` just after the preamble, served by this process or by another one — waits for the
row instead of answering `unknown_episode`; an id no recall is about to write is refused at once.

These run on committed data (transactional_db): the flusher writes on its own connection."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection
from django.utils import timezone

from memory import recalls
from memory.models import Episode, EpisodeFact
from tests.conftest import client_for

TASK = "Fix the flaky deploy pipeline for the billing service"


@pytest.fixture
def slow_flusher(settings, monkeypatch):
    """The production buffer (background mode, its own flusher thread), flushing only when woken:
    an episode stays unwritten until a write asks for it."""
    settings.ENGRAM_RECALL_MODE = "background"
    monkeypatch.setattr(recalls, "FLUSH_SECONDS", 60.0)
    fresh = recalls.RecallBuffer()
    monkeypatch.setattr(recalls, "buffer", fresh)
    return fresh


@pytest.fixture
def waiting(monkeypatch) -> threading.Event:
    """Set once a write, finding no row for its episode, waits for one (recalls.await_episode
    sleeps between looks, here at most 30 s: a slow CI thread still writes the row in time)."""
    waits = threading.Event()

    def sleep(seconds: float) -> None:
        waits.set()
        time.sleep(seconds)

    monkeypatch.setattr(recalls, "time", SimpleNamespace(monotonic=time.monotonic, sleep=sleep))
    monkeypatch.setattr(recalls, "AWAIT_EPISODE_SECONDS", 30.0)
    return waits


def _propose(agent, episode_id):
    body = {
        "domain": "architecture",
        "topic": "deploys",
        "content": "The deploy pipeline retries flaky steps twice.",
        "memory_type": "decision",
        "episode_id": episode_id,
    }
    return client_for(agent).post("/api/v1/facts/", body, format="json")


def test_a_fact_proposed_right_after_the_preamble_links_to_its_episode(transactional_db, world, slow_flusher):
    episode_id = client_for(world.coder).post("/api/v1/preamble/", {"task": TASK}, format="json").json()["episode_id"]
    assert slow_flusher.holds(episode_id)
    assert not Episode.objects.filter(pk=episode_id).exists()

    response = _propose(world.coder, episode_id)

    assert response.status_code == 201, response.content
    assert Episode.objects.get(pk=episode_id).kind == "dispatch"
    assert EpisodeFact.objects.filter(episode_id=episode_id, relation="written").exists()


def test_a_write_waits_for_an_episode_another_process_is_writing(transactional_db, world, slow_flusher, waiting):
    episode_id = recalls.reserve_episode_id()  # as another web process's recall would

    def other_process_flushes() -> None:
        try:
            if waiting.wait(timeout=30):  # only once the write has looked for the row and found none
                Episode.objects.create(pk=episode_id, workspace=world.workspace, agent=world.coder, kind="dispatch")
        finally:
            connection.close()

    writer = threading.Thread(target=other_process_flushes)
    writer.start()
    response = _propose(world.coder, episode_id)
    writer.join()

    assert waiting.is_set()
    assert response.status_code == 201, response.content


def test_another_agents_pending_episode_is_refused_once_written(transactional_db, world, slow_flusher):
    episode_id = client_for(world.coder2).post("/api/v1/preamble/", {"task": TASK}, format="json").json()["episode_id"]

    response = _propose(world.coder, episode_id)

    assert response.status_code == 400 and response.json()["code"] == "unknown_episode"
    assert Episode.objects.get(pk=episode_id).agent_id == world.coder2.pk  # written, not leaked


def test_an_episode_no_recall_is_about_to_write_is_refused_at_once(transactional_db, world, slow_flusher, waiting):
    hole = recalls.reserve_episode_id()  # reserved, never written (a crashed process) …
    later = Episode.objects.create(workspace=world.workspace, agent=world.coder, kind="dispatch")
    Episode.objects.filter(pk=later.pk).update(created_at=timezone.now() - timedelta(minutes=5))  # … long ago
    for episode_id in (hole, later.pk + 1_000_000):  # and an id never reserved
        response = _propose(world.coder, episode_id)
        assert response.status_code == 400 and response.json()["code"] == "unknown_episode"
        assert not waiting.is_set()


def test_the_flush_locks_its_facts_in_id_order_as_the_write_path_does(transactional_db, world, slow_flusher):
    """A proposal locks the live facts it compares in id order (nearby.live_rows). The flush's
    UPDATE locked its facts in the order its join read them: with the later fact stored first (the
    earlier one updated since, so its row moved) and a hash join, it held the later fact while
    waiting for the earlier one, which a proposal held while waiting for the later one — a deadlock,
    and a 503 to the agent. Here a writer holds the earlier fact, the flush starts, then the writer
    locks the later fact: both must finish."""
    from django.db import connections

    from memory.models import Fact
    from memory.services.nearby import live_rows
    from tests.factories import FactFactory

    earlier, later = FactFactory(domain=world.architecture), FactFactory(domain=world.architecture)
    Fact.objects.filter(pk=earlier.pk).update(confidence=0.5)  # its row now lies after the later fact's
    slow_flusher.add(None, [later.pk, earlier.pk])
    holding, go = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        from django.db import transaction

        try:
            with transaction.atomic():
                live_rows([earlier.pk], lock=True)
                holding.set()
                go.wait(10)
                live_rows([later.pk], lock=True)
        except BaseException as error:
            failures.append(error)
        finally:
            connections.close_all()

    def flusher() -> None:
        try:
            with connection.cursor() as cursor:  # the plan that reads the table's order
                cursor.execute("SET enable_nestloop = off; SET enable_mergejoin = off")
            slow_flusher.flush()
        except BaseException as error:
            failures.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer)]
    threads[0].start()
    assert holding.wait(10)
    threads.append(threading.Thread(target=flusher))
    threads[1].start()
    time.sleep(0.5)  # the flush reaches the earlier fact's lock and waits there
    go.set()
    for thread in threads:
        thread.join(30)
    assert failures == []
    assert sorted(Fact.objects.filter(pk__in=[earlier.pk, later.pk]).values_list("recall_count", flat=True)) == [1, 1]
