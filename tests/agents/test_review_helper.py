"""engram_client.review against a real server: submit, long-poll woken by a decision, consume."""

import threading
import time

import pytest

from engram_client import EngramClient, EngramError, ReviewTimeout, final_answer_note
from memory.actors import Actor
from review import waiting
from review.models import RememberReview
from review.services import reject_review
from tests.procs import wait_for
from tests.review.samples import FILES, OUTPUT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reviewer_is_workspace_admin")]


def test_the_long_poll_returns_as_soon_as_a_person_decides_then_consumes(world, live_server):
    client = EngramClient(live_server.url, world.coder.plain_key).reviews
    result = {}

    def runtime():
        result["outcome"] = client.remember_with_review(
            session_id="t",
            output=OUTPUT,
            files=FILES,
            repo="web",
            timeout=60,
            on_submitted=result.setdefault("sub", {}).update,
        )

    thread = threading.Thread(target=runtime)
    thread.start()
    # The live server runs in this process: its long-poll is seen waiting here.
    wait_for(lambda: waiting.active_waiters() == 1, timeout=30, what="the runtime's long-poll")
    decided_at = time.monotonic()
    reject_review(review=RememberReview.objects.get(), by=Actor.of_user(world.reviewer), reviewer_note="Not now.")
    thread.join(timeout=30)
    assert time.monotonic() - decided_at < 5  # woken by the decision, not by the 30 s timeout
    outcome = result["outcome"]
    assert outcome.status == "consumed" and outcome.approved is False and outcome.stored_ids == []
    assert outcome.review_url.endswith(f"/review/remember/{outcome.id}/")
    assert "Not now." in final_answer_note(outcome)
    assert RememberReview.objects.get().status == "consumed"


def test_errors_carry_the_api_code_and_wait_can_time_out(world, live_server):
    client = EngramClient(live_server.url, world.coder.plain_key).reviews
    with pytest.raises(EngramError) as err:
        client.submit(session_id="t", output="nothing here")
    assert err.value.status == 400 and err.value.code == "no_review_items"
    review = client.submit(session_id="t", output=OUTPUT, files=FILES)
    with pytest.raises(ReviewTimeout):
        client.wait(review["id"], timeout=1)
    with pytest.raises(EngramError) as err:
        client.consume(review["id"])
    assert err.value.status == 409 and err.value.code == "review_pending"
    with pytest.raises(EngramError) as err:
        EngramClient(live_server.url, "engram_wrong").reviews.get(review["id"])
    assert err.value.status == 401


def test_a_busy_server_answers_the_long_poll_at_once_and_the_helper_waits_its_retry_after(world, live_server, settings):
    settings.ENGRAM_MAX_WAITERS = 0  # the server holds no long-poll: every wait answers at once
    pauses = []

    def sleep(seconds):
        pauses.append(seconds)
        reject_review(review=RememberReview.objects.get(), by=Actor.of_user(world.reviewer), reviewer_note="No.")

    client = EngramClient(live_server.url, world.coder.plain_key, sleep=sleep).reviews
    outcome = client.remember_with_review(session_id="t", output=OUTPUT, files=FILES, timeout=60)
    assert outcome.status == "consumed" and outcome.approved is False
    assert pauses == [pytest.approx(2, abs=0.1)]
