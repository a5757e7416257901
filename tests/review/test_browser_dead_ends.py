"""Issue 37 in a real browser (Playwright, Debian Chromium): the dead ends a reviewer met, each
clicked through as they were met (activity links, conflict headings, /logout/, the favicon,
similarity, "Stored as fact", the decisions tab), and point 3 for every form: a refused
submission keeps everything typed and shows each field's error beside it, styled as an error."""

import re

import pytest
from django.conf import settings
from django.urls import reverse

from memory.models import AuditEvent, Conflict, Fact, Workspace
from tests.browser_fixtures import logged_in_page, screenshot
from tests.factories import FactFactory
from tests.review import link_world
from tests.review.queue_items import fact

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reviewer_reviews_world_domains"),
]

# The colour of var(--bad), as the browser computes it for an element styled with it.
BAD_COLOUR = """(el) => {
  const probe = document.createElement("span");
  probe.style.color = "var(--bad)";
  document.body.append(probe);
  const bad = getComputedStyle(probe).color;
  probe.remove();
  return [getComputedStyle(el).color, bad];
}"""


@pytest.fixture
def links(world):
    return link_world.build(world)


@pytest.fixture
def expect():
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    return expect


def _looks_like_an_error(locator) -> None:
    colour, bad = locator.evaluate(BAD_COLOUR)
    assert colour == bad, f"a field error in {colour}, not the error colour {bad}"


# --- Dead ends (issue 37, points 1, 5 and 7) ------------------------------------------------------
def test_the_dashboard_link_of_a_decided_both_true_opens_the_pair(world, links, live_server, chromium, expect):
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(live_server.url + "/")
    pk = links.both_true.pk
    # Wherever it points (the defect: /review/conflict/<pk>/, a 404), it must open the pair.
    link = page.get_by_test_id("activity").locator(
        f"a[href='/review/conflict/{pk}/'], a[href='/review/possible/{pk}/']"
    )
    expect(link.first).to_be_visible()
    with page.expect_navigation() as opened:
        link.first.click()
    assert opened.value.status == 200, opened.value.url
    expect(page.get_by_test_id("queue-detail")).to_contain_text("Indent with four spaces.")
    page.context.close()


def test_a_conflict_between_two_agent_facts_is_headed_by_its_rule_not_a_human_loss(
    world, links, live_server, chromium, expect
):
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/review/conflict/{links.agents_conflict.pk}/")
    heading = page.get_by_test_id("queue-detail").locator("h2").first
    expect(heading).to_contain_text(links.agents_conflict.get_rule_display())
    expect(heading).not_to_contain_text("human-stated")
    page.goto(f"{live_server.url}/review/conflict/{links.human_lost.pk}/")
    expect(page.get_by_test_id("queue-detail").locator("h2").first).to_contain_text("a human-stated fact lost")
    page.context.close()


def test_get_logout_shows_a_sign_out_button_that_signs_out(world, live_server, chromium, expect):
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    answer = page.goto(f"{live_server.url}/logout/")
    assert answer.status == 200
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/login/"))
    assert page.goto(f"{live_server.url}/review/").url.startswith(f"{live_server.url}/login/")
    page.context.close()


def test_the_pages_icon_is_not_a_404(world, live_server, chromium):
    """The icon a browser asks for: the page's declared one, or /favicon.ico when none is."""
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    for path in ("/", "/review/", "/memory/acme/"):
        page.goto(live_server.url + path)
        status = page.evaluate(
            """async () => {
              const link = document.querySelector("link[rel~=icon]");
              const answer = await fetch(link ? link.href : "/favicon.ico");
              return answer.status;
            }"""
        )
        assert status == 200, path
    page.context.close()


