"""The memory browser with a full-text query (issue 38): PostgreSQL ranks every match to order
them, so the page's ids and the count of all matches are read in that one statement
(review.selectors_pages.RankedPaginator), with the same pages and counts as BoundedPaginator."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from memory.pagination import BoundedPaginator
from review.selectors_pages import RankedPaginator, browse_facts
from tests.review.test_page_query_counts import bulk_facts

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer(world) -> Client:
    client = Client()
    client.force_login(world.admin_user)
    return client


def page_of(paginator: BoundedPaginator, number: object) -> tuple:
    page = paginator.get_page(number)
    counted = page.paginator
    return page.number, counted.count, counted.num_pages, counted.count_label, counted.pages_label, [f.pk for f in page]


def test_ranked_pages_are_the_bounded_paginators_pages(world, monkeypatch):
    """Every page (past the last, not a number, below the first) and the count, capped or not."""
    bulk_facts(world, 7)  # "Service … deploys from the main branch."
    bulk_facts(world, 3)
    for cap in (4, 10_000):
        monkeypatch.setattr("memory.pagination.COUNT_CAP", cap)
        facts, extra = browse_facts(world.admin_user, world.workspace, {"q": "deploys"})
        assert extra["ranked"] is True
        for number in (1, 2, 3, 4, 5, 99, 0, -1, "x", None):
            assert page_of(RankedPaginator(facts, 3), number) == page_of(BoundedPaginator(facts, 3), number), (
                cap,
                number,
            )


def test_a_search_counts_its_matches_in_the_statement_that_reads_its_page(world, reviewer):
    bulk_facts(world, 7)
    reviewer.get("/memory/acme/?q=deploys")
    with CaptureQueriesContext(connection) as queries:
        page = reviewer.get("/memory/acme/?q=deploys")
    text = " ".join(page.content.decode().split())
    assert "7 facts matching “deploys”" in text
    sql = [q["sql"] for q in queries]
    assert sum("COUNT(*) OVER ()" in s for s in sql) == 1
    assert not any("SELECT COUNT(*)" in s for s in sql), [s for s in sql if "COUNT" in s]


def test_a_search_without_a_match_says_so(world, reviewer):
    bulk_facts(world, 2)
    text = " ".join(reviewer.get("/memory/acme/?q=zebras").content.decode().split())
    assert "0 facts matching “zebras”" in text
