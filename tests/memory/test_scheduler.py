"""The daily jobs in the embedded mode (issue 20): memory.scheduler runs each job of the one
schedule beat uses, once a day, never twice at once across processes."""

from __future__ import annotations

import importlib
import threading
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection, connections
from django.test import override_settings
from django.utils import timezone

from memory import scheduler
from memory.models import AuditEvent, DecayProfile, Fact
from memory.scheduler import DAILY_JOBS, FREQUENT_JOBS, DailyJob, tick
from tests.factories import FactFactory

JOB = DailyJob("test-job", "tests.memory.test_scheduler.nothing", hour=3, minute=17)


def test_beat_and_the_in_process_scheduler_share_one_schedule():
    from config.celery import app

    assert {name: entry["task"] for name, entry in app.conf.beat_schedule.items()} == {
        job.name: job.task for job in (*DAILY_JOBS, *FREQUENT_JOBS)
    }
    assert "memory.tasks.detect_stale_facts" in {job.task for job in DAILY_JOBS}


def test_a_due_job_runs_once_then_again_a_day_later(db):
    runs: list[str] = []
    now = timezone.now()
    assert tick(now, jobs=[JOB], runner=lambda job: runs.append(job.name) or {"n": 1}) == ["test-job"]
    assert tick(now + timedelta(minutes=10), jobs=[JOB], runner=lambda job: runs.append(job.name)) == []
    assert tick(now + timedelta(hours=23), jobs=[JOB], runner=lambda job: runs.append(job.name)) == []
    assert runs == ["test-job"]
    event = AuditEvent.objects.get(verb="scheduler.job_ran")
    assert event.detail["job"] == "test-job" and event.detail["result"] == {"n": 1}
    assert event.actor_label == "system:scheduler" and event.workspace_id is None
    assert tick(now + timedelta(days=1), jobs=[JOB], runner=lambda job: runs.append(job.name)) == ["test-job"]
    assert runs == ["test-job", "test-job"]


def test_a_failed_run_is_recorded_and_tried_again_an_hour_later(db):
    def boom(job):
        raise RuntimeError("database hiccup")

    now = timezone.now()
    assert tick(now, jobs=[JOB], runner=boom) == ["test-job"]
    assert AuditEvent.objects.get(verb="scheduler.job_failed").detail["error"] == "RuntimeError: database hiccup"
    assert tick(now + timedelta(minutes=30), jobs=[JOB], runner=boom) == []
    runs: list[str] = []
    assert tick(now + timedelta(hours=1), jobs=[JOB], runner=lambda job: runs.append(job.name)) == ["test-job"]
    assert runs == ["test-job"]


def test_the_scheduler_runs_stale_detection_for_real(db, world):
    importlib.import_module("memory.migrations.0002_default_decay_profiles").forwards(apps, None)
    long_ago = timezone.now() - timedelta(days=DecayProfile.objects.get(memory_type="decision").stale_after_days + 5)
    fact = FactFactory(domain=world.architecture, origin="promotion", created_at=long_ago, last_mentioned_at=long_ago)
    assert "detect-stale-facts" in tick()  # with the other daily jobs (prune-exposures…)
    assert Fact.objects.get(pk=fact.pk).status == "challenged"
    ran = AuditEvent.objects.get(verb="scheduler.job_ran", detail__job="detect-stale-facts")
    assert ran.detail["result"] == {"decision": 1}
    assert tick() == []


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_ticks_run_a_job_once():
    """Two processes (here: threads, each with its own connection and so its own session) tick at
    the same moment: the advisory lock lets one run the job; the other skips it."""
    runs: list[str] = []
    now = timezone.now()
    barrier = threading.Barrier(2)
    results: list[list[str]] = []
    skipped = threading.Event()

    def held(job):
        runs.append(job.name)
        skipped.wait(30)  # the job runs, holding its lock, until the other tick has skipped it

    def worker():
        try:
            barrier.wait()
            ran = tick(now, jobs=[JOB], runner=held)
            results.append(ran)
            if not ran:
                skipped.set()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert runs == ["test-job"]
    assert sorted(results) == [[], ["test-job"]]
    assert AuditEvent.objects.filter(verb="scheduler.job_ran").count() == 1


def test_a_tick_skips_a_job_another_session_holds(db):
    """The lock is per job and per session: while another connection holds it, nothing runs."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", ["engram-daily-job:test-job"])
            assert cursor.fetchone()[0]
        runs: list[str] = []
        assert tick(jobs=[JOB], runner=lambda job: runs.append(job.name)) == []
        assert runs == []
    finally:
        other.close()
    with connection.cursor() as cursor:  # and the tick left no lock of its own behind
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        assert cursor.fetchone()[0] == 0


def test_the_thread_starts_only_when_embedded_and_enabled(monkeypatch):
    monkeypatch.setattr(scheduler, "_started", None)
    started: list[str] = []

    class FakeThread:
        def __init__(self, *, target, args, name, daemon):
            self.name, self.daemon = name, daemon

        def start(self):
            started.append(self.name)

    monkeypatch.setattr(scheduler.threading, "Thread", FakeThread)
    assert scheduler.start() is None  # the test settings leave it off (config/settings_test.py)
    with override_settings(ENGRAM_SCHEDULER=True, CELERY_BROKER_URL="redis://x"):
        assert scheduler.start() is None  # beat runs them
    with override_settings(ENGRAM_SCHEDULER=False, CELERY_BROKER_URL=""):
        assert scheduler.start() is None  # not asked for
    with override_settings(ENGRAM_SCHEDULER=True, CELERY_BROKER_URL=""):
        thread = scheduler.start()
        assert thread is not None and thread.daemon
        assert scheduler.start() is thread  # once per process
    assert started == ["engram-daily-jobs"]


def nothing() -> None:
    """The import target of JOB (never called: the tests pass a runner)."""
