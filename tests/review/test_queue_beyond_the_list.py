"""The queue's list holds at most LIST_LIMIT entries of each kind. What lies beyond it is still the
person's: each item opens as pending and can be decided, the counts are of every item, the
oldest-first order and the agent filter reach past the newest ones. (At 100,000 facts the bench's
workspace had 384 open possible conflicts: the oldest 184 answered "already decided" and the
badge said 200.)"""

from __future__ import annotations

import pytest
from guardian.shortcuts import assign_perm

from memory.models import Candidate, Conflict, Fact
from review import selectors_queue
from review.selectors_queue import queue
from tests.review.queue_items import candidate, challenged, possible

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
LIMIT = 3


@pytest.fixture(autouse=True)
def short_list(monkeypatch):
    monkeypatch.setattr(selectors_queue, "LIST_LIMIT", LIMIT)


@pytest.fixture
def arch_reviewer(world):
    assign_perm("memory.review_domain", world.reviewer, world.architecture)
    return world.reviewer


def five_challenged(world) -> list[Fact]:
    """Oldest first: the first one by planner-a, the others by coder-a."""
    agents = [world.planner] + [world.coder] * 4
    # five different claims: the write path reads a domain's nearest facts across topics (issue 34)
    rules = [
        "Commit messages use the imperative mood.",
        "Every service exposes a /healthz endpoint.",
        "Lockfiles are committed with the code.",
        "Feature flags are removed within a month of launch.",
        "Database migrations never drop a column in the same release.",
    ]
    return [challenged(a, world.architecture, f"topic-{i}", rules[i]) for i, a in enumerate(agents)]


def test_an_item_older_than_the_list_opens_as_pending_and_can_be_decided(world, client, arch_reviewer):
    facts = five_challenged(world)
    oldest = facts[0]
    assert oldest.pk not in {e.obj.pk for e in queue(arch_reviewer, {})[0]}  # beyond the list
    client.force_login(arch_reviewer)
    page = client.get(f"/review/challenged/{oldest.pk}/")
    assert page.status_code == 200 and page.context["pending"] is True
    response = client.post(f"/review/challenged/{oldest.pk}/decide/", {"action": "revalidate"}, **HX)
    assert response.status_code == 200
    assert Fact.objects.get(pk=oldest.pk).status == "active"


def test_a_candidate_older_than_the_list_can_be_approved(world, client, arch_reviewer):
    made = [candidate(world.coder, world.architecture, f"Candidate rule {i}.") for i in range(5)]
    client.force_login(arch_reviewer)
    response = client.post(f"/review/candidate/{made[0].pk}/decide/", {"action": "approve"}, **HX)
    assert response.status_code == 200
    assert Candidate.objects.get(pk=made[0].pk).human_approved_at is not None


def test_a_possible_conflict_older_than_the_list_can_be_decided(world, client, arch_reviewer):
    pairs = [
        possible(world.coder, world.architecture, f"pair-{i}", f"Old rule {i}.", f"New rule {i}.") for i in range(5)
    ]
    client.force_login(arch_reviewer)
    response = client.post(f"/review/possible/{pairs[0].pk}/decide/", {"action": "both_true"}, **HX)
    assert response.status_code == 200
    assert Conflict.objects.get(pk=pairs[0].pk).status != Conflict.Status.OPEN


def test_the_counts_are_of_every_item_not_of_the_list(world, client, arch_reviewer):
    five_challenged(world)
    for i in range(4):
        candidate(world.coder, world.architecture, f"Candidate rule {i}.")
    entries, counts = queue(arch_reviewer, {})
    assert counts["challenged"] == 5 and counts["candidate"] == 4
    assert len(entries) == 2 * LIMIT
    client.force_login(arch_reviewer)
    html = client.get("/review/").content.decode()
    assert "Challenged fact: 5" in html and "Candidate needing approval: 4" in html
    assert 'data-testid="list-limited"' in html  # the page says the list is not everything
    dashboard = client.get("/").content.decode()
    assert "9 waiting" in dashboard and "Challenged fact: 5" in dashboard


