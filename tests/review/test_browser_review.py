"""A reviewer in a real browser (Playwright, Debian Chromium) resolves a remember review while
the agent runtime long-polls it over HTTP (engram_client.review), as in SPEC §8."""

import queue
import threading

import pytest

from engram_client import EngramClient, ReviewOutcome
from memory.models import Fact
from tests.browser_fixtures import logged_in_page, screenshot
from tests.review.samples import FILES, OUTPUT

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reviewer_is_workspace_admin"),
]

EDITED_NOTE = "The user wants pull requests under 300 lines and imperative commit messages."


def test_reviewer_deselects_edits_and_approves_while_the_agent_long_polls(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    agent_client = EngramClient(live_server.url, world.coder.plain_key, timeout=15).reviews
    submitted: queue.Queue = queue.Queue()
    outcome: dict[str, ReviewOutcome | BaseException] = {}

    def runtime() -> None:
        try:
            outcome["value"] = agent_client.remember_with_review(
                session_id="turn-browser",
                output=OUTPUT,
                files=FILES,
                repo="web",
                timeout=120,
                on_submitted=submitted.put,
            )
        except BaseException as exc:  # surfaced by the assertions below
            outcome["value"] = exc
            submitted.put(None)

    agent = threading.Thread(target=runtime, name="agent-runtime", daemon=True)
    agent.start()
    review = submitted.get(timeout=60)
    assert review is not None, outcome.get("value")
    assert review["review_url"] == f"{live_server.url}/review/remember/{review['id']}/"

    page = logged_in_page(chromium, world.reviewer, live_server.url)

    # The reviewer finds the waiting review in the queue on the dashboard.
    page.goto(live_server.url + "/")
    page.get_by_role("link", name=f"Remember review #{review['id']}", exact=True).click()
    expect(page.locator(".hitl-card")).to_contain_text("coder-a is waiting for your decision")
    assert page.url == review["review_url"]

    billing = page.locator('article[data-path="billing/rules.py"]')
    contributing = page.locator('article[data-path="CONTRIBUTING.md"]')

    # Deselect one item: saved at once (htmx), no reload.
    page.evaluate("window.__noReload = true")
    billing.get_by_test_id("select").uncheck()
    expect(billing.get_by_test_id("not-stored")).to_be_visible()

    # Edit one note: saved as typed, shown as a word diff against the suggestion.
    contributing.get_by_test_id("note").fill(EDITED_NOTE)
    diff = contributing.get_by_test_id("note-diff")
    expect(diff.locator("del")).to_have_text("400")
    expect(diff.locator("ins")).to_have_text("300")
    expect(contributing.get_by_test_id("saved")).to_be_visible()
    assert page.evaluate("window.__noReload") is True  # still the same document

    screenshot(page, "remember-review")

    # Survives a refresh mid-review: everything is in the database.
    page.reload()
    expect(page.locator('article[data-path="billing/rules.py"]').get_by_test_id("select")).not_to_be_checked()
    expect(page.locator('article[data-path="CONTRIBUTING.md"]').get_by_test_id("note")).to_have_value(EDITED_NOTE)

    page.get_by_test_id("approve").click()
    result = page.get_by_test_id("outcome")
    expect(result).to_contain_text("Approved")
    expect(result).to_contain_text("human edited")
    expect(page.get_by_test_id("approve")).to_have_count(0)
    screenshot(page, "remember-review-approved")

    # The agent's long-poll returns the stored ids; it consumed the review.
    agent.join(timeout=60)
    value = outcome.get("value")
    assert isinstance(value, ReviewOutcome), value
    assert value.approved is True and value.status == "consumed"
    assert value.selected_paths == ["docs/architecture.md", "CONTRIBUTING.md"]
    assert len(value.stored_ids) == 2
    assert value.edits == {"CONTRIBUTING.md": {"content": EDITED_NOTE}}
    stored = {f.source_file: f for f in Fact.objects.filter(pk__in=value.stored_ids)}
    assert stored["CONTRIBUTING.md"].human_edited is True
    assert stored["CONTRIBUTING.md"].content == EDITED_NOTE
    assert stored["CONTRIBUTING.md"].veracity == "human_stated"
    assert stored["docs/architecture.md"].human_edited is False
    assert not Fact.objects.filter(source_file="billing/rules.py").exists()

    # A second reviewer arriving late is told it was already resolved.
    page.goto(review["review_url"])
    expect(page.get_by_test_id("outcome")).to_contain_text("Approved by reviewer")
    page.context.close()


def test_a_stale_page_learns_in_place_that_another_reviewer_resolved_it(world, live_server, chromium):
    from playwright.sync_api import expect

    from memory.actors import Actor
    from review.services import approve_review, submit_review

    expect.set_options(timeout=20_000)
    review = submit_review(agent=world.coder, session_id="s", output=OUTPUT, files=FILES, repo="web")
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/review/remember/{review.pk}/")
    expect(page.get_by_test_id("approve")).to_be_visible()

    approve_review(review=review, by=Actor.of_user(world.admin_user))  # someone else, meanwhile
    page.get_by_test_id("reject").click()
    expect(page.get_by_test_id("conflict")).to_contain_text("already approved by wsadmin")
    expect(page.get_by_test_id("outcome")).to_contain_text("Approved")
    page.context.close()
