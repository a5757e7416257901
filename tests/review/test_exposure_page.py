"""The fact page's exposure trail (issue 21): where a fact went, and who received it since it
stopped being believed; only for people who may review the fact's domain."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.runs import start_run
from memory.actors import Actor
from memory.models import Exposure
from memory.search.preamble import build_preamble
from memory.services.facts import supersede_fact
from memory.services.lifecycle import challenge_fact
from tests.factories import FactFactory, MembershipFactory, UserFactory

TASK = "Fix the flaky deploy pipeline for the billing service"


@pytest.fixture
def fact(world):
    return FactFactory(
        domain=world.architecture, topic="deploys", content="The deploy pipeline retries flaky steps twice."
    )


def _page(user, world, fact_id):
    client = Client()
    client.force_login(user)
    return client.get(f"/memory/{world.workspace.slug}/facts/{fact_id}/")


def _section(html, testid):
    """The rows of the table marked `testid`, as text without tags."""
    found = re.search(rf'data-testid="{testid}".*?</table>', html, re.S)
    assert found, testid
    return re.sub(r"<[^>]+>", " ", found.group(0))


def test_the_fact_page_lists_where_it_went(world, fact, reviewer_reviews_world_domains):
    build_preamble(agent=world.coder, task=TASK)
    build_preamble(agent=world.coder, task=TASK)
    run = start_run(agent=world.coder2, task="Migrate billing", by=Actor.of_agent(world.coder2))
    build_preamble(agent=world.coder2, task=TASK)

    response = _page(world.reviewer, world, fact.pk)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Where it went" in html
    by_agent = re.search(r'data-testid="exposure-by-agent">(.*?)</ul>', html, re.S).group(1)
    assert "agent coder-a: 2×" in by_agent and "agent coder-b: 1×" in by_agent
    assert by_agent.index("coder-a") < by_agent.index("coder-b")  # the most served first
    rows = _section(html, "exposures")
    assert rows.count("preamble") == 3 and "dispatch #" in rows
    assert f"run #{run.pk}" in rows and f'href="/review/runs/{run.pk}/"' in html
    assert "Who received it since" not in html  # still believed


def test_after_supersession_since_lists_only_later_recipients(world, fact, reviewer_reviews_world_domains):
    build_preamble(agent=world.coder, task=TASK)  # while believed
    new = supersede_fact(
        fact=fact, by=Actor.of_agent(world.planner), content="The deploy pipeline retries flaky steps three times."
    )
    build_preamble(agent=world.coder2, task=TASK)  # gets the new version
    Exposure.objects.create(  # the old version served after it was replaced (an as-of recall)
        workspace=world.workspace, agent=world.planner, surface="mcp_search", fact_id=fact.pk, served_at=timezone.now()
    )

    html = _page(world.reviewer, world, fact.pk).content.decode()
    assert "Who received it since" in html and "(superseded)" in html
    since, before = _section(html, "exposure-since"), _section(html, "exposure-before")
    assert "coder-b" in since and f"#{new.pk}" in since
    assert "planner-a" in since and "mcp_search" in since
    assert "coder-a" not in since
    assert "coder-a" in before and "coder-b" not in before and "planner-a" not in before


def test_a_challenged_fact_shows_who_received_it_since_the_challenge(world, fact, reviewer_reviews_world_domains):
    Exposure.objects.create(
        workspace=world.workspace,
        agent=world.coder,
        surface="search",
        fact_id=fact.pk,
        served_at=timezone.now() - timedelta(days=3),
    )
    challenge_fact(fact=fact, by=Actor.of_agent(world.coder), reason="failed_replay")
    Exposure.objects.create(
        workspace=world.workspace, agent=world.coder2, surface="preamble", fact_id=fact.pk, served_at=timezone.now()
    )
    html = _page(world.reviewer, world, fact.pk).content.decode()
    assert "(challenged)" in html
    assert "coder-b" in _section(html, "exposure-since") and "coder-a" not in _section(html, "exposure-since")
    assert "coder-a" in _section(html, "exposure-before")


def test_a_reviewer_without_access_to_the_domain_cannot_see_the_trail(world, fact, reviewer_reviews_world_domains):
    build_preamble(agent=world.coder, task=TASK)
    # A member who reviews no domain, and a member of another workspace: 404, as for a missing fact.
    assert _page(world.outsider_reviewer, world, fact.pk).status_code == 404
    stranger = UserFactory(username="stranger")
    MembershipFactory(user=stranger, workspace=world.other_workspace)
    assert _page(stranger, world, fact.pk).status_code == 404
    assert _page(world.reviewer, world, fact.pk).status_code == 200


def test_the_trail_costs_a_fixed_number_of_queries(world, fact, reviewer_reviews_world_domains):
    client = Client()
    client.force_login(world.reviewer)
    url = f"/memory/{world.workspace.slug}/facts/{fact.pk}/"
    challenge_fact(fact=fact, by=Actor.of_agent(world.coder), reason="failed_replay")
    Exposure.objects.create(workspace=world.workspace, agent=world.coder, surface="search", fact_id=fact.pk)
    with CaptureQueriesContext(connection) as few:
        assert client.get(url).status_code == 200
    for agent in (world.coder, world.coder2, world.planner):
        for days in range(8):
            Exposure.objects.create(
                workspace=world.workspace,
                agent=agent,
                surface="search",
                fact_id=fact.pk,
                served_at=timezone.now() - timedelta(days=days),
            )
    with CaptureQueriesContext(connection) as many:
        assert client.get(url).status_code == 200
    assert len(many.captured_queries) <= len(few.captured_queries) + 1  # + the total's COUNT past the limit


def test_in_the_admin_a_member_sees_only_the_trail_of_domains_they_may_see(world, fact, reviewer_reviews_world_domains):
    from django.contrib.auth.models import Permission
    from guardian.shortcuts import assign_perm

    from tests.factories import DomainFactory

    hidden = FactFactory(domain=DomainFactory(workspace=world.workspace, name="secrets"), topic="keys")
    for served in (fact, hidden):
        Exposure.objects.create(workspace=world.workspace, agent=world.coder, surface="search", fact_id=served.pk)
    staff = UserFactory(username="staff", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_exposure"))
    MembershipFactory(user=staff, workspace=world.workspace)
    assign_perm("memory.review_domain", staff, world.architecture)
    client = Client()
    client.force_login(staff)
    listed = client.get("/admin/memory/exposure/")
    assert listed.status_code == 200
    assert [e.fact_id for e in listed.context["cl"].result_list] == [fact.pk]
    Exposure.objects.filter(fact_id=fact.pk).update(fact_id=10**9)  # its fact erased: admins only
    assert list(client.get("/admin/memory/exposure/").context["cl"].result_list) == []