def test_a_contradicting_pair_shows_its_similarity_as_stored_not_1_00(world, links, live_server, chromium, expect):
    Conflict.objects.filter(pk=links.agents_conflict.pk).update(similarity=0.9962)
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/review/conflict/{links.agents_conflict.pk}/")
    expect(page.get_by_test_id("queue-detail")).to_contain_text("wording similarity 0.996")
    expect(page.locator("main")).not_to_contain_text("similarity 1.00")
    # The fact page lists the same conflict: the same figure, labelled the same way.
    page.goto(live_server.url + reverse("review:fact", args=[world.workspace.slug, links.agents_conflict.loser_id]))
    expect(page.locator("main")).to_contain_text("wording similarity 0.996")
    expect(page.locator("main")).not_to_contain_text("similarity 1.00")
    page.context.close()


def test_stored_as_fact_leads_a_non_staff_reviewer_to_the_fact(world, links, live_server, chromium, expect):
    type(world.reviewer).objects.filter(pk=world.reviewer.pk).update(is_staff=False)  # no admin site for them
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/review/remember/{links.approved.pk}/")
    stored = page.locator("span.ok", has_text="Stored as fact").locator("a")
    expect(stored.first).to_be_visible()
    first_id = int(stored.first.inner_text().lstrip("#"))
    hrefs = [link.get_attribute("href") for link in stored.all()]
    with page.expect_navigation() as opened:
        stored.first.click()
    assert opened.value.status == 200 and "/admin/" not in page.url, page.url
    expect(page.get_by_test_id("fact-content")).to_contain_text(Fact.objects.get(pk=first_id).content[:40])
    for href in hrefs[1:]:  # every one shown opens for them
        answer = page.goto(live_server.url + href)
        assert answer.status == 200 and "/admin/" not in page.url, href
    page.context.close()


def test_every_memory_tab_a_member_is_shown_opens(world, live_server, chromium, expect):
    """A member who may not record meeting decisions is not shown the tab; each tab shown opens."""
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/policies/")
    tabs = page.get_by_role("navigation", name="Memory browser").get_by_role("link")
    expect(tabs.first).to_be_visible()
    assert "Meeting decisions" not in tabs.all_inner_texts()
    for href in [tab.get_attribute("href") for tab in tabs.all()]:
        assert page.goto(live_server.url + href).status == 200, href
    page.context.close()


