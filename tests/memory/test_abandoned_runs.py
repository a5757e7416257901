"""Memory-agent runs cut off mid-way (issue 39, point 6): the daily job `close-abandoned-runs`
closes a run that showed no activity for ENGRAM_RUN_ABANDON_HOURS as finished, with its reason
(`abandoned: no activity for N hours`) and an audit event; never a run that just showed a sign of
life, and never offering its bank as candidates. An abandoned run refuses writes as a finished run
does, and its reason is shown by the API, the admin and the run page."""

from __future__ import annotations

import importlib
import json
import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.apps import apps
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents import runs
from memory import selectors_runs
from memory.actors import Actor
from memory.errors import InvalidInput, NotFound
from memory.models import AuditEvent, BankItem, Candidate, Intervention, MemoryRun, Workspace
from memory.scheduler import DAILY_JOBS, tick
from memory.services import runs as run_sweep
from memory.services.portability import export_workspace, import_workspace
from tests.agents.test_runs import FINISHED_RUN_WRITES
from tests.conftest import client_for

RUNS = "/api/v1/runs/"
HOURS = 24
REASON = "abandoned: no activity for 24 hours"


@pytest.fixture(autouse=True)
def abandon_after_a_day(settings):
    settings.ENGRAM_RUN_ABANDON_HOURS = HOURS


def _start(world, task="Make the payments test suite pass."):
    by = Actor.of_agent(world.coder)
    run = runs.start_run(agent=world.coder, task=task, by=by)
    runs.save_knowledge(run=run, item_id="py", content="The service needs Python 3.11.", tags=["constraint"], by=by)
    runs.save_procedural(run=run, item_id="pip", content="`pip install` failed: no network", outcome="failed", by=by)
    return run


def _idle(run: MemoryRun, hours: float) -> MemoryRun:
    """The run as if nothing had happened to it for `hours`: opened then, its bank written then."""
    then = timezone.now() - timedelta(hours=hours)
    MemoryRun.objects.filter(pk=run.pk).update(created_at=then, last_activity_at=then)
    BankItem.objects.filter(run=run).update(created_at=then, updated_at=then)
    return MemoryRun.objects.get(pk=run.pk)


def _fresh(run: MemoryRun) -> MemoryRun:
    return MemoryRun.objects.get(pk=run.pk)


# --- The sweep ---------------------------------------------------------------------------------
def test_a_run_idle_past_the_limit_is_closed_as_abandoned_with_its_reason_and_an_audit_event(world):
    run = _idle(_start(world), HOURS + 1)
    candidates_before = Candidate.objects.count()

    assert run_sweep.close_abandoned_runs() == {"closed": 1}

    run = _fresh(run)
    assert run.status == "finished" and run.finished_at is not None
    assert run.end_reason == REASON
    assert run.was_abandoned
    event = AuditEvent.objects.get(verb="run.abandoned", target_type="memoryrun", target_id=run.pk)
    assert event.workspace_id == world.workspace.pk
    assert event.actor_label == "system:close_abandoned_runs"
    assert event.detail["reason"] == REASON
    assert event.detail["hours"] == HOURS
    assert event.detail["last_activity_at"] == run.last_activity_at.isoformat()
    # SPEC §9: items are offered as candidates when the agent asks at its finish; nobody asked here.
    assert Candidate.objects.count() == candidates_before
    assert not BankItem.objects.filter(run=run, candidate__isnull=False).exists()
    assert BankItem.objects.filter(run=run).count() == 3  # the bank stays, for the run page
    assert not AuditEvent.objects.filter(verb="run.finished", target_id=run.pk).exists()
    # Idempotent: a second run of the job finds nothing left to close.
    assert run_sweep.close_abandoned_runs() == {"closed": 0}
    assert AuditEvent.objects.filter(verb="run.abandoned").count() == 1


def test_a_run_idle_for_less_than_the_limit_and_finished_runs_are_left_alone(world):
    recent = _idle(_start(world), HOURS - 1)
    finished = _start(world, task="Another task.")
    runs.finish_run(run=finished, by=Actor.of_agent(world.coder), offer_candidates=False)
    finished = _idle(finished, HOURS * 10)

    assert run_sweep.close_abandoned_runs() == {"closed": 0}
    assert _fresh(recent).status == "running"
    assert _fresh(finished).end_reason == "finished"


def _write_status(run, by):
    runs.update_status(run=run, content="halfway", by=by)


def _write_knowledge(run, by):
    runs.save_knowledge(run=run, item_id="new", content="A new constraint.", tags=[], by=by)


def _write_procedural(run, by):
    runs.save_procedural(run=run, item_id="pip", content="`pip install` worked offline", outcome="worked", by=by)


def _delete_item(run, by):
    runs.delete_item(run=run, item_id="py", by=by)


def _log_decision(run, by):
    runs.log_intervention(run=run, step=7, reminder=None, rationale="nothing repeats", by=by)


