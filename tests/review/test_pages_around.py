"""Around the queue (issue 18): the top bar, the dashboard's title and activity, confirmations
for destructive actions, superseded facts in the browser, the decay chart's axis, and remember
reviews that meet the facts they repeat."""

import re

import pytest
from django.test import Client
from guardian.shortcuts import assign_perm

from memory.actors import Actor
from memory.models import Fact, WorkspaceMembership
from memory.services.facts import FactInput, propose_fact, supersede_fact
from review.models import ReviewItem
from review.services import submit_review
from tests.factories import CandidateFactory, DomainFactory, MembershipFactory, PolicyFactory, UserFactory
from tests.review.samples import ARCH_NOTE, FILES, OUTPUT

HTMX = {"HTTP_HX_REQUEST": "true"}


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _fact(world, content="Background jobs run on Celery with Redis as the broker.", domain=None, topic="queue"):
    return propose_fact(
        domain=domain or world.architecture,
        by=Actor.of_agent(world.coder),
        data=FactInput(topic=topic, content=content, memory_type="decision"),
    ).fact


def _title(html: str) -> str:
    match = re.search(r"<title>(.*?)</title>", html, re.S)
    assert match is not None
    return match.group(1)


# --- dashboard ----------------------------------------------------------------------------------
def test_the_dashboard_title_is_plain_text_without_the_activity_list(world):
    _fact(world)
    html = _client(world.admin_user).get("/").content.decode()
    assert _title(html) == "Dashboard · Engram"
    assert html.count("Recent activity") == 1


def test_activity_names_actors_and_links_facts_candidates_and_reviews(world, reviewer_reviews_world_domains):
    fact = _fact(world)
    candidate = CandidateFactory(domain=world.architecture, submitted_by_agent=world.coder)
    from memory.audit import record_event

    record_event(
        actor=Actor.of_agent(world.coder), verb="candidate.submitted", workspace_id=world.workspace.pk, target=candidate
    )
    # The submission names every item of the review: a person sees it who sees all of them (issue 32).
    for name in ("profile", "knowledge"):
        assign_perm("memory.review_domain", world.reviewer, DomainFactory(workspace=world.workspace, name=name))
    review = submit_review(agent=world.coder, session_id="s-1", output=OUTPUT, files=FILES, repo="web")
    html = _client(world.reviewer).get("/").content.decode()
    activity = " ".join(html[html.index('data-testid="activity"') :].split())
    assert "coder-a" in activity and "agent:coder-a" not in activity
    assert f'stored <a href="/memory/acme/facts/{fact.pk}/">fact #{fact.pk}: ' in activity
    assert ">fact.created<" not in activity and "· fact.created" not in activity
    assert f'href="/memory/acme/facts/{fact.pk}/"' in activity and "Background jobs run on Celery" in activity
    assert f'href="/review/candidate/{candidate.pk}/"' in activity and "proposed <a" in activity
    assert f'href="/review/remember/{review.pk}/"' in activity and f"remember review #{review.pk}" in activity


def test_activity_hides_the_events_of_domains_the_person_may_not_see(world):
    fact = _fact(world, content="A secret architecture decision about the vault.")
    html = _client(world.outsider_reviewer).get("/").content.decode()  # a member without domain rights
    activity = html[html.index('data-testid="activity"') :]
    # An event knows its domain (issue 32): one of a domain the person may not see is not listed.
    assert f"fact #{fact.pk}" not in activity
    assert "secret architecture decision" not in activity and f"/facts/{fact.pk}/" not in activity
    assert f"fact #{fact.pk}" in _client(world.admin_user).get("/").content.decode()


# --- top bar ------------------------------------------------------------------------------------
def test_the_top_bar_links_queue_memory_and_grants_with_logout_and_name(world):
    html = _client(world.admin_user).get("/review/").content.decode()
    nav = html[html.index('data-testid="topnav"') : html.index("</header>")]
    assert 'href="/review/"' in nav and 'data-testid="nav-queue"' in nav
    assert 'href="/memory/acme/"' in nav and 'href="/access/acme/"' in nav
    assert 'data-testid="logout"' in nav and 'action="/logout/"' in nav and "wsadmin" in nav


def test_a_member_without_domain_rights_gets_no_memory_link(world):
    html = _client(world.outsider_reviewer).get("/").content.decode()
    nav = html[html.index('data-testid="topnav"') : html.index("</header>")]
    assert 'data-testid="nav-memory"' not in nav and "/memory/acme/" not in nav
    assert 'href="/access/acme/"' in nav  # the grants matrix is theirs to read (read-only)


def test_a_person_in_no_workspace_gets_neither_memory_nor_grants_links(world):
    loner = UserFactory(username="loner")
    html = _client(loner).get("/").content.decode()
    nav = html[html.index('data-testid="topnav"') : html.index("</header>")]
    assert "/memory/" not in nav and "/access/" not in nav and 'data-testid="nav-queue"' in nav


def test_several_workspaces_are_listed_in_a_menu_each_with_its_links(world):
    MembershipFactory(user=world.admin_user, workspace=world.other_workspace, is_admin=True)
    DomainFactory(workspace=world.other_workspace, name="architecture")
    html = _client(world.admin_user).get("/").content.decode()
    nav = html[html.index('data-testid="topnav"') : html.index("</header>")]
    for slug in ("acme", "globex"):
        assert f'href="/memory/{slug}/"' in nav and f'href="/access/{slug}/"' in nav


