"""engram_client after a restart (issue 39): the server holds one live review per session, and a
fresh RememberTurn finds it there — `remember(turn)` resumes it instead of running the sub-agent
again, `resume(session_id)` waits on it — against a real server."""

import time

import pytest

from engram_client import EngramClient, EngramError, ReviewTimeout
from engram_client.remember import RememberTurn, Turn
from memory.actors import Actor
from review.models import RememberReview
from review.services import approve_review, reject_review
from tests.agents.test_remember_turn import _run_in_thread
from tests.review.samples import FILES, OUTPUT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reviewer_is_workspace_admin")]

TURN = Turn(session_id="turn-42", task="Document the ingest pipeline", artifacts=list(FILES), files=FILES, repo="web")


def _never(prompt):
    raise AssertionError("the remember sub-agent ran again")


def _first_runtime(engram):
    """A runtime that ran the sub-agent, submitted, then stopped waiting (and, say, restarted)."""
    calls = []

    def subagent(prompt):
        calls.append(prompt)
        return OUTPUT

    with pytest.raises(ReviewTimeout):
        RememberTurn(engram, run_subagent=subagent, timeout=0.5).remember(TURN)
    assert len(calls) == 1
    return RememberReview.objects.get()


def _when_waiting(timeout=10):
    """Until the live server (in this process) holds the runtime's long-poll."""
    from review import waiting

    deadline = time.monotonic() + timeout
    while waiting.active_waiters() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_restarted_runtime_resumes_the_pending_review_without_the_sub_agent(world, live_server):
    engram = EngramClient(live_server.url, world.coder.plain_key)
    review = _first_runtime(engram)
    restarted = RememberTurn(engram, run_subagent=_never, timeout=60)
    assert restarted.pending_review("turn-42") is None  # this process never knew it
    thread, outcome = _run_in_thread(lambda: restarted.resume("turn-42"))
    _when_waiting()
    approve_review(review=review, by=Actor.of_user(world.reviewer))
    thread.join(30)
    result = outcome["value"]
    assert result.status == "consumed" and result.outcome.id == review.pk and result.outcome.approved is True
    assert "approved=True" in result.note and result.decision.reason.startswith("resumed")
    assert RememberReview.objects.get().status == "consumed" and restarted.live_sessions() == set()
    with pytest.raises(ValueError, match="turn-42"):
        restarted.resume("turn-42")  # nothing live on the server any more


def test_remember_after_a_restart_resumes_the_live_review_instead_of_launching(world, live_server):
    engram = EngramClient(live_server.url, world.coder.plain_key)
    review = _first_runtime(engram)
    reject_review(review=review, by=Actor.of_user(world.reviewer), reviewer_note="Not now.")
    submitted = []
    result = RememberTurn(engram, run_subagent=_never, timeout=60).remember(TURN, on_submitted=submitted.append)
    assert result.status == "consumed" and result.outcome.id == review.pk and result.outcome.approved is False
    assert "Not now." in result.note and result.decision.launch is True
    assert result.decision.reason == f"resumed: review {review.pk} of session 'turn-42' is live on the server"
    assert submitted == []  # nothing was submitted
    assert RememberReview.objects.count() == 1 and RememberReview.objects.get().status == "consumed"


def test_remember_launches_again_once_the_sessions_review_is_consumed(world, live_server):
    engram = EngramClient(live_server.url, world.coder.plain_key)
    review = _first_runtime(engram)
    reject_review(review=review, by=Actor.of_user(world.reviewer))
    engram.reviews.consume(review.pk)
    calls = []
    helper = RememberTurn(engram, run_subagent=lambda prompt: calls.append(prompt) or OUTPUT, timeout=0.5)
    with pytest.raises(ReviewTimeout):
        helper.remember(TURN)
    assert len(calls) == 1
    assert list(RememberReview.objects.values_list("status", flat=True).order_by("pk")) == ["consumed", "pending"]


def test_the_review_client_lists_a_sessions_reviews(world, live_server):
    reviews = EngramClient(live_server.url, world.coder.plain_key).reviews
    first = reviews.submit(session_id="turn-42", output=OUTPUT, files=FILES)
    again = reviews.submit(session_id="turn-42", output=OUTPUT, files=FILES)
    assert again["id"] == first["id"]
    page = reviews.list(session_id="turn-42")
    assert (page["count"], [r["id"] for r in page["results"]]) == (1, [first["id"]])
    assert reviews.list(session_id="turn-42", status="consumed")["results"] == []
    assert reviews.live("turn-42")["id"] == first["id"] and reviews.live("turn-43") is None
    other = EngramClient(live_server.url, world.coder2.plain_key).reviews
    assert other.list(session_id="turn-42")["count"] == 0 and other.live("turn-42") is None
    with pytest.raises(EngramError) as err:
        reviews.list(session_id="turn-42", status="live")
    assert (err.value.status, err.value.code) == (400, "invalid_input") and "status" in err.value.fields
