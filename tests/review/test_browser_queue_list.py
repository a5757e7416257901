"""The queue list in a real browser (Playwright, Debian Chromium), issue 18: bulk deny of a
selection, keyboard-only review (three items, then the Done-when run of 20 mixed items with the
keyboard alone), and no sideways scrolling at a phone's 390 px."""

from __future__ import annotations

import pytest

from memory.models import Candidate, Conflict, Fact, PromotionDecision
from tests.browser_fixtures import logged_in_page, screenshot
from tests.review.queue_items import candidate, challenged, possible

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reviewer_reviews_world_domains"),
]

# Waits until the detail shows an undecided item other than those already done; returns its key.
LOADED_ITEM = """done => {
  const a = document.querySelector('#detail article[data-testid=queue-detail]:not(.is-decided)');
  if (!a || !a.querySelector('button[data-key]')) return false;
  const key = a.dataset.kind + '-' + a.dataset.id;
  return done.includes(key) ? false : key;
}"""

# The key's field has the focus (the key waits while the item loads): typing may start.
FOCUSED = "selector => !!document.activeElement && document.activeElement.matches(selector)"

# The decision's outcome is shown (or the next item already replaced it).
DECIDED_ITEM = """key => {
  const a = document.querySelector('#detail #item-' + key);
  return !a || !!a.querySelector('[data-testid=decision-done]');
}"""


def decided(kind: str, pk: int) -> bool:
    if kind == "candidate":
        return Candidate.objects.get(pk=pk).promotion_status in ("active", "denied")
    if kind == "possible":
        return Conflict.objects.get(pk=pk).status != Conflict.Status.OPEN
    return Fact.objects.get(pk=pk).status != "challenged"


def review_with_keys(page, plan: dict[str, tuple[str, str]], *, shots: dict[int, str] | None = None) -> list[str]:
    """Press j once, then decide every item the queue opens next with the keyboard alone:
    `plan[key] = (action, text)` with action approve (a), deny (d, reason, Ctrl+Enter), edit (e,
    new wording, Ctrl+Enter) or both true (b, then accept the confirmation). Returns the keys in
    the order they were decided."""
    done: list[str] = []
    page.keyboard.press("j")
    for n in range(len(plan)):
        key = page.wait_for_function(LOADED_ITEM, arg=done, timeout=20_000).json_value()
        assert key in plan, f"the queue opened {key}, not one of the seeded items"
        if shots and n in shots:  # the item just opened, what happened to the previous one above it
            screenshot(page, shots[n])
        action, text = plan[key]
        if action == "approve":
            page.keyboard.press("a")
        elif action == "deny":
            page.keyboard.press("d")
            page.wait_for_function(FOCUSED, arg="[data-field=reason]")
            page.keyboard.type(text)
            page.keyboard.press("Control+Enter")
        elif action == "both":
            page.once("dialog", lambda dialog: dialog.accept())
            page.keyboard.press("b")
        else:
            page.keyboard.press("e")
            page.wait_for_function(FOCUSED, arg="[data-field=edit]")
            page.keyboard.press("Control+a")
            page.keyboard.type(text)
            page.keyboard.press("Control+Enter")
        page.wait_for_function(DECIDED_ITEM, arg=key, timeout=20_000)
        done.append(key)
    return done


