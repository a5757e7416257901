"""Issue 37, point 6, in a real browser: on a long item (a held candidate with every gate, long
texts, replays and a long diff; a conflict between long texts) the decision controls stay in view
at 1280x800 — on opening the item and after scrolling to the bottom — and still decide."""

import pytest
from django.conf import settings
from django.test import Client

from memory.actors import Actor
from memory.models import Candidate, Conflict, Fact
from memory.services import promotion
from memory.services.facts import FactInput, propose_fact
from tests.browser_fixtures import screenshot
from tests.memory.test_services_promotion import replay, submit
from tests.review.queue_items import fact

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reviewer_reviews_world_domains"),
]

WIDTH, HEIGHT = 1280, 800


def _long(subject: str, sentences: int = 40) -> str:
    """A paragraph of `sentences` distinct sentences about `subject` (about 80 characters each)."""
    return " ".join(f"Step {i} of the {subject} runbook checks the contract of endpoint {i}." for i in range(sentences))


def _long_candidate(world) -> Candidate:
    """Held (scope and evidence missing), with a long rule, a long rival fact (a long diff) and replays."""
    fact(world.coder, world.architecture, "contracts", _long("old release"))
    held = submit(
        world,
        proposed_memory=_long("release"),
        requires_human_review=True,
        scope={"applies_to": ["public_api"]},
        root_cause_summary=_long("root cause", 6),
    )
    for passed in (True, False, True):
        replay(world, held, passed=passed)
    return held


def _long_conflict(world) -> Conflict:
    """A rule decided against a human-stated fact (the reviewer keeps the decision or restores it),
    then both texts made long: the classifier decides on short ones, the page shows long ones."""

    def said(text: str):
        data = FactInput(topic="deploys", content=text, memory_type="convention", veracity="human_stated")
        return propose_fact(domain=world.architecture, by=Actor.of_user(world.admin_user), data=data)

    human = said("Deploys happen on Tuesdays.").fact
    Fact.objects.filter(pk=human.pk).update(confidence=0.9)
    conflict = said("Deploys happen on Fridays.").conflict
    assert conflict is not None and conflict.loser_id == human.pk
    Fact.objects.filter(pk=conflict.loser_id).update(content=_long("Tuesday deploy"))
    Fact.objects.filter(pk=conflict.winner_id).update(content=_long("Friday deploy"))
    return conflict


def _in_view(page, locator) -> bool:
    """Whether the whole of `locator`'s box lies inside the viewport, and nothing covers its middle."""
    box = locator.bounding_box()
    assert box is not None
    inside = box["y"] >= 0 and box["y"] + box["height"] <= HEIGHT and box["x"] >= 0 and box["x"] + box["width"] <= WIDTH
    on_top = page.evaluate(
        "([el, x, y]) => { const hit = document.elementFromPoint(x, y); return !!hit && (hit === el || el.contains(hit)); }",
        [locator.element_handle(), box["x"] + box["width"] / 2, box["y"] + box["height"] / 2],
    )
    return inside and on_top


def _scroll_to_bottom(page) -> None:
    """Scroll the window and the detail column (its own scroll box on wide screens) to their ends."""
    page.evaluate(
        """() => {
          window.scrollTo(0, document.documentElement.scrollHeight);
          const col = document.querySelector('.detail-col');
          if (col) col.scrollTop = col.scrollHeight;
        }"""
    )
    page.wait_for_timeout(200)


def _page(world, live_server, chromium, path: str, *, javascript: bool = True):
    """`path` at 1280x800 as the reviewer; without JavaScript the forms post and the server redirects."""
    client = Client()
    client.force_login(world.reviewer)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context = chromium.new_context(viewport={"width": WIDTH, "height": HEIGHT}, java_script_enabled=javascript)
    context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    page = context.new_page()
    page.goto(f"{live_server.url}{path}")
    return page


def test_a_long_candidates_decision_buttons_stay_in_view_and_decide(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    held = _long_candidate(world)
    page = _page(world, live_server, chromium, f"/review/candidate/{held.pk}/")
    detail = page.locator("#detail")
    expect(detail.locator("[data-gate]")).to_have_count(len(promotion.GATES))
    # The item is longer than the screen: without the bar the buttons would be below the fold.
    assert (
        detail.bounding_box()["height"] > HEIGHT
        or page.evaluate("() => document.querySelector('.detail-col').scrollHeight") > HEIGHT
    )
    buttons = [detail.locator(f"[data-action={a}]") for a in ("approve", "deny")] + [
        detail.locator(".decide details > summary")
    ]
    assert [_in_view(page, b) for b in buttons] == [True, True, True]
    screenshot(page, "item-long-candidate-top")
    _scroll_to_bottom(page)
    assert [_in_view(page, b) for b in buttons] == [True, True, True]
    screenshot(page, "item-long-candidate-bottom")
    detail.locator("[data-action=approve]").click()
    expect(detail.get_by_test_id("decision-done")).to_be_visible()
    assert Candidate.objects.get(pk=held.pk).human_approved_at is not None
    page.context.close()


@pytest.mark.parametrize("javascript", [True, False], ids=["htmx", "no-js"])
def test_a_long_conflicts_decision_buttons_stay_in_view_and_decide(world, live_server, chromium, javascript):
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    conflict = _long_conflict(world)
    page = _page(world, live_server, chromium, f"/review/conflict/{conflict.pk}/", javascript=javascript)
    detail = page.locator("#detail")
    buttons = [detail.get_by_role("button", name=n) for n in ("Keep the decision", "Restore the human-stated fact")]
    assert [_in_view(page, b) for b in buttons] == [True, True]
    screenshot(page, "item-long-conflict-top")
    _scroll_to_bottom(page)
    assert [_in_view(page, b) for b in buttons] == [True, True]
    screenshot(page, "item-long-conflict-bottom")
    detail.get_by_role("textbox", name="Reason").fill("the rule was right")
    buttons[0].click()
    # htmx swaps the outcome in; a plain post comes back to the item's page with it as a message.
    expect(detail.get_by_test_id("decision-done" if javascript else "message")).to_be_visible()
    conflict.refresh_from_db()
    assert conflict.reviewed_at is not None
    page.context.close()
