"""The run page: a workspace member sees the bank, the timeline (silence included) and the
candidates the run produced; anyone else gets 404."""

import pytest
from django.test import Client

from agents import runs
from memory.actors import Actor
from tests.factories import UserFactory


def _client(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def finished_run(world):
    by = Actor.of_agent(world.coder)
    run = runs.start_run(agent=world.coder, task="Make `make test` pass in the web repo.", by=by)
    runs.update_status(run=run, content="tests green after installing libpq", by=by)
    runs.save_knowledge(
        run=run, item_id="no-sudo", content="Never use `sudo` on the CI runners.", tags=["constraint"], by=by
    )
    runs.save_procedural(
        run=run, item_id="make-test", content="`make test` failed: libpq missing", outcome="failed", by=by
    )
    window = [
        {"step": 0, "command": "make test", "ok": False, "output": "fatal: libpq-fe.h: No such file"},
        {"step": 1, "command": "apt-get download libpq-dev", "ok": True, "output": "done"},
    ]
    runs.log_intervention(run=run, step=2, reminder=None, rationale="nothing repeats yet", window=window, by=by)
    runs.log_intervention(
        run=run, step=3, reminder="`make test` failed at step 0 (libpq missing).", window=window, by=by
    )
    runs.finish_run(run=run, by=by, offer_candidates=True)
    return run


def test_member_sees_bank_timeline_and_the_candidates_it_produced(world, finished_run, django_assert_max_num_queries):
    client = _client(world.reviewer)
    with django_assert_max_num_queries(12):
        response = client.get(f"/review/runs/{finished_run.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Make `make test` pass in the web repo." in html
    assert "tests green after installing libpq" in html
    assert "Never use `sudo` on the CI runners." in html
    assert "libpq missing" in html
    assert 'data-testid="silence"' in html  # selective silence is on the timeline
    assert "nothing repeats yet" in html
    assert "`make test` failed at step 0 (libpq missing)." in html
    assert html.index("Before step 2") < html.index("Before step 3")
    assert "Step 0:" in html and "Step 1:" in html
    for item in finished_run.bank_items.exclude(kind="status"):
        assert item.candidate is not None
        assert item.candidate.candidate_id in html
        assert f"candidate #{item.candidate.pk}" in html
        # A member without review rights on the domain: named, not linked — the admin would not
        # show them the candidate either (issue 32: links only to pages the person may open).
        assert f'href="/admin/memory/candidate/{item.candidate.pk}/change/"' not in html


def test_candidate_points_back_at_its_run_page(world, finished_run):
    item = finished_run.bank_items.get(kind="procedural")
    assert f"/review/runs/{finished_run.pk}/" in item.candidate.evidence_refs
    assert item.candidate.origin == "memory_agent"
    admin = _client(world.admin_user)  # a workspace admin reviews every domain
    html = admin.get(f"/review/runs/{finished_run.pk}/").content.decode()
    assert f'href="/review/candidate/{item.candidate.pk}/"' in html  # the run page opens its queue page
    page = admin.get(f"/review/candidate/{item.candidate.pk}/")
    assert page.status_code == 200
    assert f"/review/runs/{finished_run.pk}/" in page.content.decode()  # and the queue page names the run


def test_outsiders_and_anonymous_get_no_run_page(world, finished_run):
    stranger = UserFactory(username="stranger")
    assert _client(stranger).get(f"/review/runs/{finished_run.pk}/").status_code == 404
    assert _client(world.reviewer).get("/review/runs/999999/").status_code == 404
    anonymous = Client().get(f"/review/runs/{finished_run.pk}/")
    assert anonymous.status_code == 302
    superuser = UserFactory(username="root", is_superuser=True)
    assert _client(superuser).get(f"/review/runs/{finished_run.pk}/").status_code == 200