def test_reviewer_bulk_denies_a_selection_with_a_reason(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    picked = [candidate(world.coder, world.architecture, f"Near-identical rule number {i}.") for i in range(3)]
    kept = candidate(world.coder2, world.architecture, "A rule to keep for later.")
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/review/")
    for c in picked:
        page.locator(f"#entry-candidate-{c.pk}").get_by_test_id("select").check()
    # Without a reason nothing is denied, and the selection stays.
    page.get_by_test_id("bulk-deny").click()
    expect(page.get_by_test_id("bulk-error")).to_contain_text("Say why")
    assert Candidate.objects.filter(promotion_status="denied").count() == 0
    page.get_by_test_id("bulk-reason").fill("Duplicates of the build rule already in memory.")
    page.get_by_test_id("bulk-deny").click()
    report = page.get_by_test_id("bulk-report")
    expect(report.locator("[data-status=done]")).to_have_count(3)
    expect(report.get_by_role("link", name=f"candidate #{picked[0].pk}")).to_have_attribute(
        "href", f"/review/candidate/{picked[0].pk}/"
    )
    # The list refreshed: only the unselected entry is left, not checked.
    expect(page.get_by_test_id("queue-entry")).to_have_count(1)
    expect(page.locator(f"#entry-candidate-{kept.pk}").get_by_test_id("select")).not_to_be_checked()
    screenshot(page, "queue-list-bulk")
    for c in picked:
        decision = PromotionDecision.objects.get(candidate=c, decision="deny")
        assert decision.reason == "Duplicates of the build rule already in memory."
        assert decision.decided_by_user == world.reviewer
    assert Candidate.objects.get(pk=kept.pk).promotion_status == "candidate"
    page.context.close()


def test_a_checked_box_survives_the_lists_refresh_and_the_detail_stays_in_view(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    made = [candidate(world.coder, world.architecture, f"Rule {i} with some words to fill a line.") for i in range(20)]
    page = logged_in_page(chromium, world.reviewer, live_server.url, width=1366)
    page.goto(f"{live_server.url}/review/?order=oldest")
    last = page.locator(f"#entry-candidate-{made[-1].pk}")
    last.get_by_test_id("select").check()
    last.get_by_role("link").click()
    expect(page.locator(f"#detail #item-candidate-{made[-1].pk}")).to_be_visible()
    expect(last).to_have_class("queue-entry is-current")
    assert page.url.endswith(f"/review/candidate/{made[-1].pk}/?order=oldest")  # the list's order kept
    box = page.locator("#detail").bounding_box()
    assert box is not None and 0 <= box["y"] < 900, box  # in the viewport, not 2,000 px above
    # Another reviewer's decision refreshes the list (queue-changed); the check and highlight stay.
    page.evaluate("htmx.trigger(document.body, 'queue-changed')")
    page.wait_for_timeout(1500)
    expect(last.get_by_test_id("select")).to_be_checked()
    expect(page.locator(f"#entry-candidate-{made[-1].pk}")).to_have_attribute("aria-current", "true")


def test_keyboard_only_review_of_three_items(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    approve = candidate(world.coder, world.architecture, "CI installs with npm ci.")
    deny = candidate(world.coder2, world.conventions, "Commit straight to main.")
    edit = candidate(world.coder, world.repo_context, "The web app build with Node 18.")
    plan = {
        f"candidate-{approve.pk}": ("approve", ""),
        f"candidate-{deny.pk}": ("deny", "Everything goes through a pull request."),
        f"candidate-{edit.pk}": ("edit", "The web app builds with Node 20."),
    }
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/review/")
    expect(page.get_by_test_id("shortcuts")).to_contain_text("j")
    done = review_with_keys(page, plan, shots={2: "queue-keyboard"})
    assert sorted(done) == sorted(plan)
    # What happened to the item before the last stays on screen, with its links.
    expect(page.get_by_test_id("last-outcome")).to_contain_text("Denied")
    expect(page.get_by_test_id("last-outcome").get_by_role("link").first).to_be_visible()
    assert Candidate.objects.get(pk=approve.pk).promotion_status == "active"
    denied = PromotionDecision.objects.get(candidate=deny, decision="deny")
    assert denied.reason == "Everything goes through a pull request."
    edited = Candidate.objects.get(pk=edit.pk)
    assert edited.promotion_status == "active" and edited.fact.content == "The web app builds with Node 20."
    page.context.close()


def test_done_when_a_reviewer_processes_20_mixed_items_keyboard_only(world, live_server, chromium):
    """Issue 18's Done-when: 20 mixed items (approvals, denials with a reason, edits, possible
    conflicts, challenged facts) decided with page.keyboard alone after the page loads."""
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    agents = [world.coder, world.coder2, world.planner]
    domains = [world.architecture, world.conventions, world.repo_context]
    plan: dict[str, tuple[str, str]] = {}
    for i in range(8):
        c = candidate(agents[i % 3], domains[i % 3], f"Approved rule {i}: run the linter before pushing step {i}.")
        plan[f"candidate-{c.pk}"] = ("approve", "")
    for i in range(5):
        c = candidate(agents[i % 3], domains[i % 3], f"Denied rule {i}: skip the tests on branch {i}.")
        plan[f"candidate-{c.pk}"] = ("deny", f"Tests are never skipped ({i}).")
    for i in range(3):
        c = candidate(agents[i % 3], domains[i % 3], f"Edited rule {i}: deploy with the script {i}.")
        plan[f"candidate-{c.pk}"] = ("edit", f"Edited rule {i}: deploy with make deploy-{i}.")
    for i in range(2):
        conflict = possible(world.coder, domains[i], f"pc{i}", f"Retries: three ({i}).", f"Retries: five ({i}).")
        plan[f"possible-{conflict.pk}"] = ("both", "")
    keep = challenged(world.planner, world.architecture, "ttl", "The cache TTL is 60 seconds.")
    drop = challenged(world.planner, world.conventions, "port", "The dev server listens on 8000.")
    plan[f"challenged-{keep.pk}"] = ("approve", "")
    plan[f"challenged-{drop.pk}"] = ("deny", "It moved to 8080.")
    assert len(plan) == 20

    page = logged_in_page(chromium, world.reviewer, live_server.url, width=1366)
    page.goto(f"{live_server.url}/review/")
    expect(page.get_by_test_id("queue-entry")).to_have_count(20)
    # From here on only the keyboard: no click, no fill, no mouse.
    done = review_with_keys(page, plan)
    assert sorted(done) == sorted(plan)
    undecided = [key for key in plan if not decided(key.rsplit("-", 1)[0], int(key.rsplit("-", 1)[1]))]
    assert undecided == []
    for key, (action, text) in plan.items():
        kind, pk = key.rsplit("-", 1)
        if kind == "candidate":
            c = Candidate.objects.get(pk=int(pk))
            assert c.promotion_status == ("denied" if action == "deny" else "active"), key
            if action == "edit":
                assert c.fact.content == text
            if action == "deny":
                assert PromotionDecision.objects.get(candidate=c, decision="deny").reason == text
    assert Fact.objects.get(pk=keep.pk).status == "active"
    assert Fact.objects.get(pk=drop.pk).status == "deprecated"
    expect(page.get_by_test_id("queue-empty")).to_be_visible()
    page.context.close()


def test_the_queue_does_not_scroll_sideways_on_a_390px_phone(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    for i in range(4):
        candidate(
            world.coder,
            world.repo_context,
            f"A long rule {i} with a path like services/billing/invoices/reconciliation/monthly_close_job.py "
            "and a URLhttps://ci.example.com/pipelines/123456789/jobs/987654321/artifacts/download",
        )
    challenged(world.planner, world.architecture, "ttl", "The cache TTL is 60 seconds.")
    page = logged_in_page(chromium, world.reviewer, live_server.url, width=390)
    page.goto(f"{live_server.url}/review/")
    expect(page.get_by_test_id("queue-entry")).to_have_count(5)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.get_by_test_id("queue-entry").first.get_by_role("link").click()
    expect(page.get_by_test_id("queue-detail")).to_be_visible()
    # On a phone the detail is below the list: it is scrolled into view, not left off-screen.
    page.wait_for_function(
        "() => { const top = document.getElementById('detail').getBoundingClientRect().top;"
        " return top >= 0 && top < window.innerHeight - 100; }"
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "queue-phone")
    page.context.close()


def test_an_item_past_the_list_is_counted_opened_and_decided(world, live_server, chromium, monkeypatch):
    from playwright.sync_api import expect

    from review import selectors_queue

    expect.set_options(timeout=20_000)
    monkeypatch.setattr(selectors_queue, "LIST_LIMIT", 3)  # the server runs in this process
    made = [challenged(world.coder, world.architecture, f"topic-{i}", f"Rule {i} still holds.") for i in range(5)]
    page = logged_in_page(chromium, world.reviewer, live_server.url, width=1366)
    page.goto(f"{live_server.url}/review/")
    expect(page.get_by_test_id("counts")).to_contain_text("Challenged fact: 5")
    expect(page.get_by_test_id("list-limited")).to_contain_text("newest 3 of each kind")
    expect(page.locator(f"#entry-challenged-{made[0].pk}")).to_have_count(0)
    page.goto(f"{live_server.url}/review/challenged/{made[0].pk}/")
    detail = page.locator(f"#item-challenged-{made[0].pk}")
    expect(detail).to_be_visible()
    detail.get_by_role("button", name="Revalidate").click()
    expect(page.get_by_test_id("decision-done").first).to_have_attribute("data-outcome", "revalidated")
    assert Fact.objects.get(pk=made[0].pk).status == "active"
    expect(page.get_by_test_id("counts")).to_contain_text("Challenged fact: 4")  # the list refreshed
    screenshot(page, "queue-item-past-the-list")
    page.context.close()
