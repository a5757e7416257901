"""Two reviewers approving one review at once: exactly one wins (real threads, real PostgreSQL)."""

import pytest

from memory.actors import Actor
from memory.models import AuditEvent, Fact
from review.errors import ReviewAlreadyResolved
from review.models import RememberReview
from review.services import approve_review, reject_review, submit_review
from tests.races import race
from tests.review.samples import FILES, OUTPUT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _both_reviewers_decide_every_layer(world):
    """Both racers may decide every item (items land in domains created on approval, which only
    workspace admins may decide: issue 16)."""
    from memory.models import WorkspaceMembership

    WorkspaceMembership.objects.filter(workspace=world.workspace, user=world.reviewer).update(is_admin=True)


def test_two_reviewers_approving_at_once_one_wins_the_other_is_told_it_was_resolved(world):
    review = submit_review(agent=world.coder, session_id="s", output=OUTPUT, files=FILES, repo="web")
    results, errors = race(
        lambda: approve_review(review=review, by=Actor.of_user(world.reviewer)),
        lambda: approve_review(review=review, by=Actor.of_user(world.admin_user)),
    )
    assert len(results) == 1, errors
    assert len(errors) == 1 and isinstance(errors[0], ReviewAlreadyResolved)
    assert errors[0].code == "review_already_resolved"
    review.refresh_from_db()
    assert review.status == "approved" and review.resolved_by_id == results[0].resolved_by_id
    assert Fact.objects.filter(source="remember_agent_human_approved").count() == 3  # stored once
    assert AuditEvent.objects.filter(verb="remember_review.approved").count() == 1


def test_approve_racing_reject_leaves_one_consistent_outcome(world):
    review = submit_review(agent=world.coder, session_id="s", output=OUTPUT, files=FILES, repo="web")
    results, errors = race(
        lambda: approve_review(review=review, by=Actor.of_user(world.reviewer)),
        lambda: reject_review(review=review, by=Actor.of_user(world.admin_user)),
    )
    assert len(results) == 1 and len(errors) == 1 and isinstance(errors[0], ReviewAlreadyResolved)
    final = RememberReview.objects.get(pk=review.pk)
    stored = Fact.objects.filter(source="remember_agent_human_approved").count()
    assert (final.status, stored) in {("approved", 3), ("rejected", 0)}
