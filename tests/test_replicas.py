"""Read replicas (issue 22, point 2): recall reads go to a healthy replica, every write to the
primary; a caller reads its own writes; a lagging or dead replica is skipped without one error.

The router's rules are checked with a replica whose health is given (no second server). The rest
runs against a real streaming standby of the embedded PostgreSQL (bench.replica: pg_basebackup and
a hot standby on a socket of its own). Which server answered is proven by the data: with the
standby's replay paused, a fact written on the primary is missing from the standby's answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from prometheus_client import REGISTRY

from bench.replica import Standby, primary_of_settings, start_standby
from memory import replicas
from memory.models import Fact, MemoryDomain
from memory.replicas import monitor
from memory.routing import ReplicaRouter, RequestRouting, read_connection, recall_write, request_routing
from tests.conftest import World, client_for
from tests.factories import FactFactory
from tests.procs import wait_for

ROOT = Path(__file__).resolve().parent.parent
MIRROR = "replica_mirror"  # reads the test database on the primary: a replica in name only
STANDBY = "replica_standby"  # reads the test database on the real standby
TUESDAYS = "Production deploys happen on Tuesdays."

on_the_standby = pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, STANDBY])


def served(by: str) -> float:
    """engram_replica_reads_total{served_by=by}: requests that could read a replica, by who served them."""
    return REGISTRY.get_sample_value("engram_replica_reads_total", {"served_by": by}) or 0.0


@pytest.fixture(scope="module", autouse=True)
def replica_aliases(django_db_setup: None) -> Iterator[None]:
    """Both aliases exist before any test of the module starts: a Django test may only use the
    aliases it knew then. Each reads the test database, as DATABASE_REPLICA_URLS would add it."""
    default = connections[DEFAULT_DB_ALIAS].settings_dict
    for alias in (MIRROR, STANDBY):
        connections.settings[alias] = {  # settings.DATABASES itself
            **default,
            "OPTIONS": {**default["OPTIONS"], "connect_timeout": 2},
            "TEST": {**default["TEST"], "MIRROR": DEFAULT_DB_ALIAS},
        }
    yield
    monitor.reset()
    for alias in (MIRROR, STANDBY):
        _forget_connection(alias)
        connections.settings.pop(alias)


def _forget_connection(alias: str) -> None:
    """Close this thread's connection to `alias` and drop it: the next one reads the settings anew
    (pytest-django runs transactional tests last, so this module may be set up twice)."""
    if hasattr(connections._connections, alias):
        connections[alias].close()
        del connections[alias]


@pytest.fixture
def mirror(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """MIRROR as the one replica, healthy with no lag until a test says otherwise."""
    settings.ENGRAM_DATABASE_REPLICAS = [MIRROR]
    monkeypatch.setattr(replicas, "_connect", lambda alias: SimpleNamespace(closed=False, close=lambda: None))
    monkeypatch.setattr(replicas, "measure_lag", lambda conn: 0.0)
    # No checker thread: its next check would undo a state the test set (mark_down) at any moment.
    monkeypatch.setattr(monitor, "_ensure_thread", lambda: None)
    monitor.reset()
    monitor.refresh()
    yield MIRROR
    settings.ENGRAM_DATABASE_REPLICAS = []
    monitor.reset()


@pytest.fixture(scope="module")
def standby(replica_aliases: None) -> Iterator[Standby]:
    """A streaming standby of the embedded cluster, the test database included (one per module)."""
    host, port = primary_of_settings()
    server = start_standby(host, port)
    connections.settings[STANDBY].update(HOST=server.socket_dir, PORT=str(server.port))
    _forget_connection(STANDBY)
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture
def replica(standby: Standby, world: World, settings: Any) -> Iterator[Standby]:
    """STANDBY as the one replica, caught up with the world's rows (agents' keys included)."""
    if not standby.running:
        standby.start()
    standby.resume_replay()
    standby.wait_caught_up()
    settings.ENGRAM_DATABASE_REPLICAS = [STANDBY]
    settings.ENGRAM_REPLICA_MAX_LAG_SECONDS = 300  # a paused replay stays usable unless a test says otherwise
    monitor.reset()
    wait_for(lambda: monitor.refresh() or monitor.is_healthy(STANDBY), timeout=10, what="the standby to be healthy")
    yield standby
    settings.ENGRAM_DATABASE_REPLICAS = []
    monitor.reset()
    _forget_connection(STANDBY)
    if standby.running:
        standby.resume_replay()
    cache.clear()  # pins


def propose(agent_client: Any, topic: str, content: str) -> int:
    """A fact written through the API (on the primary). Topics differ: no conflict between them."""
    fact = {"domain": "architecture", "topic": topic, "content": content, "memory_type": "convention"}
    response = agent_client.post("/api/v1/facts/", fact, format="json")
    assert response.status_code == 201, response.content
    return int(response.json()["fact"]["id"])


def listed(agent_client: Any) -> set[int]:
    response = agent_client.get("/api/v1/facts/")
    assert response.status_code == 200, response.content
    return {fact["id"] for fact in response.json()["results"]}


def ids(response: Any, key: str) -> set[int]:
    try:
        return {item["id"] for item in response.json()[key]}
    except (KeyError, TypeError, ValueError):
        return set()


# --- The router's rules -------------------------------------------------------------------


@pytest.mark.django_db
def test_without_replicas_the_router_and_middleware_change_nothing(world, settings, api):
    settings.ENGRAM_DATABASE_REPLICAS = []
    router = ReplicaRouter()
    with request_routing(RequestRouting(replica_reads=True)):
        assert router.db_for_read(Fact) is None
        assert router.db_for_write(Fact) is None
    assert router.allow_migrate(DEFAULT_DB_ALIAS, "memory") is None
    before = {by: served(by) for by in ("replica", "pinned", "no_replica", "after_error")}
    response = api.post(
        "/api/v1/facts/",
        {"domain": "architecture", "topic": "t", "content": TUESDAYS, "memory_type": "convention"},
        format="json",
    )
    assert response.status_code == 201 and "engram_primary" not in response.cookies
    assert api.get("/api/v1/facts/").status_code == 200
    assert {by: served(by) for by in before} == before


def test_an_opted_in_request_reads_from_a_healthy_replica_and_writes_to_the_primary(mirror):
    router = ReplicaRouter()
    assert router.db_for_read(Fact) == DEFAULT_DB_ALIAS  # outside a request: Celery, commands, threads
    with request_routing(RequestRouting(replica_reads=True)) as state:
        assert Fact.objects.all().db == mirror
        assert read_connection(Fact).alias == mirror
        assert router.db_for_write(Fact) == DEFAULT_DB_ALIAS
        assert state.used == {mirror}
    with request_routing(RequestRouting()):  # a write request never opted in
        assert router.db_for_read(Fact) == DEFAULT_DB_ALIAS


def test_a_write_pins_the_rest_of_its_request_to_the_primary_but_a_recall_write_does_not(mirror):
    router = ReplicaRouter()
    with request_routing(RequestRouting(replica_reads=True)) as state:
        with recall_write():
            assert router.db_for_write(Fact) == DEFAULT_DB_ALIAS
        assert not state.wrote and Fact.objects.all().db == mirror
        assert router.db_for_write(Fact) == DEFAULT_DB_ALIAS
        assert state.wrote and Fact.objects.all().db == DEFAULT_DB_ALIAS
    with request_routing(RequestRouting(replica_reads=True, recall=True)) as state:
        router.db_for_write(Fact)  # a search's own records
        assert not state.wrote and Fact.objects.all().db == mirror


def test_a_pinned_caller_reads_from_the_primary(mirror):
    with request_routing(RequestRouting(replica_reads=True, pinned=True)):
        assert Fact.objects.all().db == DEFAULT_DB_ALIAS


@pytest.mark.django_db(transaction=True)
def test_reads_inside_a_transaction_go_to_the_primary(mirror):
    with request_routing(RequestRouting(replica_reads=True)) as state:
        with transaction.atomic():
            assert Fact.objects.all().db == DEFAULT_DB_ALIAS
        assert Fact.objects.all().db == mirror
        with transaction.atomic():
            assert Fact.objects.select_for_update().db == DEFAULT_DB_ALIAS
        assert state.wrote  # a row lock announces a write: the rest of the request reads the primary


def test_a_lagging_or_unreachable_replica_is_skipped(mirror, settings, monkeypatch):
    settings.ENGRAM_REPLICA_MAX_LAG_SECONDS = 10
    monkeypatch.setattr(replicas, "measure_lag", lambda conn: 12.5)
    monitor.refresh()
    assert monitor.healthy([mirror]) == []
    [state] = monitor.states()
    assert state.report()["ok"] is False and "lag 12.5 s is over the bound of 10 s" in state.error
    with request_routing(RequestRouting(replica_reads=True)):
        assert Fact.objects.all().db == DEFAULT_DB_ALIAS
    settings.ENGRAM_REPLICA_MAX_LAG_SECONDS = 20  # the bound is read at each decision
    assert monitor.healthy([mirror]) == [mirror]

    def unreachable(conn: Any) -> float:
        raise OperationalError("connection refused")

    monkeypatch.setattr(replicas, "measure_lag", unreachable)
    monitor.refresh()
    assert monitor.healthy([mirror]) == []
    assert monitor.states()[0].report()["error"] == "OperationalError: connection refused"
    with request_routing(RequestRouting(replica_reads=True)):
        assert Fact.objects.all().db == DEFAULT_DB_ALIAS


def test_replicas_are_never_migrated_and_relations_span_them(mirror):
    router = ReplicaRouter()
    assert router.allow_migrate(mirror, "memory") is False
    assert router.allow_migrate(DEFAULT_DB_ALIAS, "memory") is None
    fact, domain = Fact(), MemoryDomain()
    fact._state.db, domain._state.db = mirror, DEFAULT_DB_ALIAS
    assert router.allow_relation(fact, domain) is True


@pytest.mark.django_db
def test_healthz_reports_each_replica_without_failing_for_it(mirror, client):
    [reported] = client.get("/healthz").json()["replicas"]
    assert {k: reported[k] for k in ("alias", "ok", "lag_seconds", "error")} == {
        "alias": mirror,
        "ok": True,
        "lag_seconds": 0.0,
        "error": None,
    }
    monitor.mark_down(mirror, "connection lost during a request")
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json()["replicas"][0]["ok"] is False


@pytest.mark.django_db
def test_a_signed_in_person_is_pinned_to_the_primary_by_a_signed_cookie(mirror, world):
    person = Client()
    signed_in = person.post("/login/", {"username": "reviewer", "password": "correct horse battery staple"})
    assert signed_in.status_code == 302
    assert signed_in.cookies["engram_primary"]["max-age"] == 10  # the login wrote: a session, last_login
    pinned = served("pinned")
    assert person.get("/review/").status_code == 200
    assert served("pinned") == pinned + 1
    person.cookies["engram_primary"] = "forged"  # unsigned: ignored
    assert person.get("/review/").status_code == 200
    assert served("pinned") == pinned + 1


@pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, MIRROR])
def test_a_request_whose_replica_fails_runs_again_on_the_primary(mirror, world, tmp_path, client):
    """The replica passed its last check but is gone when the request reads: no error reaches the caller."""
    FactFactory(domain=world.architecture, topic="deploys", content=TUESDAYS)
    settings_dict = connections.settings[MIRROR]
    real_host = settings_dict["HOST"]
    settings_dict["HOST"] = str(tmp_path)  # nobody listens there
    _forget_connection(MIRROR)
    agent = client_for(world.planner)
    client.force_login(world.reviewer)
    requests = {
        "search": lambda: agent.post("/api/v1/search/", {"query": "Tuesdays", "mode": "keyword"}, format="json"),
        "preamble": lambda: agent.post(
            "/api/v1/preamble/", {"task": "Plan the production deploys for Tuesdays"}, format="json"
        ),
        "list": lambda: agent.get("/api/v1/facts/"),
        "page": lambda: client.get("/review/"),
    }
    try:
        for name, request in requests.items():
            monitor.refresh()  # healthy again, as far as the last check knows
            after_error = served("after_error")
            response = request()
            assert response.status_code == 200, (name, response.content[:300])
            assert served("after_error") == after_error + 1, name
            assert not monitor.is_healthy(MIRROR)  # marked down until its next check
            if name != "page":
                assert TUESDAYS in response.content.decode(), name
    finally:
        settings_dict["HOST"] = real_host
        _forget_connection(MIRROR)


def test_replica_settings_come_from_database_replica_urls_and_fail_loudly():
    code = (
        "import config.settings as s; r = s.DATABASES['replica_2'];"
        "print(s.ENGRAM_DATABASE_REPLICAS, r['HOST'], r['OPTIONS']['connect_timeout'], r['TEST'])"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")}
    env["DATABASE_URL"] = "postgres://u:p@primary.internal:5432/engram"
    env["DATABASE_REPLICA_URLS"] = "postgres://u:p@r1.internal/engram, postgres://u:p@r2.internal/engram"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "['replica_1', 'replica_2'] r2.internal 2 {'MIRROR': 'default'}", out.stderr
    env["DATABASE_REPLICA_URLS"] = "mysql://u:p@r1/engram"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "DATABASE_REPLICA_URLS must point at PostgreSQL" in out.stderr
    env["DATABASE_REPLICA_URLS"], env["ENGRAM_REPLICA_PIN_SECONDS"] = "postgres://u:p@r1/engram", "3"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "could miss its own writes" in out.stderr


# --- A real streaming standby ---------------------------------------------------------------


@on_the_standby
def test_recall_reads_come_from_the_replica_and_an_agent_reads_its_own_writes(replica, world, settings):
    writer, reader = client_for(world.coder), client_for(world.planner)
    first = propose(writer, "deploys", TUESDAYS)
    replica.wait_caught_up()
    on_replica = served("replica")
    with CaptureQueriesContext(connections[STANDBY]) as on_standby:
        assert listed(reader) == {first}
    assert served("replica") == on_replica + 1
    assert any("memory_fact" in q["sql"] for q in on_standby.captured_queries)

    # The standby stops applying WAL: what is written now exists on the primary only.
    replica.pause_replay()
    second = propose(writer, "backups", "Database backups run every night at two.")
    assert listed(reader) == {first}  # the replica answered, and it has not replayed the write
    assert listed(writer) == {first, second}  # the writer is pinned to the primary: its own write
    assert served("pinned") >= 1

    # The pin lasts ENGRAM_REPLICA_PIN_SECONDS, then the writer reads from the replica again.
    settings.ENGRAM_REPLICA_PIN_SECONDS = 1
    propose(writer, "reviews", "Every pull request needs two approvals.")
    time.sleep(1.1)
    assert listed(writer) == {first}

    replica.resume_replay()
    replica.wait_caught_up()
    assert len(listed(reader)) == 3


@on_the_standby
def test_search_reads_from_the_replica(replica, world):
    """The search voices' raw SQL follows the router (memory.routing.read_connection)."""
    writer, reader = client_for(world.coder), client_for(world.planner)
    propose(writer, "deploys", TUESDAYS)
    replica.wait_caught_up()
    replica.pause_replay()
    propose(writer, "releases", "Mobile releases ship on Tuesdays.")
    body = reader.post("/api/v1/search/", {"query": "Tuesdays", "mode": "keyword"}, format="json").json()
    assert [hit["content"] for hit in body["results"]] == [TUESDAYS]  # the replica has not replayed the second
    mine = writer.post("/api/v1/search/", {"query": "Tuesdays", "mode": "keyword"}, format="json").json()
    assert len(mine["results"]) == 2  # the writer is pinned to the primary


