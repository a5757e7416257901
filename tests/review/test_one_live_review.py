"""One live remember review per agent and session (issue 39): the service answers the live one,
the database refuses a second, concurrent submissions make one review, and migration 0003 settled
the duplicates written before the rule."""

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone

from agents import operations
from memory.actors import Actor
from memory.models import AuditEvent
from review import services
from review.models import RememberReview, ReviewStatus
from review.services import consume_review, join_or_submit_review, reject_review, submit_review
from tests.races import race
from tests.review.samples import FILES, OUTPUT

ONE_LIVE = "remember_review_one_live_per_session"


def _join(agent, session_id="turn-1", output=OUTPUT):
    return join_or_submit_review(agent=agent, session_id=session_id, output=output, files=FILES, repo="web")


def test_the_second_submission_joins_the_live_review_and_writes_nothing(world):
    first = _join(world.coder)
    assert first.created is True
    before = (RememberReview.objects.count(), AuditEvent.objects.count())
    second = _join(world.coder, output="see docs/other.md")
    assert (second.created, second.review.pk) == (False, first.review.pk)
    assert (RememberReview.objects.count(), AuditEvent.objects.count()) == before
    assert submit_review(agent=world.coder, session_id="turn-1", output=OUTPUT).pk == first.review.pk


def test_a_consumed_review_is_not_live(world, reviewer_is_workspace_admin):
    first = _join(world.coder).review
    reject_review(review=first, by=Actor.of_user(world.reviewer))
    assert _join(world.coder).created is False  # rejected, not yet consumed: still live
    consume_review(review=first, by=Actor.of_agent(world.coder))
    second = _join(world.coder)
    assert second.created is True and second.review.pk != first.pk


def test_a_submission_that_lost_the_race_to_insert_answers_the_winners_review(world, monkeypatch):
    """The check found no live review, but one was written before the insert: the unique
    constraint refuses the insert, its savepoint is undone, and the live one is answered."""
    winner = _join(world.coder).review
    looked = []
    real = services.live_review

    def missed_once(agent, session_id):
        looked.append(session_id)
        return None if len(looked) == 1 else real(agent, session_id)

    monkeypatch.setattr(services, "live_review", missed_once)
    before = (RememberReview.objects.count(), AuditEvent.objects.count())
    loser = _join(world.coder)
    assert (loser.created, loser.review.pk) == (False, winner.pk) and len(looked) == 2
    assert (RememberReview.objects.count(), AuditEvent.objects.count()) == before  # the transaction goes on


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_of_one_session_make_one_review(world):
    raw = {"session_id": "turn-1", "repo": "web", "output": OUTPUT, "files": FILES}
    results, errors = race(*[lambda: operations.submit_review(world.coder, raw) for _ in range(4)])
    assert errors == []
    assert sorted(r.status for r in results) == [200, 200, 200, 201]
    assert len({r.body["id"] for r in results}) == 1
    assert RememberReview.objects.count() == 1
    assert AuditEvent.objects.filter(verb="remember_review.submitted").count() == 1


# --- migration 0003: the duplicates written before the rule ----------------------------------------
def _settle():
    return importlib.import_module("review.migrations.0003_one_live_review_per_session").settle_live_duplicates


def _review(agent, session_id, *, minutes_ago, status=ReviewStatus.PENDING, note="", workspace=None):
    now = timezone.now()
    decided = status != ReviewStatus.PENDING
    return RememberReview.objects.create(
        workspace=workspace or agent.workspace,
        agent=agent,
        session_id=session_id,
        raw_output="{}",
        status=status,
        created_at=now - timedelta(minutes=minutes_ago),
        resolved_at=now if decided else None,
        consumed_at=now if status == ReviewStatus.CONSUMED else None,
        reviewer_note=note,
    )


def test_the_migration_keeps_the_newest_live_review_of_a_session_and_consumes_the_older_ones(world):
    constraint = next(c for c in RememberReview._meta.constraints if c.name == ONE_LIVE)
    with connection.schema_editor() as editor:  # undone with the test's transaction
        editor.remove_constraint(RememberReview, constraint)
    older = _review(world.coder, "s", minutes_ago=30)
    decided = _review(world.coder, "s", minutes_ago=20, status=ReviewStatus.APPROVED, note="Keep it short.")
    newest = _review(world.coder, "s", minutes_ago=10)
    consumed = _review(world.coder, "s", minutes_ago=40, status=ReviewStatus.CONSUMED)
    other_agent = _review(world.coder2, "s", minutes_ago=50)
    other_session = _review(world.coder, "t", minutes_ago=60)
    orphans = [_review(None, "s", minutes_ago=m, workspace=world.workspace) for m in (1, 2)]  # agent deleted
    untouched = {r.pk: (r.status, r.reviewer_note) for r in [newest, consumed, other_agent, other_session, *orphans]}

    with connection.schema_editor() as editor:
        _settle()(apps, editor)
        editor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the rows' deferred checks, before the index
        editor.add_constraint(RememberReview, constraint)  # holds now

    rows = {r.pk: r for r in RememberReview.objects.all()}
    assert {pk: (rows[pk].status, rows[pk].reviewer_note) for pk in untouched} == untouched
    for settled in (older, decided):
        row = rows[settled.pk]
        assert row.status == ReviewStatus.CONSUMED and row.consumed_at and row.resolved_at
        assert "a newer remember review of the same session" in row.reviewer_note
    assert rows[decided.pk].reviewer_note.startswith("Keep it short.\n\n")
    assert rows[decided.pk].resolved_at == decided.resolved_at  # its decision's time is kept
    # Run again, it changes nothing.
    with connection.schema_editor() as editor:
        _settle()(apps, editor)
    assert {r.pk: (r.status, r.reviewer_note) for r in RememberReview.objects.all()} == {
        pk: (r.status, r.reviewer_note) for pk, r in rows.items()
    }
