"""Around the queue in a real browser (issue 18): the grants matrix at 1366 px (fits, sticky role
column, `none` confirmed, focus kept), confirmations on the fact page, superseded facts in the
browser, graph labels that do not overlap, and no sideways scrolling at 390 px."""

import pytest

from memory.actors import Actor
from memory.models import AccessGrant, EpisodeFact, Fact
from memory.services.facts import FactInput, create_episode, propose_fact, supersede_fact
from tests.browser_fixtures import logged_in_page, screenshot
from tests.factories import DomainFactory, PolicyFactory, RepoFactory, RoleFactory

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = 390


def _seven_domains(world):
    """The world's three domains plus four with long labels: seven, as in the issue."""
    repo = RepoFactory(workspace=world.workspace, slug="payments-service")
    for name, r in (("security-incidents", None), ("billing", repo), ("frontend-build", repo), ("operations", None)):
        DomainFactory(workspace=world.workspace, repo=r, name=name)
    RoleFactory(workspace=world.workspace, name="reviewer-bot")
    RoleFactory(workspace=world.workspace, name="release-manager")


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
        fact=first, by=by, content="Background jobs run on Celery with Redis as the broker.", reason="retries"
    )
    return first, second


# --- grants matrix ------------------------------------------------------------------------------
def test_seven_domains_fit_at_1366_and_none_asks_then_keeps_focus(world, live_server, chromium):
    from playwright.sync_api import expect

    _seven_domains(world)
    page = logged_in_page(chromium, world.admin_user, live_server.url, width=1366)
    page.goto(f"{live_server.url}/access/acme/")
    headers = page.locator('[data-testid="grants"] thead th')
    expect(headers).to_have_count(8)  # role column + 7 domains
    fit = page.evaluate(
        """() => {
          const wrap = document.querySelector('[data-testid="grants"]').closest('.table-wrap');
          const right = Math.min(wrap.getBoundingClientRect().right, window.innerWidth);
          const cols = [...document.querySelectorAll('[data-testid="grants"] thead th')];
          return {doc: document.documentElement.scrollWidth, inner: window.innerWidth,
                  wrapScroll: wrap.scrollWidth, wrapClient: wrap.clientWidth,
                  beyond: cols.filter((th) => th.getBoundingClientRect().right > right + 1).map((th) => th.textContent)};
        }"""
    )
    assert fit["doc"] <= fit["inner"], fit
    assert fit["beyond"] == [], fit
    assert fit["wrapScroll"] <= fit["wrapClient"], fit
    screenshot(page, "grants-1366")

    cell = page.get_by_test_id("cell-coder-architecture")
    expect(cell).to_have_attribute("data-level", "read")
    # Dismissed: nothing changes, no request is sent.
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    cell.get_by_role("button", name="none").click()
    page.wait_for_timeout(400)
    assert asked and "none on architecture" in asked[0]
    expect(cell).to_have_attribute("data-level", "read")
    assert not AccessGrant.objects.filter(role=world.coder_role, domain=world.architecture).exists()
    # Accepted: the cell changes and focus stays on the button pressed.
    page.once("dialog", lambda dialog: dialog.accept())
    cell.get_by_role("button", name="none").click()
    expect(page.get_by_test_id("cell-coder-architecture")).to_have_attribute("data-level", "none")
    none_id = f"seg-{world.coder_role.pk}-{world.architecture.pk}-none"
    page.wait_for_function("(id) => document.activeElement && document.activeElement.id === id", arg=none_id)
    assert AccessGrant.objects.get(role=world.coder_role, domain=world.architecture).level == "none"
    # Keyboard: Tab to the next button and press it; focus stays there after the swap too.
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("cell-coder-architecture")).to_have_attribute("data-level", "read")
    read_id = f"seg-{world.coder_role.pk}-{world.architecture.pk}-read"
    page.wait_for_function("(id) => document.activeElement && document.activeElement.id === id", arg=read_id)


def test_the_role_column_stays_while_the_matrix_scrolls_inside_its_box(world, live_server, chromium):
    _seven_domains(world)
    page = logged_in_page(chromium, world.admin_user, live_server.url, width=PHONE)
    page.goto(f"{live_server.url}/access/acme/")
    state = page.evaluate(
        """() => {
          const wrap = document.querySelector('[data-testid="grants"]').closest('.table-wrap');
          wrap.scrollLeft = 400;
          const role = document.querySelector('[data-testid="grants"] tbody th[scope="row"]');
          const firstCell = role.nextElementSibling;
          return {doc: document.documentElement.scrollWidth, scrolled: wrap.scrollLeft,
                  wrapLeft: wrap.getBoundingClientRect().left, roleLeft: role.getBoundingClientRect().left,
                  roleRight: role.getBoundingClientRect().right, cellLeft: firstCell.getBoundingClientRect().left};
        }"""
    )
    assert state["doc"] <= PHONE, state  # the page does not scroll sideways; the table box does
    assert state["scrolled"] > 0, state
    assert abs(state["roleLeft"] - state["wrapLeft"]) <= 1, state  # sticky
    assert state["cellLeft"] < state["roleRight"], state  # the cells slid under it