@pytest.mark.parametrize(
    "activity",
    [_write_status, _write_knowledge, _write_procedural, _delete_item, _log_decision],
    ids=lambda f: f.__name__,
)
def test_a_run_with_recent_activity_is_not_closed(world, activity):
    run = _idle(_start(world), HOURS * 3)
    activity(run, Actor.of_agent(world.coder))

    assert run_sweep.close_abandoned_runs() == {"closed": 0}
    run = _fresh(run)
    assert run.status == "running" and run.end_reason == ""
    assert timezone.now() - run.last_activity_at < timedelta(minutes=1)


def test_a_refused_write_is_no_sign_of_life(world):
    run = _idle(_start(world), HOURS + 1)
    with pytest.raises(InvalidInput):
        runs.save_knowledge(run=run, item_id="bad id with spaces", content="c", tags=[], by=Actor.of_agent(world.coder))
    with pytest.raises(NotFound):
        runs.delete_item(run=run, item_id="nothing-here", by=Actor.of_agent(world.coder))
    assert run_sweep.close_abandoned_runs() == {"closed": 1}


def test_the_limit_is_the_setting_and_zero_closes_nothing(world, settings):
    run = _idle(_start(world), 200 * 24)
    settings.ENGRAM_RUN_ABANDON_HOURS = 0
    assert run_sweep.close_abandoned_runs() == {"closed": 0}
    assert _fresh(run).status == "running"

    settings.ENGRAM_RUN_ABANDON_HOURS = 300 * 24
    assert run_sweep.close_abandoned_runs() == {"closed": 0}
    settings.ENGRAM_RUN_ABANDON_HOURS = 2
    assert run_sweep.close_abandoned_runs() == {"closed": 1}
    assert _fresh(run).end_reason == "abandoned: no activity for 2 hours"


def test_activity_recorded_after_the_run_was_selected_keeps_it_open(world, monkeypatch):
    """The race: the sweep reads the idle runs, then the agent writes, then the sweep locks the
    batch. The re-check under the lock sees the new activity and leaves the run running."""
    racing = _idle(_start(world), HOURS + 1)
    idle = _idle(_start(world, task="Forgotten task."), HOURS + 1)
    read = selectors_runs.idle_run_ids

    def read_then_the_agent_writes(**kwargs):
        ids = read(**kwargs)
        if ids:
            assert racing.pk in ids
            runs.update_status(run=racing, content="still here", by=Actor.of_agent(world.coder))
        return ids

    monkeypatch.setattr(selectors_runs, "idle_run_ids", read_then_the_agent_writes)
    assert run_sweep.close_abandoned_runs() == {"closed": 1}
    assert _fresh(racing).status == "running"
    assert _fresh(idle).end_reason == REASON
    assert not AuditEvent.objects.filter(verb="run.abandoned", target_id=racing.pk).exists()


def test_runs_are_closed_in_batches_without_reading_their_banks(world, django_assert_max_num_queries):
    idle = [_idle(_start(world, task=f"task {i}"), HOURS + 1 + i) for i in range(5)]
    by = Actor.of_agent(world.coder)
    for i in range(30):  # a big bank costs the sweep nothing: it reads last_activity_at only
        runs.save_knowledge(run=idle[0], item_id=f"k{i}", content=f"fact {i}", tags=[], by=by)
    _idle(idle[0], HOURS + 1)
    with django_assert_max_num_queries(20) as queries:
        assert run_sweep.close_abandoned_runs(batch=2) == {"closed": 5}
    assert not any("bankitem" in q["sql"] for q in queries.captured_queries)
    assert MemoryRun.objects.filter(pk__in=[r.pk for r in idle], end_reason=REASON).count() == 5
    assert AuditEvent.objects.filter(verb="run.abandoned").count() == 5


@pytest.mark.django_db(transaction=True)
def test_a_run_being_written_while_the_sweep_runs_is_skipped_and_the_write_succeeds(world):
    """Another transaction holds the run's row (an agent's write in progress): the sweep skips it
    (skip_locked) rather than wait, and the write that holds it commits as usual."""
    run = _idle(_start(world), HOURS + 1)
    locked, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with transaction.atomic():
                MemoryRun.objects.select_for_update().get(pk=run.pk)
                locked.set()
                release.wait(10)
                runs.update_status(run=run, content="written while the sweep ran", by=Actor.of_agent(world.coder))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert locked.wait(10)
        assert run_sweep.close_abandoned_runs() == {"closed": 0}
    finally:
        release.set()
        thread.join(10)
    assert errors == []
    run = _fresh(run)
    assert run.status == "running"
    assert BankItem.objects.get(run=run, kind="status").content == "written while the sweep ran"
    assert run_sweep.close_abandoned_runs() == {"closed": 0}  # the write was a sign of life


