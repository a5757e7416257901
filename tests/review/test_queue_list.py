"""The queue list (issue 18): real item URLs, the current entry highlighted, the proposing agent
and domain named, paging, filters by domain and agent names, bulk approve/deny, live refresh."""

from __future__ import annotations

import re

import pytest
from guardian.shortcuts import assign_perm

from memory.actors import Actor
from memory.models import Candidate, Fact, PromotionDecision
from memory.services.promotion import decide_candidate
from tests.review.queue_items import candidate, challenged

pytestmark = pytest.mark.django_db


@pytest.fixture
def arch_reviewer(world):
    """`world.reviewer` may decide architecture only (not conventions, not the repo's context)."""
    assign_perm("memory.review_domain", world.reviewer, world.architecture)
    return world.reviewer


def entry_html(html: str, key: str) -> str:
    match = re.search(rf'<li id="entry-{key}"[^>]*>.*?</li>', html, re.S)
    assert match, f"no entry {key}"
    return match.group(0)


def test_entries_have_real_item_urls_loaded_into_the_detail(world, client, arch_reviewer):
    c = candidate(world.coder, world.architecture, "Builds run with npm ci.")
    client.force_login(arch_reviewer)
    html = client.get("/review/").content.decode()
    li = entry_html(html, f"candidate-{c.pk}")
    assert f'href="/review/candidate/{c.pk}/"' in li
    assert f'hx-get="/review/candidate/{c.pk}/"' in li
    assert 'hx-target="#detail"' in li and 'hx-push-url="true"' in li
    assert f'data-kind="candidate" data-id="{c.pk}"' in li
    assert 'href="#"' not in html


def test_each_entry_names_its_proposing_agent_and_domain(world, client, reviewer_reviews_world_domains):
    c = candidate(world.coder2, world.conventions, "Branch names are kebab-case.")
    f = challenged(world.planner, world.repo_context, "deploys", "Deploys go through the staging slot.")
    client.force_login(world.reviewer)
    html = client.get("/review/").content.decode()
    first = entry_html(html, f"candidate-{c.pk}")
    assert 'data-testid="entry-agent">coder-b<' in first and ">conventions<" in first
    second = entry_html(html, f"challenged-{f.pk}")
    assert 'data-testid="entry-agent">planner-a<' in second and ">repo:web/context<" in second


def test_the_current_entry_is_highlighted(world, client, arch_reviewer):
    from review.views_queue import _queue_context

    a = candidate(world.coder, world.architecture, "Rule A.")
    b = candidate(world.coder, world.architecture, "Rule B.")
    client.force_login(arch_reviewer)
    # The list's refresh names the current entry; so does an item page (H1 passes current_key).
    html = client.get(f"/review/?current=candidate-{a.pk}", HTTP_HX_REQUEST="true").content.decode()
    assert 'class="queue-entry is-current" aria-current="true"' in entry_html(html, f"candidate-{a.pk}")
    assert "is-current" not in entry_html(html, f"candidate-{b.pk}")
    request = client.get("/review/").wsgi_request
    assert _queue_context(request, current_key=f"candidate-{b.pk}")["current_key"] == f"candidate-{b.pk}"


def test_the_list_pages_by_25_and_page_links_keep_the_filters(world, client, arch_reviewer):
    made = [candidate(world.coder, world.architecture, f"Rule number {i}.") for i in range(30)]
    client.force_login(arch_reviewer)
    first = client.get("/review/?kind=candidate&order=oldest")
    assert [e.obj.pk for e in first.context["entries"]] == [c.pk for c in made[:25]]
    html = first.content.decode()
    assert "Page 1 of 2 (30 items)" in html
    assert 'href="/review/?kind=candidate&amp;order=oldest&amp;page=2"' in html
    second = client.get("/review/?kind=candidate&order=oldest&page=2")
    assert [e.obj.pk for e in second.context["entries"]] == [c.pk for c in made[25:]]
    assert second.context["counts"]["candidate"] == 30  # the counts are of every page
    # The refresh of page 2 stays on page 2 with the same filters.
    assert 'hx-get="/review/?kind=candidate&amp;order=oldest&amp;page=2"' in second.content.decode()
    assert client.get("/review/?page=abc").status_code == 200


