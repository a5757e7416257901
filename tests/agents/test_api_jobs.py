"""Bounded jobs (issue 13.6): harmonize runs at most once at a time per workspace, consolidate per
agent and session — with a broker and inline — and a lost job expires instead of blocking."""

import threading
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from memory.models import HotMemory, Job
from memory.services import jobs
from memory.tasks import consolidate_memory, harmonize_memory
from tests.conftest import client_for

BROKER = override_settings(CELERY_TASK_ALWAYS_EAGER=False)


@BROKER
def test_twenty_harmonize_requests_with_a_broker_queue_one_job(world):
    with mock.patch.object(harmonize_memory, "apply_async") as queue:
        answers = [client_for(world.coder if i % 2 else world.planner).post("/api/v1/harmonize/") for i in range(20)]
    assert queue.call_count == 1
    assert Job.objects.count() == 1
    job = Job.objects.get()
    assert (job.kind, job.scope, job.state) == ("harmonize", f"workspace:{world.workspace.pk}", "queued")
    assert queue.call_args.kwargs["task_id"] == job.task_id
    assert queue.call_args.kwargs["kwargs"] == {"job_id": job.pk}
    assert [a.status_code for a in answers] == [202] * 20
    assert answers[0].json() == {"status": "queued", "task_id": job.task_id, "joined": False}
    assert all(a.json() == {"status": "queued", "task_id": job.task_id, "joined": True} for a in answers[1:])


@BROKER
def test_harmonize_of_another_workspace_is_its_own_job(world):
    with mock.patch.object(harmonize_memory, "apply_async") as queue:
        client_for(world.coder).post("/api/v1/harmonize/")
        client_for(world.foreign_agent).post("/api/v1/harmonize/")
    assert queue.call_count == 2
    assert Job.objects.filter(finished_at__isnull=True).count() == 2


@BROKER
def test_consolidate_is_one_job_per_agent_and_session(world):
    with mock.patch.object(consolidate_memory, "apply_async") as queue:
        a = client_for(world.coder).post("/api/v1/consolidate/", {"session_id": "s1"}, format="json").json()
        again = client_for(world.coder).post("/api/v1/consolidate/", {"session_id": "s1"}, format="json").json()
        other_session = client_for(world.coder).post("/api/v1/consolidate/", {"session_id": "s2"}, format="json")
        other_agent = client_for(world.coder2).post("/api/v1/consolidate/", {"session_id": "s1"}, format="json")
    assert again == {**a, "joined": True}
    assert other_session.json()["joined"] is False and other_agent.json()["joined"] is False
    assert queue.call_count == 3
    assert set(Job.objects.values_list("scope", flat=True)) == {
        f"agent:{world.coder.pk}:session:s1",
        f"agent:{world.coder.pk}:session:s2",
        f"agent:{world.coder2.pk}:session:s1",
    }


@BROKER
def test_an_unreachable_broker_frees_the_scope_at_once(world):
    down = mock.patch.object(harmonize_memory, "apply_async", side_effect=ConnectionError("no broker"))
    with down, pytest.raises(ConnectionError):
        client_for(world.coder).post("/api/v1/harmonize/")
    assert Job.objects.get().state == "failed"
    with mock.patch.object(harmonize_memory, "apply_async"):
        assert client_for(world.coder).post("/api/v1/harmonize/").json()["joined"] is False


def test_inline_requests_one_after_another_each_run_and_report(world, api):
    first = api.post("/api/v1/harmonize/").json()
    second = api.post("/api/v1/harmonize/").json()
    assert first["status"] == second["status"] == "done"
    assert first["task_id"] != second["task_id"]
    assert list(Job.objects.values_list("state", flat=True)) == ["done", "done"]
    assert Job.objects.filter(task_id=first["task_id"]).get().report == {
        k: v for k, v in first.items() if k not in {"status", "task_id", "joined"}
    }


@pytest.mark.django_db(transaction=True)
def test_twenty_simultaneous_inline_harmonize_requests_run_one_job(world):
    """Embedded mode runs the job inside the request: the other requests must get its id."""
    release = threading.Event()
    calls = []

    def slow_harmonize(*, agent, domain=None):
        calls.append(agent.pk)
        release.wait(timeout=60)
        from memory.services.hot import HarmonizationReport

        return HarmonizationReport()

    barrier = threading.Barrier(20)
    answers, errors = [], []

    def worker(i):
        try:
            barrier.wait()
            answers.append(client_for(world.coder if i % 2 else world.planner).post("/api/v1/harmonize/"))
        except Exception as exc:  # asserted empty below
            errors.append(exc)
        finally:
            connection.close()

    with mock.patch("memory.services.hot.harmonize", slow_harmonize):
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while len(answers) + len(errors) < 19 and time.monotonic() < deadline:
            time.sleep(0.05)
        release.set()
        for t in threads:
            t.join(timeout=120)
    assert errors == []
    assert len(calls) == 1
    done = [a for a in answers if a.status_code == 200]
    joined = [a for a in answers if a.status_code == 202]
    assert len(done) == 1 and len(joined) == 19
    task_id = done[0].json()["task_id"]
    assert {a.json()["task_id"] for a in joined} == {task_id}
    assert {a.json()["joined"] for a in joined} == {True}
    assert Job.objects.count() == 1 and Job.objects.get().state == "done"


# --- Lost, redelivered and failing jobs --------------------------------------------------------
def _claim(world, scope="workspace:test"):
    return jobs.claim_job(
        workspace_id=world.workspace.pk, kind="harmonize", scope=scope, arguments={}, requested_by=world.coder
    )


def test_a_lost_job_expires_and_no_longer_blocks_its_scope(world):
    lost = _claim(world).job
    Job.objects.filter(pk=lost.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    fresh = _claim(world)
    assert fresh.created and fresh.job.pk != lost.pk
    lost.refresh_from_db()
    assert lost.state == "expired" and lost.finished_at is not None


def test_a_redelivered_task_of_a_finished_job_does_not_run_again(world):
    job = _claim(world).job
    work = mock.Mock(return_value={"resolved": 1})
    assert jobs.run_job(job.pk, work) == {"resolved": 1}
    assert jobs.run_job(job.pk, work) == {"resolved": 1}  # the stored report
    assert work.call_count == 1


def test_a_second_delivery_while_the_first_runs_does_nothing(world):
    job = _claim(world).job
    assert jobs.start_job(job.pk) is not None
    work = mock.Mock(return_value={})
    jobs.run_job(job.pk, work)
    work.assert_not_called()


def test_a_failing_job_is_closed_as_failed_and_frees_its_scope(world):
    job = _claim(world).job
    with pytest.raises(RuntimeError):
        jobs.run_job(job.pk, mock.Mock(side_effect=RuntimeError("boom")))
    job.refresh_from_db()
    assert job.state == "failed" and "boom" in job.error
    assert _claim(world).created


def test_consolidate_inline_still_promotes_and_reports(world, api):
    api.post("/api/v1/remember/", {"session_id": "s1", "content": "Keys rotate every 90 days."}, format="json")
    report = api.post("/api/v1/consolidate/", {"session_id": "s1"}, format="json").json()
    assert report["status"] == "done" and report["promoted"] == 1 and report["joined"] is False
    assert HotMemory.objects.get().consolidated_fact_id is not None
    assert Job.objects.get().state == "done"