# --- An abandoned run is finished ------------------------------------------------------------
def test_writing_to_an_abandoned_run_is_refused_as_for_a_finished_run(world):
    api = client_for(world.coder)
    run = _idle(_start(world), HOURS + 1)
    run_sweep.close_abandoned_runs()
    counts = (BankItem.objects.count(), Intervention.objects.count(), Candidate.objects.count())
    for path, payload in FINISHED_RUN_WRITES:
        response = api.post(f"{RUNS}{run.pk}/{path}", payload, format="json")
        assert response.status_code == 409, path
        assert response.json()["code"] == "run_finished"
        assert REASON in response.json()["detail"]
    deleted = api.delete(f"{RUNS}{run.pk}/bank/items/py/")
    assert deleted.status_code == 409 and deleted.json()["code"] == "run_finished"
    assert (BankItem.objects.count(), Intervention.objects.count(), Candidate.objects.count()) == counts

    bank = api.get(f"{RUNS}{run.pk}/bank/").json()
    assert bank["run_status"] == "finished"
    assert bank["run_end_reason"] == REASON


def test_the_api_says_why_a_run_ended(world):
    api = client_for(world.coder)
    created = api.post(RUNS, {"task": "Upgrade Django."}, format="json").json()
    assert created["end_reason"] == ""
    assert created["last_activity_at"] == created["created_at"]
    assert api.get(f"{RUNS}{created['id']}/bank/").json()["run_end_reason"] == ""
    finished = api.post(f"{RUNS}{created['id']}/finish/", {}, format="json").json()
    assert finished["status"] == "finished"
    assert finished["end_reason"] == "finished"
    assert api.get(f"{RUNS}{created['id']}/bank/").json()["run_end_reason"] == "finished"


def test_the_admin_and_the_run_page_show_the_reason(world, django_user_model):
    run = _idle(_start(world), HOURS + 1)
    run_sweep.close_abandoned_runs()
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    admin = Client()
    admin.force_login(root)
    listing = admin.get(reverse("admin:memory_memoryrun_changelist")).content.decode()
    assert REASON in listing
    change = admin.get(reverse("admin:memory_memoryrun_change", args=[run.pk])).content.decode()
    assert REASON in change and "Last activity" in change

    member = Client()
    member.force_login(world.reviewer)
    page = member.get(f"/review/runs/{run.pk}/").content.decode()
    assert 'data-testid="run-end-reason"' in page and REASON in page


# --- The daily job -----------------------------------------------------------------------------
def test_the_job_is_a_daily_job_in_the_beat_schedule():
    from config.celery import app

    job = next(job for job in DAILY_JOBS if job.name == "close-abandoned-runs")
    assert job.task == "memory.tasks.close_abandoned_runs"
    assert app.conf.beat_schedule["close-abandoned-runs"]["task"] == "memory.tasks.close_abandoned_runs"


def test_the_scheduler_closes_abandoned_runs_for_real(world):
    run = _idle(_start(world), HOURS + 1)
    assert "close-abandoned-runs" in tick()
    assert _fresh(run).end_reason == REASON
    ran = AuditEvent.objects.get(verb="scheduler.job_ran", detail__job="close-abandoned-runs")
    assert ran.detail["result"] == {"closed": 1}


# --- Data written before reasons and activity were recorded ----------------------------------
def test_the_migration_takes_the_latest_sign_of_life_of_existing_runs(world):
    migration = importlib.import_module("memory.migrations.0023_memoryrun_end_reason_last_activity")
    run = _idle(_start(world), HOURS * 5)
    written = timezone.now() - timedelta(hours=3)
    decided = timezone.now() - timedelta(hours=2)
    BankItem.objects.filter(run=run, item_id="py").update(updated_at=written)
    Intervention.objects.create(run=run, step=1, reminder=None, created_at=decided)
    migration.backfill(apps, None)
    assert _fresh(run).last_activity_at == decided


def test_an_export_from_before_end_reasons_imports_its_finished_runs_as_finished(world):
    run = _start(world)
    runs.finish_run(run=run, by=Actor.of_agent(world.coder), offer_candidates=False)
    _start(world, task="Still running.")
    out = StringIO()
    export_workspace(workspace=world.workspace, out=out, by=Actor.system("test"))
    lines = []
    for line in out.getvalue().splitlines():
        row = json.loads(line)
        if row.get("type") == "memory_run":
            row.pop("end_reason")
            row.pop("last_activity_at")
        lines.append(json.dumps(row))

    result = import_workspace(lines=lines, slug="acme-old", by=Actor.system("test"))
    copy = Workspace.objects.get(slug="acme-old")
    assert result.workspace == copy
    ended = dict(MemoryRun.objects.filter(workspace=copy).values_list("task", "end_reason"))
    assert ended == {"Make the payments test suite pass.": "finished", "Still running.": ""}
    for copied in MemoryRun.objects.filter(workspace=copy):  # the last known sign of life
        assert copied.last_activity_at == (copied.finished_at or copied.created_at)
