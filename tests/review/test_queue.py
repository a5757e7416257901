"""The review queue: per-domain reviewers (guardian), decisions in place, bounded queries."""

import json

import pytest
from guardian.shortcuts import assign_perm

from memory.actors import Actor
from memory.models import Candidate, Conflict, Fact
from memory.services.facts import FactInput, propose_fact
from memory.services.lifecycle import challenge_fact
from tests.browser_fixtures import logged_in_page, screenshot
from tests.conftest import client_for
from tests.review import queue_items

DOC = {**queue_items.DOC, "topic": "build"}


def seed(world):
    by = Actor.of_agent(world.coder)
    propose_fact(
        domain=world.architecture,
        by=by,
        data=FactInput(
            topic="build", content="The web app builds with npm run build on Node 18.", memory_type="procedure"
        ),
    )
    api = client_for(world.coder)
    visible = api.post(
        "/api/v1/candidates/",
        {
            **DOC,
            "candidate_id": "c-arch",
            "domain": "architecture",
            "proposed_memory": "The web app builds with npm run build on Node 20.",
        },
        format="json",
    ).json()
    hidden = api.post(
        "/api/v1/candidates/",
        {
            **DOC,
            "candidate_id": "c-conv",
            "domain": "conventions",
            "proposed_memory": "Conventions candidate the reviewer must not see.",
        },
        format="json",
    ).json()
    assign_perm("memory.review_domain", world.reviewer, world.architecture)
    return visible, hidden


def test_reviewers_see_only_their_domains_and_admins_see_all(world, client):
    from review.selectors_queue import queue

    visible, hidden = seed(world)
    mine = {e.obj.pk for e in queue(world.reviewer, {})[0] if e.kind == "candidate"}
    assert mine == {visible["id"]}
    assert {e.obj.pk for e in queue(world.admin_user, {})[0] if e.kind == "candidate"} == {visible["id"], hidden["id"]}
    assert [e for e in queue(world.outsider_reviewer, {})[0] if e.kind == "candidate"] == []
    client.force_login(world.reviewer)
    assert client.get(f"/review/candidate/{hidden['id']}/").status_code == 404
    assert client.post(f"/review/candidate/{hidden['id']}/decide/", {"action": "approve"}).status_code == 404
    assert Candidate.objects.get(pk=hidden["id"]).human_approved_at is None


def test_queue_lists_conflicts_lost_by_people_and_challenged_facts(world, client):
    by = Actor.of_user(world.admin_user)
    human = propose_fact(
        domain=world.architecture,
        by=by,
        data=FactInput(
            topic="deploys", content="Deploys happen on Tuesdays.", memory_type="convention", veracity="human_stated"
        ),
    ).fact
    Fact.objects.filter(pk=human.pk).update(confidence=0.9)
    rival = propose_fact(
        domain=world.architecture,
        by=by,
        data=FactInput(
            topic="deploys", content="Deploys happen on Fridays.", memory_type="convention", veracity="human_stated"
        ),
    )
    assert rival.conflict is not None and rival.conflict.loser_id == human.pk
    other = propose_fact(
        domain=world.architecture,
        by=by,
        data=FactInput(topic="cache", content="The cache TTL is 60 seconds.", memory_type="convention"),
    ).fact
    challenge_fact(fact=other, by=by, reason="stale")
    client.force_login(world.admin_user)
    page = client.get("/review/?order=oldest")
    kinds = [e.kind for e in page.context["entries"]]
    assert "conflict" in kinds and "challenged" in kinds
    response = client.post(
        f"/review/conflict/{rival.conflict.pk}/decide/",
        {"action": "restore", "reason": "Tuesday is right"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and "queue-changed" in json.loads(response["HX-Trigger"])
    assert Conflict.objects.get(pk=rival.conflict.pk).reviewed_at is not None
    assert Fact.objects.filter(
        topic="deploys", content="Deploys happen on Tuesdays.", superseded_by__isnull=True
    ).exists()
    client.post(f"/review/challenged/{other.pk}/decide/", {"action": "revalidate"})
    assert Fact.objects.get(pk=other.pk).status == "active"


def test_queue_page_query_count_is_bounded(world, client, django_assert_max_num_queries):
    seed(world)
    api = client_for(world.coder)
    for i in range(12):
        api.post(
            "/api/v1/candidates/",
            {
                **DOC,
                "candidate_id": f"c-{i}",
                "domain": "architecture",
                "proposed_memory": f"Rule number {i} for builds.",
            },
            format="json",
        )
    client.force_login(world.admin_user)
    with django_assert_max_num_queries(20):
        response = client.get("/review/")
    assert len(response.context["entries"]) >= 13


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_reviewer_decides_a_candidate_from_the_queue_with_the_diff_visible(world, live_server, chromium):
    from playwright.sync_api import expect

    visible, _hidden = seed(world)
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/review/")
    entries = page.get_by_test_id("queue-entry")
    expect(entries).to_have_count(1)
    expect(page.get_by_text("Conventions candidate")).to_have_count(0)
    entries.first.get_by_role("link").click()
    expect(page.get_by_test_id("diff")).to_contain_text("Node")
    expect(page.locator("#detail ins").first).to_contain_text("20")
    screenshot(page, "review-queue-candidate")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_test_id("decision-done")).to_contain_text("promoted")
    expect(page.get_by_test_id("queue-empty")).to_be_visible()
    candidate = Candidate.objects.get(pk=visible["id"])
    assert candidate.promotion_status == "active" and candidate.fact.content.endswith("Node 20.")
