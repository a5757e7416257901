"""Faults on real processes: the database going away under writes, a worker killed mid-task,
races on one topic. Each test runs the real server or worker as a separate process."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from django.db import connection

from memory.actors import Actor
from memory.embeddings import embed_meaning
from memory.errors import FactNotLive
from memory.models import Fact
from memory.services.facts import FactInput, propose_fact, supersede_fact
from tests.factories import FactFactory
from tests.procs import ROOT, CeleryWorker, Redis, free_port, send_task, wait_for

pytestmark = [pytest.mark.slow]


def _manage(env: dict, *args: str, timeout: int = 300) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _post(url: str, body: dict, key: str, timeout: float = 20) -> tuple[int, dict]:
    request = urllib.request.Request(  # noqa: S310
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
    except OSError:
        return 0, {}


def test_database_stopped_during_writes_answers_503_recovers_and_keeps_every_acknowledged_write(tmp_path):
    """A private embedded PostgreSQL (its own ENGRAM_HOME) under a real web server."""
    home = tmp_path / "home"
    env = {
        **os.environ,
        "ENGRAM_HOME": str(home),
        "ENGRAM_DB_NAME": "engram_fault",
        "DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ENGRAM_RECALL_MODE": "background",
    }
    env.pop("DATABASE_URL", None)
    _manage(env, "migrate", "-v", "0")
    key = (
        _manage(env, "create_agent", "--workspace", "fault", "--name", "writer", "--role", "coder")
        .strip()
        .splitlines()[-1]
    )
    _manage(env, "create_domain", "--workspace", "fault", "ops")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "-w", "2", "-b", f"127.0.0.1:{port}", "--timeout", "60"],
        cwd=ROOT,
        env={**env, "ENGRAM_PRELOAD_MODEL": "1"},  # both workers load the model at boot, as in production
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/api/v1/facts/"
    acknowledged: list[int] = []
    statuses: list[int] = []
    try:
        wait_for(lambda: _post(url, {}, key)[0] == 400, timeout=90, what="the server")
        # Loading the embedding model takes seconds (more on a busy machine): wait for it with a
        # couple of writes before the writer starts, so its 20 s timeout measures the outage only.
        for warm in range(2):
            body = {
                "domain": "ops",
                "topic": f"warm-{warm}",
                "memory_type": "observation",
                "content": f"Warm-up {warm}.",
            }
            status, answer = _post(url, body, key, timeout=180)
            assert status == 201, answer
            acknowledged.append(answer["fact"]["id"])
        stop_writing = threading.Event()

        def writer() -> None:
            i = 0
            while not stop_writing.is_set():
                status, body = _post(
                    url,
                    {
                        "domain": "ops",
                        "topic": f"host-{i}",
                        "memory_type": "observation",
                        "content": f"Host web-{i} answered its health check in {i % 90 + 5} ms.",
                    },
                    key,
                )
                statuses.append(status)
                if status == 201:
                    acknowledged.append(body["fact"]["id"])
                elif status == 503:
                    assert body["code"] == "database_unavailable"
                i += 1
                time.sleep(0.05)

        thread = threading.Thread(target=writer)
        thread.start()
        wait_for(lambda: len(acknowledged) >= 5, timeout=60, what="writes before the outage")
        from config.embedded import ensure_embedded_postgres, stop_embedded_postgres

        stop_embedded_postgres(home)
        wait_for(lambda: 503 in statuses, timeout=60, what="a 503 while the database is down")
        time.sleep(2)
        before_restart = len(acknowledged)
        ensure_embedded_postgres(home, "engram_fault")
        wait_for(lambda: len(acknowledged) >= before_restart + 5, timeout=60, what="writes after the restart")
        stop_writing.set()
        thread.join(timeout=30)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    assert set(statuses) <= {201, 503}, f"unexpected statuses: {sorted(set(statuses))}"
    stored = _manage(
        env, "shell", "-c", "from memory.models import Fact; print(sorted(Fact.objects.values_list('id', flat=True)))"
    )
    assert set(acknowledged) <= set(json.loads(stored.strip().splitlines()[-1]))
    from config.embedded import stop_embedded_postgres

    stop_embedded_postgres(home)


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_while_embedding_leaves_the_task_for_the_next_worker(tmp_path):
    redis = Redis(tmp_path)
    fact = FactFactory(topic="deploys", content="Production deploys happen on Tuesdays.")
    db_name = connection.settings_dict["NAME"]
    log = tmp_path / "worker.log"
    os.environ["CELERY_VISIBILITY_TIMEOUT"] = "3"
    try:
        send_task(redis.url, "memory.tasks.embed_fact", fact.pk)
        first = CeleryWorker(redis.url, db_name, log)
        # The first task of a fresh worker loads the model (seconds): kill it in that window.
        wait_for(lambda: b"] received" in log.read_bytes(), timeout=60, what="the worker to take the task")
        first.kill()
        assert Fact.objects.get(pk=fact.pk).embedding is None
        second = CeleryWorker(redis.url, db_name, tmp_path / "worker2.log")
        try:
            wait_for(
                lambda: Fact.objects.get(pk=fact.pk).embedding is not None,
                timeout=90,
                what="the redelivered task to embed the fact",
            )
        finally:
            second.stop()
    finally:
        os.environ.pop("CELERY_VISIBILITY_TIMEOUT", None)
        redis.stop()


@pytest.mark.django_db(transaction=True)
def test_sixteen_concurrent_proposals_and_supersessions_on_one_topic_keep_the_invariants(world):

    propose_fact(
        domain=world.architecture,
        by=Actor.of_agent(world.coder),
        data=FactInput(topic="cache", content="The cache TTL is 60 seconds.", memory_type="convention"),
    )
    same = "The cache TTL is 60 seconds for every service."
    vector = embed_meaning("cache", same)
    barrier = threading.Barrier(16)
    outcomes: list[str] = []
    errors: list[Exception] = []

    def work(i: int) -> None:
        try:
            barrier.wait()
            if i % 2:
                result = propose_fact(
                    domain=world.architecture,
                    by=Actor.of_agent(world.coder),
                    embedding=vector,
                    data=FactInput(topic="cache", content=same, memory_type="convention"),
                )
                outcomes.append(result.outcome)
            else:
                head = Fact.objects.filter(topic="cache").live().order_by("-pk").first()
                supersede_fact(
                    fact=head, by=Actor.of_agent(world.planner), content=f"The cache TTL is {i + 61} seconds."
                )
                outcomes.append("superseded")
        except FactNotLive as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    live = list(Fact.objects.filter(topic="cache").live())
    everything = Fact.objects.filter(topic="cache")
    # One live head per chain: every non-live fact points at exactly one successor, no cycles.
    for fact in everything.exclude(superseded_by__isnull=True):
        assert fact.superseded_by_id != fact.pk
    assert len(outcomes) + len(errors) == 16
    superseded = outcomes.count("superseded")
    created = sum(o in {"created", "conflict_won", "conflict_lost"} for o in outcomes)
    assert everything.count() == 1 + superseded + created  # exact: re-mentions add no row
    mentions = sum(f.mention_count for f in everything)
    assert mentions == everything.count() + outcomes.count("re_mentioned")
    assert len(live) >= 1
    heads_per_chain = {}
    for fact in everything:
        node = fact
        while node.superseded_by_id is not None:
            node = Fact.objects.get(pk=node.superseded_by_id)
        heads_per_chain.setdefault(node.pk, 0)
    assert set(heads_per_chain) == {f.pk for f in live}