def test_the_top_bar_costs_one_query(world, django_assert_num_queries):
    from review.selectors_activity import nav_workspaces

    with django_assert_num_queries(1):
        assert [w.slug for w in nav_workspaces(world.reviewer)] == ["acme"]


# --- confirmations ------------------------------------------------------------------------------
def test_setting_a_grant_to_none_asks_for_confirmation_other_levels_do_not(world):
    html = _client(world.admin_user).get("/access/acme/").content.decode()
    cell = html[html.index('data-testid="cell-coder-architecture"') :]
    cell = cell[: cell.index("</td>")]
    buttons = re.findall(r"<button[^>]*>\s*(\w+)</button>", cell, re.S)
    assert buttons == ["none", "read", "write"]
    none_button = re.search(r"<button[^>]*>none</button>", cell, re.S).group(0)
    assert 'hx-confirm="Set coder to none on architecture?' in none_button
    for level in ("read", "write"):
        assert "hx-confirm" not in re.search(rf"<button[^>]*>{level}</button>", cell, re.S).group(0)


def test_a_changed_cell_comes_back_with_the_same_button_ids_so_focus_stays(world):
    response = _client(world.admin_user).post(
        "/access/acme/grant/",
        {"role": world.coder_role.pk, "domain": world.architecture.pk, "level": "write"},
        **HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert f'id="seg-{world.coder_role.pk}-{world.architecture.pk}-write"' in html
    assert 'aria-pressed="true"' in html


def test_archiving_a_fact_asks_for_confirmation(world):
    fact = _fact(world)
    html = _client(world.admin_user).get(f"/memory/acme/facts/{fact.pk}/").content.decode()
    form = re.search(r'<form[^>]*fact-archive[^>]*>|<form[^>]*/archive/"[^>]*>', html).group(0)
    assert f'data-confirm="Archive fact #{fact.pk}?' in form
    assert "engram/confirm.js" in html


def test_deactivating_a_policy_asks_for_confirmation_activating_does_not(world):
    PolicyFactory(domain=world.conventions, rule="Never edit an issued invoice.")
    PolicyFactory(domain=world.conventions, rule="Run the linters before pushing.", active=False)
    html = _client(world.admin_user).get("/memory/acme/policies/").content.decode()
    forms = dict(
        (action, tag)
        for tag, action in re.findall(r"(<form[^>]*>)\s*<input[^>]*name=\"action\" value=\"(\w+)\">", html)
        if action != "supersede"
    )
    assert sorted(forms) == ["activate", "deactivate"]
    assert 'hx-confirm="Deactivate this policy?' in forms["deactivate"]
    assert "hx-confirm" not in forms["activate"]


# --- memory browser -----------------------------------------------------------------------------
def test_superseded_facts_are_one_visible_toggle_away(world):
    old = _fact(world, content="Background jobs run on RQ with a single worker.")
    new = supersede_fact(
        fact=old, by=Actor.of_agent(world.coder), content="Background jobs run on Celery.", reason="retries"
    )
    client = _client(world.admin_user)
    html = client.get("/memory/acme/").content.decode()
    assert 'name="current" value="0"' in html and "Show superseded facts" in html
    assert "single worker" not in html
    html = client.get("/memory/acme/?current=0", **HTMX).content.decode()
    assert "single worker" in html and f'href="/memory/acme/facts/{new.pk}/">#{new.pk}</a>' in html
    assert "superseded versions included" in html


def test_the_decay_chart_has_a_weight_axis_from_0_to_1(world):
    fact = _fact(world)
    html = _client(world.admin_user).get(f"/memory/acme/facts/{fact.pk}/").content.decode()
    axis = html[html.index('data-testid="decay-y-axis"') :]
    axis = axis[: axis.index("</g>")]
    assert [t for t in re.findall(r">([01]\.\d)</text>", axis)] == ["0.0", "0.5", "1.0"]
    assert ">weight</text>" in axis


# --- remember reviews meet the facts they repeat -----------------------------------------------
@pytest.fixture
def reviewer_admin(world):
    WorkspaceMembership.objects.filter(workspace=world.workspace, user=world.reviewer).update(is_admin=True)


def test_a_remember_note_repeating_a_live_fact_re_mentions_it(world, reviewer_admin):
    live = _fact(world, content=ARCH_NOTE, domain=world.repo_context, topic="ingest")
    review = submit_review(agent=world.coder, session_id="s-2", output=OUTPUT, files=FILES, repo="web")
    before = Fact.objects.filter(domain=world.repo_context).count()
    response = _client(world.reviewer).post(f"/review/remember/{review.pk}/approve/", **HTMX)
    assert response.status_code == 200
    item = ReviewItem.objects.get(review=review, path="docs/architecture.md")
    assert item.stored_fact_id == live.pk  # met the live fact instead of standing beside it
    review.refresh_from_db()
    stored = {s["path"]: s for s in review.resolution["stored"]}
    assert stored["docs/architecture.md"]["outcome"] == "re_mentioned"
    assert Fact.objects.filter(domain=world.repo_context).count() == before
    live.refresh_from_db()
    assert live.mention_count == 2 and live.topic == "ingest"


def test_a_remember_note_meeting_no_fact_gets_a_topic_from_its_text_and_keeps_the_path(world, reviewer_admin):
    review = submit_review(agent=world.coder, session_id="s-3", output=OUTPUT, files=FILES, repo="web")
    _client(world.reviewer).post(f"/review/remember/{review.pk}/approve/", **HTMX)
    fact = ReviewItem.objects.get(review=review, path="docs/architecture.md").stored_fact
    assert fact.topic == "ingest runs as a celery worker" and fact.source_file == "docs/architecture.md"
