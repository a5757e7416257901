"""Issue 37, point 5, through the Django client: the list's filters, order and page travel in the
item's URL and in its decisions' URLs, an item's page shows the list page that holds it (or says
it is not in the filtered list), "back to the list" returns to that page with the item marked, and
the badges count every kind whatever kind the list is narrowed to. The browser side is
tests/review/test_browser_queue_place.py."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from guardian.shortcuts import assign_perm

from memory.models import Fact
from review import views_queue
from review.selectors_queue import queue
from tests.review.queue_items import candidate, challenged

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def arch_reviewer(world):
    """`world.reviewer` may decide architecture only."""
    assign_perm("memory.review_domain", world.reviewer, world.architecture)
    return world.reviewer


@pytest.fixture
def short_pages(monkeypatch):
    monkeypatch.setattr(views_queue, "PAGE_SIZE", 2)


@pytest.fixture
def five_candidates(world, arch_reviewer) -> list:
    """Five candidates, oldest first, and a challenged fact (another kind)."""
    made = [candidate(world.coder, world.architecture, f"Rule number {i}.") for i in range(5)]
    challenged(world.planner, world.architecture, "ttl", "The cache TTL is 60 seconds.")
    return made


def entry_tag(html: str, key: str) -> str:
    match = re.search(rf'<li id="entry-{key}"[^>]*>', html)
    assert match, f"no entry {key}"
    return match.group(0)


def entry_link(html: str, key: str) -> str:
    match = re.search(rf'<li id="entry-{key}"[^>]*>.*?</li>', html, re.S)
    assert match, f"no entry {key}"
    return re.search(r"<a [^>]*>", match.group(0)).group(0)


def test_the_kind_filter_narrows_the_list_not_the_counts(world, arch_reviewer):
    candidate(world.coder, world.architecture, "Run the linter before pushing.")
    challenged(world.planner, world.architecture, "ttl", "The cache TTL is 60 seconds.")
    entries, counts = queue(arch_reviewer, {"kind": "challenged"})
    assert {e.kind for e in entries} == {"challenged"}
    assert counts == queue(arch_reviewer, {})[1]
    assert counts["candidate"] == 1 and counts["challenged"] == 1
    # The other filters narrow the counts too: they choose what the badges are of.
    assert queue(arch_reviewer, {"kind": "challenged", "agent": "planner-a"})[1]["candidate"] == 0


def test_a_kind_filter_does_not_say_the_list_is_limited_by_the_kinds_it_leaves_out(
    world, client, arch_reviewer, monkeypatch
):
    from review import selectors_queue

    monkeypatch.setattr(selectors_queue, "LIST_LIMIT", 2)
    for i in range(3):
        candidate(world.coder, world.architecture, f"Rule number {i}.")
    challenged(world.planner, world.architecture, "ttl", "The cache TTL is 60 seconds.")
    client.force_login(arch_reviewer)
    filtered = client.get("/review/?kind=challenged")
    assert filtered.context["list_limit"] is None
    assert filtered.context["counts"]["candidate"] == 3
    assert client.get("/review/?kind=candidate").context["list_limit"] == 2


def test_the_entries_links_carry_the_filters_order_and_page(client, world, short_pages, five_candidates):
    client.force_login(world.reviewer)
    html = client.get("/review/?kind=candidate&order=oldest&page=2").content.decode()
    link = entry_link(html, f"candidate-{five_candidates[2].pk}")
    url = f"/review/candidate/{five_candidates[2].pk}/?kind=candidate&amp;order=oldest&amp;page=2"
    assert f'href="{url}"' in link and f'hx-get="{url}"' in link and 'hx-push-url="true"' in link
    # Page 1 of an unfiltered list: the item's URL is its own.
    first = client.get("/review/").content.decode()
    assert f'href="/review/candidate/{five_candidates[4].pk}/"' in entry_link(
        first, f"candidate-{five_candidates[4].pk}"
    )


def test_an_items_page_shows_the_list_page_that_holds_it_with_its_filters(client, world, short_pages, five_candidates):
    client.force_login(world.reviewer)
    item = five_candidates[4]  # newest first: the first entry of page 1, whatever page was asked
    page = client.get(f"/review/candidate/{item.pk}/", {"kind": "candidate", "page": "3"})
    assert page.context["page_obj"].number == 1
    assert page.context["params"] == {"kind": "candidate"}
    assert {e.kind for e in page.context["entries"]} == {"candidate"}
    html = page.content.decode()
    assert 'aria-current="true"' in entry_tag(html, f"candidate-{item.pk}")
    assert 'data-testid="not-listed"' not in html
    oldest = client.get(f"/review/candidate/{five_candidates[0].pk}/", {"kind": "candidate"})
    assert oldest.context["page_obj"].number == 3
    assert oldest.context["list_query"] == "kind=candidate&page=3"


def test_an_item_the_filters_leave_out_is_said_to_be_outside_the_list(client, world, five_candidates):
    client.force_login(world.reviewer)
    item = five_candidates[0]
    html = client.get(f"/review/candidate/{item.pk}/?kind=challenged").content.decode()
    note = re.search(r'data-testid="not-listed">(.*?)</p>', html, re.S).group(1)
    assert "is not in this list: these filters leave it out" in note
    assert f'href="/review/candidate/{item.pk}/"' in note  # the way to it without filters
    assert f'id="item-candidate-{item.pk}"' in html  # still open beside


def test_back_to_the_list_returns_to_the_filtered_page_with_the_item_marked(
    client, world, short_pages, five_candidates
):
    client.force_login(world.reviewer)
    item = five_candidates[2]
    fragment = client.get(f"/review/candidate/{item.pk}/?kind=candidate&page=2", **HX).content.decode()
    back = f'href="/review/?kind=candidate&amp;page=2&amp;current=candidate-{item.pk}"'
    assert back in fragment and 'data-testid="back-to-list"' in fragment
    listed = client.get(f"/review/?kind=candidate&page=2&current=candidate-{item.pk}")
    assert listed.context["page_obj"].number == 2
    assert 'aria-current="true"' in entry_tag(listed.content.decode(), f"candidate-{item.pk}")


def test_a_decision_keeps_the_lists_query(client, world, five_candidates):
    client.force_login(world.reviewer)
    item = five_candidates[1]
    query = "kind=candidate&order=oldest"
    fragment = client.get(f"/review/candidate/{item.pk}/?{query}", **HX).content.decode()
    decide = f"/review/candidate/{item.pk}/decide/?kind=candidate&amp;order=oldest"
    assert f'action="{decide}"' in fragment and f'hx-post="{decide}"' in fragment
    # The outcome's link to the item keeps it (htmx) ...
    outcome = client.post(f"/review/candidate/{item.pk}/decide/?{query}", {"action": "approve"}, **HX)
    assert f'href="/review/candidate/{item.pk}/?kind=candidate&amp;order=oldest"' in outcome.content.decode()
    # ... and a plain form POST comes back to the item with the list as it was.
    other = five_candidates[2]
    plain = client.post(f"/review/candidate/{other.pk}/decide/?{query}", {"action": "approve"})
    assert plain.status_code == 302 and plain["Location"] == f"/review/candidate/{other.pk}/?{query}"


def test_the_history_restoring_an_item_gets_the_whole_page(client, world, five_candidates):
    client.force_login(world.reviewer)
    item = five_candidates[0]
    restored = client.get(
        f"/review/candidate/{item.pk}/?kind=candidate", HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    )
    html = restored.content.decode()
    assert "<html" in html and 'id="queue"' in html and f'id="item-candidate-{item.pk}"' in html
    listed = client.get("/review/?kind=candidate", HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert "<html" in listed.content.decode()


def test_the_list_under_a_kind_filter_stays_within_its_query_budget(
    client, world, arch_reviewer, django_assert_max_num_queries
):
    for i in range(30):
        candidate(world.coder, world.architecture, f"Rule {i}.")
    for i in range(5):
        challenged(world.planner, world.architecture, f"t{i}", f"Fact {i} holds.")
    client.force_login(world.reviewer)
    with django_assert_max_num_queries(25):
        response = client.get("/review/?kind=challenged")
    assert response.context["counts"]["candidate"] == 30
    assert Fact.objects.filter(status="challenged").count() == 5


def test_each_page_read_in_part_is_the_page_of_the_whole_list(world, arch_reviewer, short_pages):
    """Issue 38: a page reads each kind's first pages × PAGE_SIZE items, not LIST_LIMIT of each;
    every page, in either order, holds exactly the entries of that page of the whole list, and the
    page count is the whole list's."""
    subjects = [
        "The cache TTL is 60 seconds.",
        "Builds run on GitHub Actions.",
        "Logs are kept 30 days.",
        "Emails go out through Postmark.",
    ]
    for i, text in enumerate(subjects):  # two kinds interleaved in time
        candidate(world.coder, world.architecture, f"Rule number {i}.")
        challenged(world.planner, world.architecture, f"subject-{i}", text)
    client = Client()
    client.force_login(arch_reviewer)
    for order in ("newest", "oldest"):
        params = {} if order == "newest" else {"order": "oldest"}
        whole = [e.key for e in queue(arch_reviewer, params)[0]]
        assert len(whole) == 8
        for number in range(1, 5):
            response = client.get("/review/", {**params, "page": str(number)})
            page = response.context["page_obj"]
            assert [e.key for e in page] == whole[(number - 1) * 2 : number * 2], (order, number)
            assert page.paginator.num_pages == 4
