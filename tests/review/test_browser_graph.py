"""The knowledge graph at ~160 facts in a real browser (issue 37, point 6: it was unlabeled dots):
facts clustered by domain with the domains' names on the clusters and in a legend, a fact's first
words on hover (its neighbours' too) and every label once zoomed in, a click that opens the fact,
and a note when the graph leaves facts out."""

import pytest

from tests.browser_fixtures import logged_in_page, screenshot
from tests.factories import FactFactory
from tests.review import graph_world

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Whether cytoscape draws a node's label, by its own rules: text, opaque, and at least
# min-zoomed-font-size on screen. Also the label's size on screen, in px.
LABEL = """(n) => {
  const cy = n.cy();
  const px = n.pstyle('font-size').pfValue * cy.zoom();
  const shown = n.pstyle('label').strValue !== '' && n.pstyle('text-opacity').value > 0
    && px >= n.pstyle('min-zoomed-font-size').pfValue;
  return {id: n.id(), label: n.pstyle('label').strValue, shown, px};
}"""


def _open_graph(world, live_server, chromium, nodes: int):
    page = logged_in_page(chromium, world.admin_user, live_server.url)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{live_server.url}/memory/acme/graph/")
    page.wait_for_function("() => document.getElementById('graph').dataset.nodes", timeout=30_000)
    assert page.get_by_test_id("graph").get_attribute("data-nodes") == str(nodes)
    return page


def _label(page, node_id: str) -> dict:
    return page.evaluate(f"(id) => ({LABEL})(window.engramGraph.getElementById(id))", node_id)


def _screen_point(page, node_id: str) -> tuple[float, float]:
    """Where node `node_id` is drawn, in page coordinates."""
    box = page.get_by_test_id("graph").bounding_box()
    at = page.evaluate("(id) => window.engramGraph.getElementById(id).renderedPosition()", node_id)
    return box["x"] + at["x"], box["y"] + at["y"]


def test_160_facts_are_clustered_by_domain_and_labelled_on_hover_and_zoom(world, live_server, chromium):
    from playwright.sync_api import expect

    graph = graph_world.build(world)
    page = _open_graph(world, live_server, chromium, nodes=len(graph.facts) + 1)  # and the episode
    assert page.get_by_test_id("graph").get_attribute("data-dense") == "true"

    # One cluster per domain, named on the graph (readable at this zoom) and in the legend.
    clusters = page.evaluate(
        f"""() => window.engramGraph.nodes(':parent').map((d) => ({{
              ...({LABEL})(d), facts: d.children().length, box: d.boundingBox({{includeLabels: true}})}}))"""
    )
    assert sorted(c["label"] for c in clusters) == sorted(d.label for d in graph.domains)
    assert all(c["shown"] and c["px"] >= 12 and c["facts"] == 40 for c in clusters)
    overlapping = [
        (a["label"], b["label"])
        for i, a in enumerate(clusters)
        for b in clusters[i + 1 :]
        if a["box"]["x1"] < b["box"]["x2"]
        and b["box"]["x1"] < a["box"]["x2"]
        and a["box"]["y1"] < b["box"]["y2"]
        and b["box"]["y1"] < a["box"]["y2"]
    ]
    assert overlapping == []
    legend = page.get_by_test_id("graph-legend")
    for domain in graph.domains:
        expect(legend.get_by_role("button", name=f"{domain.label} (40)")).to_be_visible()
    expect(page.get_by_test_id("graph-cap")).to_be_hidden()  # nothing left out
    screenshot(page, "graph-160-clusters")

    # A fact's label is hidden at this zoom; hovering shows its first words, and its neighbour's.
    new, old = f"f{graph.new.pk}", f"f{graph.old.pk}"
    assert _label(page, new)["shown"] is False
    page.mouse.move(*_screen_point(page, new))
    hovered = _label(page, new)
    assert hovered["shown"] and hovered["px"] >= 12
    assert hovered["label"].endswith("…") and graph.new.content.startswith(hovered["label"].rstrip("…"))
    assert _label(page, old)["shown"]  # superseded by it: a neighbour
    screenshot(page, "graph-160-hover")
    page.mouse.move(5, 5)
    assert _label(page, new)["shown"] is False

    # Zoomed in, every fact in view is labelled.
    page.evaluate(
        "(id) => { const cy = window.engramGraph; cy.zoom({level: 2, position: cy.getElementById(id).position()}); }",
        new,
    )
    page.wait_for_timeout(100)
    assert _label(page, new)["shown"] and _label(page, old)["shown"]
    screenshot(page, "graph-160-zoomed")

    # A click on a fact opens its page.
    page.mouse.click(*_screen_point(page, new))
    page.wait_for_url(f"**/memory/acme/facts/{graph.new.pk}/")
    expect(page.get_by_text(graph.new.content).first).to_be_visible()
    page.context.close()


def test_the_graph_says_when_it_leaves_facts_out(world, live_server, chromium):
    from playwright.sync_api import expect

    from review.selectors_pages import GRAPH_FACT_LIMIT

    FactFactory.create_batch(GRAPH_FACT_LIMIT + 5, domain=world.architecture)
    page = _open_graph(world, live_server, chromium, nodes=GRAPH_FACT_LIMIT)
    expect(page.get_by_test_id("graph-cap")).to_have_text(
        f"Showing the {GRAPH_FACT_LIMIT} most recently mentioned of {GRAPH_FACT_LIMIT + 5} facts: "
        "choose a domain or search to see the others."
    )
    page.context.close()