def test_filters_by_domain_and_agent_names(world, client, reviewer_reviews_world_domains):
    arch = candidate(world.coder, world.architecture, "Architecture rule by coder-a.")
    conv = candidate(world.coder2, world.conventions, "Conventions rule by coder-b.")
    ctx = candidate(world.coder, world.repo_context, "Repo rule by coder-a.")
    client.force_login(world.reviewer)
    html = client.get("/review/").content.decode()
    assert '<option value="architecture"' in html and '<option value="repo:web/context"' in html
    assert '<option value="coder-b"' in html
    assert "Domain id" not in html

    def keys(query: str) -> set[int]:
        return {e.obj.pk for e in client.get(f"/review/?{query}").context["entries"]}

    assert keys("domain=conventions") == {conv.pk}
    assert keys("domain=repo:web/context") == {ctx.pk}
    assert keys("agent=coder-a") == {arch.pk, ctx.pk}
    assert keys("agent=coder-a&domain=architecture") == {arch.pk}
    assert keys("agent=nobody") == set()


def test_a_reviewer_cannot_filter_into_a_domain_they_may_not_see(world, client, arch_reviewer):
    candidate(world.coder2, world.conventions, "A secret conventions rule.")
    candidate(world.coder, world.architecture, "An architecture rule.")
    client.force_login(arch_reviewer)
    html = client.get("/review/").content.decode()
    assert '<option value="architecture"' in html
    assert "conventions" not in html and "repo:web/context" not in html  # no names leak into the choices
    assert "intruder" not in html  # nor agents of a workspace they are not in
    response = client.get("/review/?domain=conventions")
    assert response.context["entries"] == []
    assert "A secret conventions rule" not in response.content.decode()


def test_bulk_approve_decides_each_item_through_the_service_and_reports_it(world, client, arch_reviewer):
    a = candidate(world.coder, world.architecture, "Use npm ci in CI.")
    b = candidate(world.coder, world.architecture, "Pin Node to 20.")
    client.force_login(arch_reviewer)
    response = client.post("/review/bulk/", {"action": "approve", "items": [f"candidate-{a.pk}", f"candidate-{b.pk}"]})
    assert response.status_code == 200
    assert response["HX-Trigger"] == "queue-changed"
    for c in (a, b):
        c.refresh_from_db()
        assert c.promotion_status == "active" and c.human_approved_by == arch_reviewer
        assert c.fact.content == c.proposed_memory
    html = response.content.decode()
    assert html.count('data-status="done"') == 2
    assert f'href="/review/candidate/{a.pk}/"' in html
    assert f'href="/memory/acme/facts/{a.fact_id}/"' in html


def test_bulk_deny_requires_a_reason_and_decides_nothing_without_one(world, client, arch_reviewer):
    a = candidate(world.coder, world.architecture, "Deploy on Fridays.")
    client.force_login(arch_reviewer)
    response = client.post("/review/bulk/", {"action": "deny", "items": [f"candidate-{a.pk}"], "reason": "  "})
    assert response.status_code == 422
    assert "Say why you deny them" in response.content.decode()
    assert Candidate.objects.get(pk=a.pk).promotion_status == "candidate"
    response = client.post(
        "/review/bulk/", {"action": "deny", "items": [f"candidate-{a.pk}"], "reason": "We never deploy on Fridays."}
    )
    assert response.status_code == 200
    assert Candidate.objects.get(pk=a.pk).promotion_status == "denied"
    decision = PromotionDecision.objects.get(candidate=a, decision="deny")
    assert decision.reason == "We never deploy on Fridays." and decision.decided_by_user == arch_reviewer