# --- fact page and browser ----------------------------------------------------------------------
def test_archiving_a_fact_asks_first(world, live_server, chromium):
    from playwright.sync_api import expect

    _, fact = _facts(world)
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/facts/{fact.pk}/")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Archive (keep, never recall)").click()
    page.wait_for_timeout(400)
    fact.refresh_from_db()
    assert fact.status == "active"
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Archive (keep, never recall)").click()
    expect(page.locator(".flash")).to_contain_text("archived")
    fact.refresh_from_db()
    assert fact.status == "archived"


def test_superseded_facts_appear_with_the_toggle(world, live_server, chromium):
    from playwright.sync_api import expect

    _first, second = _facts(world)
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/")
    expect(page.get_by_test_id("fact-row")).to_have_count(1)
    page.get_by_test_id("show-superseded").check()
    expect(page.get_by_test_id("fact-row")).to_have_count(2)
    expect(page.get_by_test_id("superseded")).to_contain_text(f"#{second.pk}")
    assert "current=0" in page.url  # the toggle is in the address: shareable, survives a reload
    screenshot(page, "browser-superseded")


def test_deactivating_a_policy_asks_first(world, live_server, chromium):
    from playwright.sync_api import expect

    PolicyFactory(domain=world.conventions, rule="Never edit an issued invoice.")
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/policies/")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Deactivate").click()
    page.wait_for_timeout(400)
    expect(page.get_by_role("button", name="Deactivate")).to_be_visible()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Deactivate").click()
    expect(page.get_by_role("button", name="Activate")).to_be_visible()


# --- graph --------------------------------------------------------------------------------------
def test_graph_labels_do_not_overlap(world, live_server, chromium):
    by = Actor.of_agent(world.coder)
    episode = create_episode(workspace_id=world.workspace.pk, by=by, kind="session", title="a long working session")
    texts = [
        f"Service {name} deploys through the {stage} pipeline and reports to the on-call channel."
        for name, stage in (
            ("billing", "blue-green"),
            ("search", "canary"),
            ("ingest", "rolling"),
            ("auth", "manual"),
            ("web", "nightly"),
            ("mailer", "weekly"),
            ("reports", "staged"),
            ("exports", "hotfix"),
            ("imports", "batch"),
            ("ledger", "audited"),
        )
    ]
    for i, text in enumerate(texts):
        fact = propose_fact(
            domain=world.architecture, by=by, data=FactInput(topic=f"deploy-{i}", content=text, memory_type="decision")
        ).fact
        EpisodeFact.objects.create(episode=episode, fact=fact, relation="written")
    assert Fact.objects.count() == 10
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.goto(f"{live_server.url}/memory/acme/graph/")
    page.wait_for_function("() => document.getElementById('graph').dataset.nodes === '11'")
    overlaps = page.evaluate(
        """() => {
          const cy = window.engramGraph;
          // a domain's cluster holds its facts: only the facts and episodes themselves must not touch
          const boxes = cy.nodes(':childless').map((n) => ({id: n.id(), b: n.boundingBox({includeLabels: true})}));
          const hit = [];
          for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const a = boxes[i].b, b = boxes[j].b;
            if (a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2) hit.push([boxes[i].id, boxes[j].id]);
          }
          return hit;
        }"""
    )
    assert overlaps == []
    screenshot(page, "graph-labels")


# --- phone width --------------------------------------------------------------------------------
def test_no_page_scrolls_sideways_on_a_390px_phone(world, live_server, chromium):
    _seven_domains(world)
    _, fact = _facts(world)
    PolicyFactory(domain=world.conventions, rule="Never edit an issued invoice without a credit note.")
    page = logged_in_page(chromium, world.admin_user, live_server.url, width=PHONE)
    widths = {}
    for path in (
        "/",
        "/memory/acme/",
        "/memory/acme/?current=0",
        f"/memory/acme/facts/{fact.pk}/",
        "/memory/acme/policies/",
        "/memory/acme/graph/",
        "/access/acme/",
    ):
        page.goto(f"{live_server.url}{path}")
        widths[path] = page.evaluate("() => document.documentElement.scrollWidth")
        if path == "/":
            screenshot(page, "dashboard-phone")
    assert {p: w for p, w in widths.items() if w > PHONE} == {}
