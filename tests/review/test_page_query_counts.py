"""Every review page costs the same number of queries however many facts and open items there are
(issue 38: pages fast at 100k facts and 500+ open items). Each page is read at two sizes of the
same world; a per-row query, a count per item or a lookup per fact makes the larger one cost more."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.actors import Actor
from memory.models import Fact
from memory.models.facts import VERACITY_WEIGHT
from review.services import submit_review
from tests.review import queue_items
from tests.review.samples import FILES, OUTPUT

_BATCH = itertools.count()


def bulk_facts(world, n: int) -> None:
    """`n` plain live facts of the architecture domain, written in one INSERT: the pages read
    them, none of them is an open item."""
    now, batch = timezone.now(), next(_BATCH)
    Fact.objects.bulk_create(
        Fact(
            workspace=world.workspace,
            domain=world.architecture,
            topic=f"bulk-{batch}-{i}",
            content=f"Service {batch}-{i} deploys from the main branch.",
            memory_type="convention",
            veracity="agent_inferred",
            confidence=VERACITY_WEIGHT["agent_inferred"],
            created_by_agent=world.coder,
            created_at=now,
            last_mentioned_at=now,
            status_changed_at=now,
        )
        for i in range(n)
    )


def open_items(world, n: int) -> dict[str, int]:
    """`n` open items of each kind through the services; the pk of the first of each kind."""
    batch = next(_BATCH)
    coder, person = world.coder, Actor.of_user(world.admin_user)
    first: dict[str, int] = {}
    for i in range(n):
        key = f"{batch}-{i}"
        first.setdefault("candidate", queue_items.candidate(coder, world.architecture, f"Run make build-{key}.").pk)
        first.setdefault(
            "possible",
            queue_items.possible(
                coder,
                world.architecture,
                f"cache-{key}",
                f"Cache {key} keeps entries 60 s.",
                f"Pool {key} has 3 workers.",
            ).pk,
        )
        first.setdefault(
            "challenged", queue_items.challenged(coder, world.architecture, f"flag-{key}", f"Flag {key} is on.").pk
        )
        first.setdefault("conflict", lost_conflict(world, person, key))
        review = submit_review(agent=coder, session_id=f"s-{key}", output=OUTPUT, files=dict(FILES), repo="web")
        first.setdefault("remember", review.pk)
    return first


def lost_conflict(world, person: Actor, key: str) -> int:
    """A human-stated fact replaced by a later human-stated one: a conflict a person lost."""
    from memory.services.facts import FactInput, propose_fact

    def state(text: str):
        data = FactInput(topic=f"train-{key}", content=text, memory_type="convention", veracity="human_stated")
        return propose_fact(domain=world.architecture, by=person, data=data)

    state(f"Release train {key} leaves on Tuesdays.")
    conflict = state(f"Release train {key} leaves on Fridays.").conflict
    assert conflict is not None
    return conflict.pk


@pytest.fixture
def reviewer(world) -> Client:
    """The workspace's admin, staff with the fact model's admin permissions, signed in."""
    user = world.admin_user
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="memory", codename__endswith="_fact"))
    client = Client()
    client.force_login(user)
    return client


def pages(items: dict[str, int]) -> dict[str, str]:
    return {
        "dashboard": "/",
        "queue page": "/review/",
        **{f"item: {kind}": f"/review/{kind}/{pk}/" for kind, pk in items.items() if kind != "remember"},
        "item: remember": f"/review/remember/{items['remember']}/",
        "memory browser": "/memory/acme/",
        "memory browser q": "/memory/acme/?q=deploys",
        "memory browser page 2": "/memory/acme/?page=2",
        "graph": "/memory/acme/graph/",
        "graph.json": "/memory/acme/graph.json",
        "admin fact list": "/admin/memory/fact/",
        "admin fact list search": "/admin/memory/fact/?q=deploys",
    }


def query_counts(client: Client, paths: dict[str, str]) -> dict[str, int]:
    """Queries of each page read a second time (what a process caches on the first is not counted)."""
    counts = {}
    for name, path in paths.items():
        client.get(path)
        with CaptureQueriesContext(connection) as queries:
            response = client.get(path)
        assert response.status_code == 200, (name, response.status_code)
        counts[name] = len(queries)
    return counts


def test_every_page_costs_the_same_queries_at_ten_times_the_facts_and_items(world, reviewer):
    bulk_facts(world, 300)  # past the graph's 200 and the browser's first page
    # 6 of each kind: the items measured (the first, the oldest) lie past the list's first page
    # (25), where an item's page reads the whole list to find the page that holds it.
    items = open_items(world, 6)
    small = query_counts(reviewer, pages(items))
    bulk_facts(world, 3000)
    open_items(world, 12)
    large = query_counts(reviewer, pages(items))
    # Never more: the dashboard's activity may read fewer kinds of target when one kind fills it.
    assert {name: count for name, count in large.items() if count > small[name]} == {}
    # A candidate past the first page: the list read twice. Every page also reads the person's
    # memberships and domains once (memory.access.remembering), where its rules named them as subqueries.
    assert max(small.values()) <= 32, small


def test_the_browser_counts_up_to_the_cap_and_says_there_are_more(world, reviewer, monkeypatch):
    monkeypatch.setattr("memory.pagination.COUNT_CAP", 100)
    bulk_facts(world, 99)
    text = " ".join(reviewer.get("/memory/acme/").content.decode().split())
    assert "99 facts" in text and "page 1 of 2 " in text, text[text.find('class="meta"') :][:300]
    bulk_facts(world, 60)
    page = reviewer.get("/memory/acme/")
    text = " ".join(page.content.decode().split())
    assert "100+ facts" in text and "page 1 of 2+" in text


def test_past_the_cap_the_next_page_still_leads_on_to_the_oldest_fact(world, reviewer, monkeypatch):
    monkeypatch.setattr("memory.pagination.COUNT_CAP", 100)
    bulk_facts(world, 260)
    oldest = Fact.objects.order_by("created_at", "id").first()
    for number in (2, 3, 4, 5):
        page = reviewer.get(f"/memory/acme/?page={number}")
        assert page.context["page"].number == number and page.context["page"].has_next() == (number < 6)
    last = reviewer.get("/memory/acme/?page=6")
    assert oldest in last.context["facts"] and not last.context["page"].has_next()


def test_the_admin_fact_list_counts_up_to_the_cap(world, reviewer, monkeypatch):
    monkeypatch.setattr("memory.pagination.COUNT_CAP", 150)
    bulk_facts(world, 120)
    assert "120 facts" in " ".join(reviewer.get("/admin/memory/fact/").content.decode().split())
    bulk_facts(world, 100)
    text = " ".join(reviewer.get("/admin/memory/fact/").content.decode().split())
    assert "150+ facts" in text
    page = reviewer.get("/admin/memory/fact/?p=5")  # 50 a page: past the cap, the last 20
    assert page.status_code == 200 and len(page.context["cl"].result_list) == 20


def test_the_admin_workspace_filter_lists_the_workspaces_holding_a_visible_fact(world, reviewer):
    from tests.factories import DomainFactory, MembershipFactory, WorkspaceFactory

    bulk_facts(world, 3)
    MembershipFactory(user=world.admin_user, workspace=world.other_workspace, is_admin=True)
    other = DomainFactory(workspace=world.other_workspace, name="architecture")
    Fact.objects.filter(pk=Fact.objects.first().pk).update(workspace=world.other_workspace, domain=other)
    MembershipFactory(user=world.admin_user, workspace=WorkspaceFactory(slug="empty"), is_admin=True)
    specs = reviewer.get("/admin/memory/fact/").context["cl"].filter_specs
    workspace = next(spec for spec in specs if getattr(spec, "field_path", "") == "workspace")
    assert sorted(label for _, label in workspace.lookup_choices) == sorted(["acme", "globex"])


@pytest.mark.parametrize("kind", ["year", "month", "day"])
def test_the_admin_date_drill_down_lists_what_a_distinct_scan_lists(world, kind):
    from datetime import timedelta

    from memory.templatetags.fact_admin import ProbedDates

    bulk_facts(world, 40)
    start = timezone.now()
    for i, pk in enumerate(Fact.objects.order_by("pk").values_list("pk", flat=True)):
        Fact.objects.filter(pk=pk).update(created_at=start - timedelta(days=i * 23, hours=i))
    facts = Fact.objects.all()
    assert ProbedDates(facts).datetimes("created_at", kind) == list(facts.datetimes("created_at", kind))


def test_the_admin_fact_list_drills_down_by_date(world, reviewer):
    bulk_facts(world, 5)
    now = timezone.localtime(Fact.objects.first().created_at)
    page = reviewer.get("/admin/memory/fact/").content.decode()  # one month of facts: its days are offered
    assert f"created_at__day={now.day}" in page and f"created_at__month={now.month}" in page
    by_year = reviewer.get(f"/admin/memory/fact/?created_at__year={now.year}").content.decode()
    assert f"created_at__month={now.month}" in by_year
