"""The queue list read as keys (issue 38): every kind's first LIST_LIMIT items as (kind, pk,
moment), counted in the same statements, and only the page's entries read in full. The page that
holds an item past the first page is found in that one read, and every page of the list shows
its entries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.models import Workspace
from review import selectors_queue, views_queue
from review.selectors_held import count_waiting_candidates, waiting_candidate_keys, waiting_candidates
from review.selectors_queue import queue
from tests.memory.test_services_promotion import replay, submit
from tests.review.queue_items import candidate, challenged

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer(world, client, reviewer_reviews_world_domains):
    client.force_login(world.reviewer)
    return client


def challenged_facts(world, n: int) -> list[int]:
    """`n` challenged facts, oldest first (different claims: the write path compares a domain's facts)."""
    return [
        challenged(world.coder, world.architecture, f"rule-{i}", f"Service {i} answers on port {8000 + i}.").pk
        for i in range(n)
    ]


def test_candidate_keys_are_the_waiting_candidates_in_order_with_their_count(world):
    """waiting_candidate_keys reads the gates of candidates that need no person only: the same
    candidates, order and count as waiting_candidates and count_waiting_candidates."""
    for i in range(3):
        submit(world, candidate_id=f"memcand-person-{i}", topic=f"person-{i}", requires_human_review=True)
    submit(world, candidate_id="memcand-unverified", topic="unverified")  # waits on a replay or a person
    verified = submit(world, candidate_id="memcand-verified", topic="verified")
    replay(world, verified, passed=True)  # its agent's to promote: not waiting
    held = submit(world, candidate_id="memcand-held", topic="held", scope={"applies_to": ["public_api"]})
    replay(world, held, passed=True)
    workspaces = list(Workspace.objects.values_list("pk", flat=True))
    for oldest in (False, True):
        for limit in (1, 2, 3, 4, 10):
            for most in (2, 10):
                expected = waiting_candidates(workspaces, None, limit=limit, oldest=oldest)
                keys, count = waiting_candidate_keys(workspaces, None, limit=limit, most=most, oldest=oldest)
                assert keys == [(c.created_at.timestamp(), c.pk) for c in expected], (oldest, limit)
                assert count == count_waiting_candidates(workspaces, None, most=most), (limit, most)
    assert verified.pk not in {pk for _, pk in waiting_candidate_keys(workspaces, None, limit=10, most=10)[0]}


def test_every_page_of_a_list_longer_than_a_kinds_limit_shows_its_entries(world, reviewer, monkeypatch):
    """Three pages of two (three of each kind listed): the pages together are the list, in order
    (the last pages were empty when only each kind's first `pages × PAGE_SIZE` were read)."""
    monkeypatch.setattr(selectors_queue, "LIST_LIMIT", 3)
    monkeypatch.setattr(views_queue, "PAGE_SIZE", 2)
    challenged_facts(world, 4)
    for i in range(4):
        candidate(world.coder, world.architecture, f"Run make check-{i} before a release.")
    whole = [e.key for e in queue(world.reviewer, {})[0]]
    assert len(whole) == 6
    pages = [[e.key for e in reviewer.get("/review/", {"page": n}).context["entries"]] for n in (1, 2, 3)]
    assert [key for page in pages for key in page] == whole


def test_an_item_past_the_first_page_is_placed_in_one_read_of_the_list(world, reviewer, monkeypatch):
    """The oldest of five challenged facts (pages of two) opens on the page that holds it, marked,
    for no more queries than the newest on the first page (the list was read a second time, in
    full, to find its page)."""
    monkeypatch.setattr(views_queue, "PAGE_SIZE", 2)
    facts = challenged_facts(world, 5)
    oldest, newest = facts[0], facts[-1]

    def read(pk: int):
        reviewer.get(f"/review/challenged/{pk}/")  # what a process caches on the first is not counted
        with CaptureQueriesContext(connection) as queries:
            page = reviewer.get(f"/review/challenged/{pk}/")
        assert page.status_code == 200
        return page.context, len(queries)

    context, past = read(oldest)
    assert context["page_obj"].number == 3 and context["current_listed"] is True
    assert [e.obj.pk for e in context["entries"]] == [oldest]
    first, on_first = read(newest)
    assert first["page_obj"].number == 1
    assert past <= on_first, (past, on_first)


def test_a_decided_item_is_shown_beside_the_list_that_no_longer_holds_it(world, reviewer, monkeypatch):
    monkeypatch.setattr(views_queue, "PAGE_SIZE", 2)
    facts = challenged_facts(world, 3)
    reviewer.post(f"/review/challenged/{facts[0]}/decide/", {"action": "revalidate"}, HTTP_HX_REQUEST="true")
    page = reviewer.get(f"/review/challenged/{facts[0]}/")
    assert page.status_code == 200 and page.context["pending"] is False
    assert page.context["current_listed"] is False and page.context["page_obj"].number == 1
    assert facts[0] not in {e.obj.pk for e in page.context["entries"]}
