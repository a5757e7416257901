"""Governance pages in a real browser: grants matrix, memory browser, fact history, graph."""

import pytest

from memory.actors import Actor
from memory.models import EpisodeFact
from memory.services.facts import FactInput, create_episode, propose_fact, supersede_fact
from tests.browser_fixtures import logged_in_page, screenshot
from tests.conftest import client_for

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _facts(world):
    by = Actor.of_agent(world.coder)
    first = propose_fact(
        domain=world.architecture,
        by=by,
        data=FactInput(
            topic="queue", content="Background jobs run on RQ with a single worker.", memory_type="decision"
        ),
    ).fact
    second = supersede_fact(
        fact=first,
        by=by,
        content="Background jobs run on Celery with Redis as the broker.",
        reason="retries and scheduling",
    )
    episode = create_episode(workspace_id=world.workspace.pk, by=by, kind="session", title="queue migration")
    other = propose_fact(
        domain=world.conventions,
        by=by,
        data=FactInput(
            topic="naming",
            content="Celery task names are module-qualified.",
            memory_type="convention",
            episode_id=episode.pk,
        ),
    ).fact
    EpisodeFact.objects.create(episode=episode, fact=second, relation="written")
    return first, second, other


def test_admin_switches_a_grant_cell_and_the_api_obeys_at_once(world, live_server, chromium):
    from playwright.sync_api import expect

    _facts(world)
    agent = client_for(world.coder)
    assert any(f["domain"] == "architecture" for f in agent.get("/api/v1/facts/").json()["results"])
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/access/acme/")
    cell = page.get_by_test_id("cell-coder-architecture")
    expect(cell).to_have_attribute("data-level", "read")
    page.once("dialog", lambda dialog: dialog.accept())  # `none` asks first (issue 18)
    cell.get_by_role("button", name="none").click()
    expect(page.get_by_test_id("cell-coder-architecture")).to_have_attribute("data-level", "none")
    expect(page.get_by_test_id("changes")).to_contain_text("coder")
    screenshot(page, "grants-matrix")
    assert not any(f["domain"] == "architecture" for f in agent.get("/api/v1/facts/").json()["results"])


def test_a_member_without_admin_rights_sees_the_matrix_read_only(world, live_server, chromium):
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/access/acme/")
    assert page.get_by_test_id("cell-coder-architecture").get_by_role("button").count() == 0


def test_searching_facts_and_opening_a_fact_history(world, live_server, chromium):
    from playwright.sync_api import expect

    _first, second, _ = _facts(world)
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/")
    page.get_by_test_id("fact-search").fill("celery broker")
    expect(page.get_by_test_id("fact-row")).to_have_count(1)
    page.get_by_role("link", name=f"#{second.pk}").click()
    expect(page.get_by_test_id("history")).to_contain_text("RQ with a single worker")
    expect(page.get_by_test_id("decay-chart")).to_be_visible()
    screenshot(page, "fact-history")
    page.goto(f"{live_server.url}/memory/acme/")
    screenshot(page, "memory-browser")


def test_graph_tab_renders_nodes(world, live_server, chromium):
    from playwright.sync_api import expect

    _facts(world)
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/graph/")
    graph = page.get_by_test_id("graph")
    expect(graph).to_have_attribute("data-nodes", "4")  # two facts in the chain, one linked fact, one episode
    screenshot(page, "knowledge-graph")


def test_policies_tab_shows_the_budget_and_switches_policies(world, live_server, chromium):
    from playwright.sync_api import expect

    from tests.factories import PolicyFactory

    PolicyFactory(domain=world.conventions, rule="Never edit an issued invoice.")
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/policies/")
    expect(page.get_by_test_id("budget")).to_contain_text("characters")
    page.once("dialog", lambda dialog: dialog.accept())  # deactivating asks first (issue 18)
    page.get_by_role("button", name="Deactivate").click()
    expect(page.get_by_role("button", name="Activate")).to_be_visible()
    screenshot(page, "policies")


def test_a_refused_grant_change_is_said_beside_the_cell_which_keeps_its_level(world, live_server, chromium):
    """Issue 37, point 3 (grants): the admin's rights were taken away after the matrix opened; the
    click's 403 is shown beside the button clicked, the cell keeps its level, the button is usable."""
    from playwright.sync_api import expect

    from memory.models import WorkspaceMembership

    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/access/acme/")
    cell = page.get_by_test_id("cell-coder-architecture")
    expect(cell).to_have_attribute("data-level", "read")
    WorkspaceMembership.objects.filter(user=world.admin_user, workspace=world.workspace).update(is_admin=False)
    write = cell.get_by_role("button", name="write")
    write.click()
    refusal = cell.get_by_test_id("request-refused")
    expect(refusal).to_contain_text("Only workspace admins change grants.")
    expect(cell).to_have_attribute("data-level", "read")
    expect(write).to_be_enabled()
