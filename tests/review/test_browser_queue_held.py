"""A reviewer completes a held candidate in the queue and then approves it (issue 18), in Chromium:
approving it first does not lose it, the completion redraws the gates in place, the approval
promotes it."""

import pytest

from memory.models import Candidate
from tests.browser_fixtures import logged_in_page, screenshot
from tests.memory.test_services_promotion import submit

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reviewer_reviews_world_domains"),
]


def test_reviewer_completes_a_held_candidate_in_the_queue_then_approves_it(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    held = submit(world, requires_human_review=True, scope={"applies_to": ["public_api"]})
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/review/")
    entry = page.locator(f"#entry-candidate-{held.pk}")
    expect(entry.get_by_test_id("entry-waiting")).to_have_text("waiting on scope / anti-scope and a person's approval")

    # Approving it while held does not promote it, and does not make it vanish.
    entry.get_by_role("link").click()
    detail = page.locator("#detail")
    expect(detail.get_by_test_id("completion-form")).to_be_visible()
    detail.locator("[data-action=approve]").click()
    expect(detail.get_by_test_id("decision-done")).to_contain_text("held on gate")
    expect(entry.get_by_test_id("entry-waiting")).to_have_text("approved, waiting on scope / anti-scope")
    assert Candidate.objects.get(pk=held.pk).fact_id is None

    # Completed in place: the gates are computed again, nothing else left to add.
    page.goto(f"{live_server.url}/review/candidate/{held.pk}/")
    form = detail.get_by_test_id("completion-form")
    form.locator("[data-field=does_not_apply_to]").fill("internal_refactor\ndocs")
    form.locator("[data-field=note]").fill("from run 12's diff")
    form.scroll_into_view_if_needed()
    screenshot(page, "queue-held-completion")
    form.locator("[data-action=complete]").click()
    expect(detail.get_by_test_id("completion-done")).to_contain_text("Added anti-scope")
    expect(detail.locator("[data-gate=scope]")).to_contain_text("internal_refactor, docs")
    expect(detail.get_by_test_id("completion-form")).to_have_count(0)
    expect(entry.get_by_test_id("entry-waiting")).to_have_text("approved, ready to promote")
    screenshot(page, "queue-held-completed")

    # Then approved: promoted, and out of the queue.
    detail.locator("[data-action=approve]").click()
    expect(detail.get_by_test_id("decision-done")).to_contain_text("fact #")
    candidate = Candidate.objects.get(pk=held.pk)
    assert candidate.promotion_status == "active"
    assert candidate.fact.not_valid_for == ["internal_refactor", "docs"]
    expect(page.locator(f"#entry-candidate-{held.pk}")).to_have_count(0)
    page.context.close()
