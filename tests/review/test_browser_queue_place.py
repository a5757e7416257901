"""Issue 37, point 5, in a real browser (Playwright, Debian Chromium): the queue keeps the
reviewer's place. An item opened from a filtered list's second page, by a click or by `j`, or
opened next after a decision, has the filters and the page in its URL: a reload shows the same
filtered page with the item highlighted, and "back to the list" returns there. The badges count
every waiting item whatever kind the list is narrowed to."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from memory.models import Conflict
from tests.browser_fixtures import logged_in_page, screenshot
from tests.review.queue_items import candidate, challenged, possible

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reviewer_reviews_world_domains"),
]

# Five pairs on unrelated subjects, so that no write asks about two pairs at once.
PAIRS = [
    ("The cache TTL is 60 seconds.", "The cache TTL is 300 seconds."),
    ("Deploys run on Fridays.", "Deploys never run on Fridays."),
    ("The API listens on port 8000.", "The API listens on port 8080."),
    ("Logs are kept for 7 days.", "Logs are kept for 30 days."),
    ("CI builds with Node 18.", "CI builds with Node 20."),
]
# The page's list, as "<kind>-<pk>" keys in the order shown.
LISTED = "els => els.map(e => e.dataset.kind + '-' + e.dataset.id)"


@pytest.fixture
def short_pages(monkeypatch):
    """Three entries a page (the server runs in this process), so five possible conflicts fill two."""
    from review import views_queue

    monkeypatch.setattr(views_queue, "PAGE_SIZE", 3)


@pytest.fixture
def mixed_queue(world):
    """Five possible conflicts across the domains, then two candidates and a challenged fact
    (newer, so an unfiltered list would show them first)."""
    domains = [world.architecture, world.conventions, world.repo_context]
    for i, (old, new) in enumerate(PAIRS):
        possible(world.coder, domains[i % 3], f"pair{i}", old, new)
    candidate(world.coder, world.architecture, "Run the linter before pushing.")
    candidate(world.coder2, world.conventions, "Branch names are kebab-case.")
    challenged(world.planner, world.repo_context, "slot", "Deploys go through the staging slot.")


def listed(page) -> list[str]:
    return page.get_by_test_id("queue-entry").evaluate_all(LISTED)


def query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def expect_place(page, key: str, number: int) -> None:
    """The list is the possible conflicts' page `number`, the kind filter shows it, and `key` is
    the highlighted entry."""
    from playwright.sync_api import expect

    expect(page.get_by_label("Kind")).to_have_value("possible")
    expect(page.get_by_test_id("pager")).to_contain_text(f"Page {number} of 2")
    expect(page.locator(f"#entry-{key}")).to_have_attribute("aria-current", "true")
    assert {k.split("-")[0] for k in listed(page)} == {"possible"}


def open_page_two(page, base_url: str) -> list[str]:
    """The filtered list (kind=possible), then its second page through the pager; its keys."""
    from playwright.sync_api import expect

    page.goto(f"{base_url}/review/?kind=possible")
    page.get_by_test_id("next-page").click()
    expect(page.get_by_test_id("pager")).to_contain_text("Page 2 of 2")
    return listed(page)


def test_an_item_opened_from_page_two_of_a_kind_filter_keeps_its_place_on_reload_and_back(
    world, live_server, chromium, short_pages, mixed_queue
):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    page = logged_in_page(chromium, world.reviewer, live_server.url, width=1366)
    key = open_page_two(page, live_server.url)[0]
    pk = key.split("-")[1]
    page.locator(f"#entry-{key}").get_by_role("link").click()
    expect(page.locator(f"#detail #item-{key}")).to_be_visible()
    # The pushed URL is the item's, with the list's filter and page.
    expect(page).to_have_url(re.compile(rf"/review/possible/{pk}/\?"))
    assert query(page.url) == {"kind": ["possible"], "page": ["2"]}
    page.reload()
    expect(page.locator(f"#detail #item-{key}")).to_be_visible()
    expect_place(page, key, 2)
    screenshot(page, "queue-place-reloaded")
    # Back to the list: the same filtered page, the item still highlighted.
    page.locator("#detail").get_by_test_id("back-to-list").click()
    expect(page).to_have_url(re.compile(r"/review/\?"))
    expect(page.locator("#detail [data-testid=queue-detail]")).to_have_count(0)
    expect_place(page, key, 2)
    page.context.close()


def test_j_opens_the_first_entry_of_page_two_and_a_reload_keeps_it(
    world, live_server, chromium, short_pages, mixed_queue
):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    page = logged_in_page(chromium, world.reviewer, live_server.url, width=1366)
    page.goto(f"{live_server.url}/review/?kind=possible&page=2")
    key = listed(page)[0]
    page.keyboard.press("j")
    expect(page.locator(f"#detail #item-{key}")).to_be_visible()
    expect(page).to_have_url(re.compile(rf"/review/possible/{key.split('-')[1]}/\?"))
    assert query(page.url) == {"kind": ["possible"], "page": ["2"]}
    page.reload()
    expect(page.locator(f"#detail #item-{key}")).to_be_visible()
    expect_place(page, key, 2)
    page.context.close()


def test_after_a_decision_the_next_item_opens_under_the_same_filter_and_page(
    world, live_server, chromium, short_pages, mixed_queue
):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    page = logged_in_page(chromium, world.reviewer, live_server.url, width=1366)
    decided, following = open_page_two(page, live_server.url)
    page.locator(f"#entry-{decided}").get_by_role("link").click()
    page.locator(f"#detail #item-{decided}").get_by_role("button", name="Both true").click()
    # The next entry of the filtered page opens, its URL keeping the filter and the page.
    expect(page.locator(f"#detail #item-{following}")).to_be_visible()
    expect(page).to_have_url(re.compile(rf"/review/possible/{following.split('-')[1]}/\?"))
    assert query(page.url) == {"kind": ["possible"], "page": ["2"]}
    assert Conflict.objects.get(pk=int(decided.split("-")[1])).resolution == "both_true"
    page.reload()
    expect(page.locator(f"#detail #item-{following}")).to_be_visible()
    # Four possible conflicts are left: page 2 holds the one opened, the decided one is gone.
    expect(page.get_by_test_id("pager")).to_contain_text("Page 2 of 2 (4 items)")
    expect(page.locator(f"#entry-{following}")).to_have_attribute("aria-current", "true")
    assert listed(page) == [following]
    expect(page.get_by_label("Kind")).to_have_value("possible")
    page.context.close()


def test_the_badges_under_a_kind_filter_count_every_waiting_item(world, live_server, chromium, mixed_queue):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    page = logged_in_page(chromium, world.reviewer, live_server.url, width=1366)
    page.goto(f"{live_server.url}/review/")
    counts = page.get_by_test_id("counts")
    everything = counts.inner_text()
    for badge in ("Candidate needing approval: 2", "Possible conflict: 5", "Challenged fact: 1"):
        assert badge in everything
    # Loaded with the filter, and narrowed through the filter's select (htmx): the same badges.
    page.goto(f"{live_server.url}/review/?kind=possible")
    expect(counts).to_have_text(everything)
    page.get_by_label("Kind").select_option("candidate")
    expect(page).to_have_url(re.compile(r"kind=candidate"))
    expect(page.get_by_test_id("queue-entry")).to_have_count(2)
    expect(counts).to_have_text(everything)
    screenshot(page, "queue-place-badges")
    page.context.close()