def test_oldest_first_lists_the_oldest_items(world, arch_reviewer):
    facts = five_challenged(world)
    oldest = [e.obj.pk for e in queue(arch_reviewer, {"order": "oldest"})[0]]
    newest = [e.obj.pk for e in queue(arch_reviewer, {})[0]]
    assert oldest == [f.pk for f in facts[:LIMIT]]
    assert newest == [f.pk for f in reversed(facts[-LIMIT:])]


def test_the_agent_filter_reaches_past_the_newest_items(world, arch_reviewer):
    facts = five_challenged(world)
    entries, counts = queue(arch_reviewer, {"agent": "planner-a"})
    assert [e.obj.pk for e in entries] == [facts[0].pk]
    assert counts["challenged"] == 1
    assert queue(arch_reviewer, {"agent": "coder-a"})[1]["challenged"] == 4


def test_an_item_beyond_the_list_stays_hidden_from_a_reviewer_of_other_domains(world, client):
    assign_perm("memory.review_domain", world.reviewer, world.conventions)
    facts = five_challenged(world)  # all in architecture
    client.force_login(world.reviewer)
    assert client.get(f"/review/challenged/{facts[0].pk}/").status_code == 404
    assert client.post(f"/review/challenged/{facts[0].pk}/decide/", {"action": "revalidate"}, **HX).status_code == 404
    assert Fact.objects.get(pk=facts[0].pk).status == "challenged"
    assert queue(world.reviewer, {})[1]["challenged"] == 0


def test_an_item_page_reads_the_list_once_as_keys_and_only_its_page_in_full(world, client, arch_reviewer, monkeypatch):
    """An item's page reads the list once, as keys, whether the item lies on the first page, further
    on, past LIST_LIMIT, filtered out or decided; only the page's entries are read in full (issue 38:
    the list was read in full, and again to find an item past the first page). Four items come
    before the oldest: past LIST_LIMIT."""
    from review import views_queue

    monkeypatch.setattr(views_queue, "PAGE_SIZE", 1)
    reads: list[str] = []
    keys, entries = selectors_queue.Queue.keys, selectors_queue.Queue.entries

    def counting_keys(self, **kwargs):
        reads.append("keys")
        return keys(self, **kwargs)

    def counting_entries(self, listed):
        reads.append(f"entries {len(listed)}")
        return entries(self, listed)

    monkeypatch.setattr(selectors_queue.Queue, "keys", counting_keys)
    monkeypatch.setattr(selectors_queue.Queue, "entries", counting_entries)
    facts = five_challenged(world)
    client.force_login(arch_reviewer)
    page = client.get(f"/review/challenged/{facts[0].pk}/")
    assert page.status_code == 200 and page.context["pending"] is True
    assert page.context["current_listed"] is False and reads == ["keys", "entries 1"]
    reads.clear()
    # Two come before the third oldest: it is listed, on the third page, found by reading the list.
    page = client.get(f"/review/challenged/{facts[2].pk}/")
    assert page.context["current_listed"] is True and page.context["page_obj"].number == 3
    assert reads == ["keys", "entries 1"]
    # Oldest first, the oldest is the first: listed on the first page.
    page = client.get(f"/review/challenged/{facts[0].pk}/?order=oldest")
    assert page.context["current_listed"] is True and page.context["page_obj"].number == 1
    # The kind filter leaves it out.
    page = client.get(f"/review/challenged/{facts[2].pk}/?kind=candidate")
    assert page.context["current_listed"] is False
    # No longer waiting (revalidated meanwhile): shown decided beside the list.
    Fact.objects.filter(pk=facts[1].pk).update(status="active")
    page = client.get(f"/review/challenged/{facts[1].pk}/")
    assert page.status_code == 200 and page.context["pending"] is False
    assert page.context["current_listed"] is False
    assert reads[2:] == ["keys", "entries 1", "keys", "entries 0", "keys", "entries 1"]