def test_bulk_rechecks_access_per_item_and_reports_decided_items(world, client, arch_reviewer):
    mine = candidate(world.coder, world.architecture, "Mine to decide.")
    decided = candidate(world.coder, world.architecture, "Someone else denied it.")
    theirs = candidate(world.coder2, world.conventions, "Not mine to decide.")
    decide_candidate(candidate=decided, by=Actor.of_user(world.admin_user), action="deny", reason="duplicate")
    client.force_login(arch_reviewer)
    items = [f"candidate-{pk}" for pk in (decided.pk, theirs.pk, mine.pk, 999_999)]
    response = client.post("/review/bulk/", {"action": "deny", "items": items, "reason": "Not a rule."})
    assert response.status_code == 200
    html = response.content.decode()
    statuses = dict(re.findall(r'data-key="([a-z]+-\d+)" data-status="([a-z]+)"', html))
    assert statuses == {
        f"candidate-{decided.pk}": "decided",
        f"candidate-{theirs.pk}": "refused",
        f"candidate-{mine.pk}": "done",
        "candidate-999999": "refused",
    }
    assert "Already denied by user:wsadmin" in html
    assert "Not mine to decide" not in html  # nothing of the other domain is shown
    assert Candidate.objects.get(pk=theirs.pk).promotion_status == "candidate"
    assert Candidate.objects.get(pk=mine.pk).promotion_status == "denied"


def test_bulk_revalidates_and_deprecates_challenged_facts(world, client, arch_reviewer):
    keep = challenged(world.coder, world.architecture, "cache", "The cache TTL is 60 seconds.")
    drop = challenged(world.coder, world.architecture, "queue", "Jobs retry three times.")
    client.force_login(arch_reviewer)
    client.post("/review/bulk/", {"action": "approve", "items": [f"challenged-{keep.pk}"]})
    client.post("/review/bulk/", {"action": "deny", "items": [f"challenged-{drop.pk}"], "reason": "Now five."})
    assert Fact.objects.get(pk=keep.pk).status == "active"
    assert Fact.objects.get(pk=drop.pk).status == "deprecated"


def test_bulk_refuses_kinds_it_does_not_decide_and_an_empty_selection(world, client, arch_reviewer):
    client.force_login(arch_reviewer)
    assert client.post("/review/bulk/", {"action": "approve", "items": ["possible-1"]}).status_code == 422
    assert client.post("/review/bulk/", {"action": "approve"}).status_code == 422
    assert client.get("/review/bulk/").status_code == 405


def test_the_list_refreshes_by_polling_and_after_decisions(world, client, arch_reviewer):
    c = candidate(world.coder, world.architecture, "Rule.")
    client.force_login(arch_reviewer)
    html = client.get("/review/?kind=candidate").content.decode()
    section = re.search(r'<section id="queue"[^>]*>', html).group(0)
    assert 'hx-get="/review/?kind=candidate"' in section
    assert "every 15s [window.engramQueueIdle" in section and "queue-changed from:body" in section
    assert 'hx-swap="outerHTML"' in section
    # The refresh answers the list alone, with the checkboxes of bulk-decidable entries.
    fragment = client.get("/review/?kind=candidate", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<section id="queue"') and "<html" not in fragment
    assert f'name="items" value="candidate-{c.pk}"' in fragment


def test_the_page_shows_the_keyboard_shortcuts_and_loads_queue_js(world, client, arch_reviewer):
    client.force_login(arch_reviewer)
    html = client.get("/review/").content.decode()
    assert re.search(r'<script src="/static/engram/queue\.js" defer>', html)
    legend = re.search(r'data-testid="shortcuts".*?</p>', html, re.S).group(0)
    for key in ("j", "k", "x"):
        assert f"<kbd>{key}</kbd>" in legend
    # The item's own keys are filled in by queue.js from the buttons of the item shown (issue 37).
    assert 'data-testid="item-keys"' in legend


def test_queue_list_query_count_stays_bounded_with_agents_shown(
    world, client, reviewer_reviews_world_domains, django_assert_max_num_queries
):
    for i in range(30):
        candidate([world.coder, world.coder2][i % 2], world.architecture, f"Rule {i}.")
    for i in range(5):
        challenged(world.planner, world.conventions, f"t{i}", f"Fact {i}.")
    client.force_login(world.reviewer)
    with django_assert_max_num_queries(25):
        response = client.get("/review/")
    assert len(response.context["entries"]) == 25
