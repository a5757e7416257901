"""Queue items in a real browser (Playwright, Debian Chromium), issue 18: an item's own page, two
reviewers racing on one item (the second sees who decided it, in place), and approving a
restatement with the choice between keeping the old wording and replacing it."""

import re

import pytest

from memory.actors import Actor
from memory.models import Candidate, Fact
from memory.services.facts import FactInput, propose_fact
from tests.browser_fixtures import logged_in_page, screenshot
from tests.conftest import client_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("reviewer_reviews_world_domains"),
]

DOC = {
    "schema": "awtl.memory_candidate.v2",
    "failure_class": "agent_failure",
    "failure_type": "wrong_command",
    "source_action_ids": ["a-1"],
    "root_cause_summary": "Pushed without running the tests.",
    "scope": {"applies_to": ["web"], "does_not_apply_to": ["mobile"]},
    "evidence_refs": ["ci:42"],
    "verification_probe_candidate": "make-test",
    "requires_human_review": True,
    "domain": "architecture",
    "topic": "testing",
}
OLD = "Run the tests with make test before pushing."
NEW = "Before pushing, run the tests with make test."


def submit(world, text: str, cid: str) -> Candidate:
    response = client_for(world.coder).post(
        "/api/v1/candidates/", {**DOC, "candidate_id": cid, "proposed_memory": text}, format="json"
    )
    assert response.status_code in (200, 201), response.content
    return Candidate.objects.get(pk=response.json()["id"])


def test_two_reviewers_race_on_one_item_and_the_second_sees_who_decided_it(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    candidate = submit(world, "Use npm ci, never npm install, in CI builds.", "c-race")
    url = f"{live_server.url}/review/candidate/{candidate.pk}/"
    first = logged_in_page(chromium, world.admin_user, live_server.url)
    second = logged_in_page(chromium, world.reviewer, live_server.url)
    for page in (first, second):
        page.goto(url)  # the item's own page: styled, the list beside it, the item marked
        expect(page.get_by_test_id("queue-detail")).to_be_visible()
    expect(second.locator(f"#entry-candidate-{candidate.pk}")).to_have_class(re.compile(r"\bis-current\b"))
    expect(second.get_by_test_id("proposer-agent")).to_have_text("coder-a")
    screenshot(second, "queue-item-page")

    first.locator('[data-action="approve"]').click()
    expect(first.get_by_test_id("decision-done").first).to_contain_text("promoted as a new fact")

    second.locator('[data-field="reason"]').fill("a duplicate of the build rule")
    second.locator('[data-action="deny"]').click()
    message = second.get_by_test_id("already-decided")
    expect(message).to_contain_text("Already decided: wsadmin approved it at")
    expect(second.locator('[data-action="approve"]')).to_be_disabled()
    expect(second.locator('[data-action="deny"]')).to_be_disabled()
    screenshot(second, "queue-race-409")
    assert Candidate.objects.get(pk=candidate.pk).promotion_status == "active"


def test_approving_a_restatement_offers_keep_or_replace_before_the_decision(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    old = propose_fact(
        domain=world.architecture,
        by=Actor.of_agent(world.coder),
        data=FactInput(topic="testing", content=OLD, memory_type="procedure"),
    ).fact
    candidate = submit(world, NEW, "c-restate")
    page = logged_in_page(chromium, world.reviewer, live_server.url)
    page.goto(f"{live_server.url}/review/")
    page.locator(f"#entry-candidate-{candidate.pk} a").first.click()
    choice = page.get_by_test_id("restatement-choice")
    expect(choice).to_contain_text(f"restates live fact #{old.pk}")
    expect(choice.locator('[data-choice="keep"]')).to_be_checked()  # the safe default, shown before approving
    expect(page.get_by_test_id("diff-head-old").first).to_contain_text("current")
    expect(page.get_by_test_id("diff-head-new").first).to_contain_text("proposed")

    # The edit box shows a live diff against the agent's wording.
    page.get_by_text("Edit and approve", exact=True).click()
    page.locator('[data-field="edit"]').fill(NEW + " Always.")
    expect(page.get_by_test_id("edit-diff").locator("ins")).to_contain_text("Always")

    choice.locator('[data-choice="replace"]').check()
    screenshot(page, "queue-restatement-choice")
    page.locator('[data-action="approve"]').click()
    done = page.get_by_test_id("decision-done").first
    expect(done).to_contain_text(f"replaced the wording of fact #{old.pk}")
    new = Candidate.objects.get(pk=candidate.pk).fact
    assert new.content == NEW and Fact.objects.get(pk=old.pk).superseded_by_id == new.pk
    done.get_by_role("link", name=f"fact #{new.pk}").click()
    expect(page.get_by_test_id("history-diff")).to_be_visible()