# --- Point 3: refused forms keep what was typed, errors beside their fields ----------------------
def test_a_refused_fact_edit_keeps_what_was_typed_with_the_error_beside_the_text(world, live_server, chromium, expect):
    live = fact(world.coder, world.architecture, "cache", "The cache TTL is 60 seconds.")
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(live_server.url + reverse("review:fact", args=[world.workspace.slug, live.pk]))
    too_long = "The cache TTL is " + "very " * (settings.ENGRAM_FACT_MAX_CHARS // 5) + "long."
    form = page.get_by_test_id("edit-form")
    form.locator("textarea[name=content]").fill(too_long)
    form.locator("input[name=reason]").fill("measured in production")
    with page.expect_navigation() as answer:
        form.get_by_role("button", name="Supersede").click()
    assert answer.value.status == 400
    error = page.get_by_test_id("error-content")
    expect(error).to_contain_text(f"At most {settings.ENGRAM_FACT_MAX_CHARS} characters")
    assert page.locator("textarea[name=content]").get_attribute("aria-describedby") == "error-content"
    _looks_like_an_error(error)
    expect(page.locator("textarea[name=content]")).to_have_value(too_long)
    expect(page.locator("input[name=reason]")).to_have_value("measured in production")
    assert Fact.objects.get(pk=live.pk).superseded_by_id is None
    page.context.close()


def test_a_refused_meeting_decision_keeps_every_field_with_its_error_beside_the_decisions(
    world, live_server, chromium, expect, settings
):
    settings.ENGRAM_FACT_MAX_CHARS = 60
    decisions = "We drop the Mongo cluster by March.\n" + "Billing moves " + "x" * 60
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(live_server.url + reverse("review:decisions", args=[world.workspace.slug]))
    page.get_by_label("Meeting title").fill("Q3 planning")
    page.get_by_label("Topic").fill("storage")
    page.get_by_label("Decisions").fill(decisions)
    with page.expect_navigation() as answer:
        page.get_by_role("button", name="Record decisions").click()
    assert answer.value.status == 422
    error = page.get_by_test_id("error-decisions")
    expect(error).to_contain_text("Decision 2:")
    assert error.evaluate("(el) => el.getAttribute('id')") == page.get_by_label("Decisions").get_attribute(
        "aria-describedby"
    )
    _looks_like_an_error(error)
    expect(page.get_by_label("Decisions")).to_have_value(decisions)
    expect(page.get_by_label("Meeting title")).to_have_value("Q3 planning")
    expect(page.get_by_label("Topic")).to_have_value("storage")
    screenshot(page, "refusal-meeting-decisions")
    assert not Fact.objects.filter(domain__name="decisions").exists()
    page.context.close()


def test_a_refused_erasure_selection_says_why_beside_the_field_and_keeps_it(world, live_server, chromium, expect):
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/erase/")
    page.locator("input[name=kind][value=ids]").check()
    page.get_by_test_id("erase-ids").fill("12, twelve")
    with page.expect_navigation() as answer:
        page.get_by_test_id("erase-preview").click()
    assert answer.value.status == 400
    error = page.get_by_test_id("error-ids")
    expect(error).to_contain_text("fact ids are positive integers")
    assert page.get_by_test_id("erase-ids").get_attribute("aria-describedby") == "error-ids"
    _looks_like_an_error(error)
    expect(page.get_by_test_id("erase-ids")).to_have_value("12, twelve")
    expect(page.locator("input[name=kind][value=ids]")).to_be_checked()
    page.context.close()


def test_a_refused_erasure_keeps_the_preview_reason_and_confirmation(world, live_server, chromium, expect):
    secret = FactFactory(domain=world.architecture, topic="badges", content="Erin's badge PIN is 4471.")
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/erase/?kind=ids&ids={secret.pk}")
    # Blank (spaces pass the browser's `required`): refused, the preview and the tick still there.
    page.get_by_test_id("erase-reason").fill("   ")
    page.get_by_test_id("erase-sure").check()
    with page.expect_navigation() as answer:
        page.get_by_test_id("erase-submit").click()
    assert answer.value.status == 400
    expect(page.get_by_test_id("erase-preview-result")).to_contain_text("Erin's badge PIN")
    error = page.get_by_test_id("error-reason")
    expect(error).to_contain_text("Required")
    _looks_like_an_error(error)
    expect(page.get_by_test_id("erase-sure")).to_be_checked()
    screenshot(page, "refusal-erasure")
    assert Fact.objects.filter(pk=secret.pk).exists()
    # Corrected in place, it erases.
    page.get_by_test_id("erase-reason").fill("Access request from Erin")
    page.get_by_test_id("erase-submit").click()
    expect(page.get_by_test_id("erase-result")).to_be_visible()
    assert AuditEvent.objects.filter(verb="subject.erased").count() == 1
    assert not Fact.objects.filter(pk=secret.pk).exists()
    page.context.close()


def test_a_refused_policy_budget_keeps_the_typed_value_with_the_error_beside_it(world, live_server, chromium, expect):
    before = Workspace.objects.get(pk=world.workspace.pk).policy_budget_chars
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/policies/")
    budget = page.get_by_test_id("budget-form").locator("input[name=policy_budget_chars]")
    budget.evaluate("(el) => el.removeAttribute('max')")  # a page older than the limit, say
    budget.fill("999999999")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.get_by_test_id("budget-form").get_by_role("button", name="Set budget").click()
    assert answer.value.status == 422
    error = page.get_by_test_id("error-budget")
    expect(error).to_contain_text("A whole number of characters")
    _looks_like_an_error(error)
    expect(page.get_by_test_id("budget-form").locator("input[name=policy_budget_chars]")).to_have_value("999999999")
    screenshot(page, "refusal-policy-budget")
    assert Workspace.objects.get(pk=world.workspace.pk).policy_budget_chars == before
    page.context.close()
