"""Erasure in a real browser (issue 21): an admin selects, previews exactly what goes, confirms."""

import pytest

from memory.models import AuditEvent, Fact
from tests.browser_fixtures import logged_in_page, screenshot
from tests.factories import FactFactory

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SECRET = "Erin's badge PIN is 4471 and opens the server room."


def test_admin_previews_then_confirms_an_erasure(world, live_server, chromium):
    from playwright.sync_api import expect

    fact = FactFactory(domain=world.architecture, topic="badges", content=SECRET)
    kept = FactFactory(domain=world.architecture, topic="deploys", content="Deploys go out on Thursdays.")
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/erase/")
    page.get_by_label("A full-text search").check()
    page.get_by_test_id("erase-query").fill("badge PIN")
    page.get_by_test_id("erase-preview").click()
    preview = page.get_by_test_id("erase-preview-result")
    expect(preview).to_contain_text(SECRET)
    expect(page.get_by_test_id("erase-fact")).to_have_count(1)
    expect(page.get_by_test_id("count-memory.fact")).to_have_text("1")
    screenshot(page, "erasure-preview")
    assert Fact.objects.filter(pk=fact.pk).exists()  # the preview wrote nothing

    page.get_by_test_id("erase-reason").fill("Access request from Erin")
    page.get_by_test_id("erase-sure").check()
    page.get_by_test_id("erase-submit").click()
    result = page.get_by_test_id("erase-result")
    tombstone = AuditEvent.objects.get(verb="subject.erased")
    expect(page.get_by_test_id("tombstone-id")).to_have_text(f"#{tombstone.pk}")
    expect(result).not_to_contain_text("badge PIN")
    screenshot(page, "erasure-done")
    assert not Fact.objects.filter(pk=fact.pk).exists() and Fact.objects.filter(pk=kept.pk).exists()
