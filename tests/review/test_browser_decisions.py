"""The meeting decisions page in a real browser: a refused date kept in place, then the decisions
recorded with each line's outcome, and the fact page's provenance."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import Episode, Fact
from tests.browser_fixtures import logged_in_page, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DECISIONS = "- We drop the Mongo cluster by March.\n- Billing moves to PostgreSQL 16."


def test_an_admin_pastes_a_meetings_decisions_fixes_the_date_and_sees_each_outcome(world, live_server, chromium):
    from playwright.sync_api import expect

    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/")
    page.get_by_role("link", name="Meeting decisions").click()
    expect(page.get_by_role("heading", name="Meeting decisions")).to_be_visible()

    page.get_by_label("Meeting title").fill("Q3 planning")
    page.get_by_label("Date").fill((timezone.localdate() + timedelta(days=3)).isoformat())
    page.get_by_label("Decisions").fill(DECISIONS)
    page.get_by_role("button", name="Record decisions").click()
    expect(page.get_by_test_id("form-errors")).to_be_visible()
    expect(page.locator("#date-err")).to_contain_text("must not be in the future")
    expect(page.get_by_label("Decisions")).to_have_value(DECISIONS)  # the input is kept
    expect(page.get_by_label("Meeting title")).to_have_value("Q3 planning")
    assert not Fact.objects.filter(domain__name="decisions").exists()

    page.get_by_label("Date").fill((timezone.localdate() - timedelta(days=1)).isoformat())
    page.get_by_role("button", name="Record decisions").click()
    outcomes = page.get_by_test_id("outcome")
    expect(outcomes).to_have_count(2)
    expect(outcomes.first).to_have_attribute("data-outcome", "created")
    screenshot(page, "meeting-decisions")
    assert Episode.objects.filter(kind="meeting", title="Q3 planning").count() == 1

    outcomes.first.get_by_role("link").first.click()
    expect(page.get_by_test_id("fact-content")).to_contain_text("We drop the Mongo cluster by March.")
    expect(page.get_by_test_id("provenance")).to_be_visible()
    expect(page.get_by_test_id("provenance-session-key")).to_contain_text("none")