@on_the_standby
def test_a_replica_lagging_beyond_the_bound_is_skipped_until_it_catches_up(replica, world, settings):
    writer, reader = client_for(world.coder), client_for(world.planner)
    replica.pause_replay()
    fact = propose(writer, "deploys", TUESDAYS)
    settings.ENGRAM_REPLICA_MAX_LAG_SECONDS = 1
    wait_for(
        lambda: monitor.refresh() or not monitor.is_healthy(STANDBY), timeout=10, what="the lag to pass one second"
    )
    assert monitor.states()[0].lag_seconds > 1
    no_replica = served("no_replica")
    assert listed(reader) == {fact}  # from the primary: the replica has not replayed it
    assert served("no_replica") == no_replica + 1

    replica.resume_replay()
    replica.wait_caught_up()
    wait_for(lambda: monitor.refresh() or monitor.is_healthy(STANDBY), timeout=10, what="the replica to catch up")
    on_replica = served("replica")
    assert listed(reader) == {fact}
    assert served("replica") == on_replica + 1


@on_the_standby
def test_recall_keeps_answering_from_the_primary_when_the_replica_stops(replica, world, settings):
    writer = client_for(world.coder)
    fact = propose(writer, "deploys", TUESDAYS)
    replica.wait_caught_up()
    # The checker looks again only in five minutes: the requests themselves meet the dead replica.
    settings.ENGRAM_REPLICA_CHECK_SECONDS = 300
    monitor.wake()
    time.sleep(0.2)
    monitor.refresh()

    answers: list[tuple[str, int, bool]] = []
    stop = threading.Event()

    def recall_loop() -> None:
        agent = client_for(world.planner)
        try:
            while not stop.is_set():
                listing = agent.get("/api/v1/facts/")
                answers.append(("list", listing.status_code, fact in ids(listing, "results")))
                found = agent.post("/api/v1/search/", {"query": "Tuesdays", "mode": "keyword"}, format="json")
                answers.append(("search", found.status_code, fact in ids(found, "results")))
        except Exception as exc:  # counted as a failed answer below
            answers.append((repr(exc), 0, False))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=recall_loop) for _ in range(2)]
    before = served("replica")
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: served("replica") >= before + 10, timeout=30, what="reads served by the replica")
        at_stop = len(answers)
        replica.stop("immediate")  # mid-traffic: requests in flight lose their connection
        wait_for(lambda: len(answers) >= at_stop + 20, timeout=30, what="requests after the stop")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)

    failed = [answer for answer in answers if answer[1] != 200 or not answer[2]]
    assert failed == [], f"{len(failed)} of {len(answers)} recalls failed: {failed[:5]}"
    assert served("after_error") >= 1  # at least one request met the dead replica and ran again
    assert not monitor.is_healthy(STANDBY)
    on_replica, no_replica = served("replica"), served("no_replica")
    planner = client_for(world.planner)
    for _ in range(3):
        assert listed(planner) == {fact}
    assert (served("replica"), served("no_replica")) == (on_replica, no_replica + 3)  # all from the primary

    # Started again, it catches up and serves reads once a check finds it well.
    replica.start()
    replica.wait_caught_up()
    wait_for(lambda: monitor.refresh() or monitor.is_healthy(STANDBY), timeout=15, what="the replica to come back")
    assert listed(planner) == {fact}
    assert served("replica") == on_replica + 1
    settings.ENGRAM_REPLICA_CHECK_SECONDS = 2
    monitor.wake()
