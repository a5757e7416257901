"""Issue 37, points 2–4, in a real browser (Playwright, Debian Chromium): a refused htmx decision
is shown beside the button pressed, the fact edit keeps what was typed, and no key decides by
accident (the legend lists the keys of the item shown; irreversible choices ask or need a reason;
Enter alone decides nothing)."""

import pytest
from django.conf import settings
from django.urls import reverse

from memory.models import Conflict, Fact
from review.services import submit_review
from tests.browser_fixtures import logged_in_page, screenshot
from tests.review.queue_items import challenged, fact, possible
from tests.review.samples import FILES, OUTPUT

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reviewer_reviews_world_domains"),
]

# Long enough for a key's request (if any) to have come back and been swapped in.
SETTLE_MS = 1500


def test_a_refused_remember_approval_is_shown_beside_the_button_which_stays_usable(world, live_server, chromium):
    """The reviewer decides repo:web/context only; the review also holds profile and knowledge
    items, so approving is refused (403). The refusal says why and what to do, where they clicked."""
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    review = submit_review(agent=world.coder, session_id="turn-refused", output=OUTPUT, files=FILES, repo="web")
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/review/remember/{review.pk}/")
    approve = page.get_by_test_id("approve")
    approve.click()
    refusal = page.get_by_test_id("request-refused")
    expect(refusal).to_be_visible()
    expect(refusal).to_contain_text("You may not decide items stored in")
    expect(refusal).to_contain_text("workspace admin")  # what to do
    # Beside the control that was clicked, and the control usable again.
    assert page.evaluate("() => document.querySelector('[data-testid=approve]').nextElementSibling.dataset.testid") == (
        "request-refused"
    )
    expect(approve).to_be_enabled()
    screenshot(page, "refusal-remember-403")
    review.refresh_from_db()
    assert review.is_pending
    # Pressed again: still one message, not a pile.
    approve.click()
    expect(refusal).to_have_count(1)
    page.context.close()


def test_a_refused_fact_edit_keeps_the_text_and_reason_and_says_why_beside_each_field(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    live = fact(world.coder, world.architecture, "cache", "The cache TTL is 60 seconds.")
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(live_server.url + reverse("review:fact", args=[world.workspace.slug, live.pk]))
    too_long = "The cache TTL is " + "very " * (settings.ENGRAM_FACT_MAX_CHARS // 5) + "long."
    form = page.get_by_test_id("edit-form")
    form.locator("textarea[name=content]").fill(too_long)
    form.locator("input[name=reason]").fill("measured in production")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        form.get_by_role("button", name="Supersede").click()
    assert answer.value.status == 400
    form = page.get_by_test_id("edit-form")
    expect(form.get_by_test_id("error-content")).to_contain_text(f"At most {settings.ENGRAM_FACT_MAX_CHARS} characters")
    expect(form.locator("textarea[name=content]")).to_have_value(too_long)
    expect(form.locator("input[name=reason]")).to_have_value("measured in production")
    screenshot(page, "refusal-fact-edit")
    # Blank (whitespace passes the browser's `required`): the same, with its own message.
    form.locator("textarea[name=content]").fill("   ")
    form.get_by_role("button", name="Supersede").click()
    expect(page.get_by_test_id("edit-form").get_by_test_id("error-content")).to_contain_text("Content is required")
    expect(page.get_by_test_id("edit-form").locator("input[name=reason]")).to_have_value("measured in production")
    assert Fact.objects.get(pk=live.pk).superseded_by_id is None
    page.context.close()


def test_on_a_possible_conflict_a_decides_nothing_and_both_true_asks_first(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    pair = possible(world.coder, world.architecture, "retries", "Retries: three.", "Retries: five.")
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/review/possible/{pair.pk}/")
    expect(page.get_by_test_id("queue-detail")).to_be_visible()
    keys = page.get_by_test_id("item-keys")
    expect(keys).to_contain_text("b both true (asks first)")
    assert [k.strip() for k in keys.locator("kbd").all_inner_texts()] == ["s", "1", "2", "b"]  # no a, no d
    page.keyboard.press("a")
    page.wait_for_timeout(SETTLE_MS)
    assert Conflict.objects.get(pk=pair.pk).status == Conflict.Status.OPEN
    # b asks; dismissed, nothing is recorded.
    questions: list[str] = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.keyboard.press("b")
    page.wait_for_timeout(SETTLE_MS)
    assert questions and "never asked again" in questions[0]
    assert Conflict.objects.get(pk=pair.pk).status == Conflict.Status.OPEN
    page.once("dialog", lambda dialog: dialog.accept())
    page.keyboard.press("b")
    expect(page.get_by_test_id("decision-done").first).to_be_visible()
    assert Conflict.objects.get(pk=pair.pk).resolution == "both_true"
    page.context.close()


def test_deprecating_needs_a_reason_and_enter_alone_decides_nothing(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    doubted = challenged(world.planner, world.conventions, "port", "The dev server listens on 8000.")
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/review/challenged/{doubted.pk}/")
    keys = page.get_by_test_id("item-keys")
    expect(keys).to_contain_text("a revalidate")
    expect(keys).to_contain_text("d deprecate (type the reason, then Ctrl+Enter)")
    page.keyboard.press("d")
    page.wait_for_function("() => document.activeElement.matches('[data-field=reason]')")
    page.keyboard.press("Enter")  # Enter alone: nothing
    page.wait_for_timeout(SETTLE_MS)
    assert Fact.objects.get(pk=doubted.pk).status == "challenged"
    page.keyboard.press("Control+Enter")  # no reason typed: says so, decides nothing
    expect(page.get_by_test_id("key-hint")).to_contain_text("Type the reason first")
    page.wait_for_timeout(SETTLE_MS)
    assert Fact.objects.get(pk=doubted.pk).status == "challenged"
    # The button without a reason: refused beside the field (422), nothing deprecated.
    page.locator("[data-action=deny]").click()
    expect(page.get_by_test_id("error-reason")).to_contain_text("Say why the fact is deprecated")
    assert Fact.objects.get(pk=doubted.pk).status == "challenged"
    page.locator("[data-field=reason]").focus()
    page.keyboard.type("It moved to 8080.")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_test_id("decision-done").first).to_be_visible()
    assert Fact.objects.get(pk=doubted.pk).status == "deprecated"
    page.context.close()
