"""A member who is not staff signs in through the site's form, reviews, and logs out, in a real
browser (Playwright, Debian Chromium): issue 16 §4."""

import shutil
from pathlib import Path

import pytest
from guardian.shortcuts import assign_perm

from tests.browser_fixtures import screenshot
from tests.conftest import client_for
from tests.factories import MembershipFactory, UserFactory
from tests.review.test_queue import DOC

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"
SHOTS = Path("/tmp/h11")
CANDIDATE = {
    **DOC,
    "candidate_id": "c-signin",
    "domain": "architecture",
    "proposed_memory": "The web app builds with npm run build on Node 20.",
}


def _keep(path: Path, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SHOTS / name)


def test_member_who_is_not_staff_signs_in_reviews_and_logs_out(world, live_server, chromium):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    mira = UserFactory(username="mira", is_staff=False)
    MembershipFactory(user=mira, workspace=world.workspace)
    assign_perm("memory.review_domain", mira, world.architecture)
    response = client_for(world.coder).post("/api/v1/candidates/", CANDIDATE, format="json")
    assert response.status_code == 201, response.content

    page = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(f"{live_server.url}/review/")
    assert page.url == f"{live_server.url}/login/?next=/review/"
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_test_id("logout")).to_have_count(0)
    _keep(screenshot(page, "signin-login"), "login.png")

    page.get_by_label("Username").fill("mira")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_test_id("sign-in").click()

    # Back where they were going (next=/review/), named in the top bar with a way out.
    page.wait_for_url(f"{live_server.url}/review/")
    expect(page.get_by_test_id("who")).to_have_text("mira")
    expect(page.get_by_test_id("logout")).to_be_visible()
    expect(page.get_by_test_id("queue-entry")).to_have_count(1)
    expect(page.get_by_test_id("queue-entry").first).to_contain_text("Node 20")
    expect(page.locator('.topbar a[href="/admin/"]')).to_have_count(0)
    _keep(screenshot(page, "signin-queue"), "queue.png")

    page.get_by_test_id("logout").click()
    page.wait_for_url(f"{live_server.url}/login/")
    expect(page.get_by_test_id("who")).to_have_count(0)
    page.goto(f"{live_server.url}/review/")
    assert page.url.startswith(f"{live_server.url}/login/")


def test_domain_reviewer_signs_in_decides_their_domain_and_is_refused_another(world, live_server, chromium):
    """Issue 16: a non-staff member with `review_domain` on architecture only sees and decides
    architecture's candidate; conventions' pending candidate, there at the same time, is neither
    listed nor reachable from the same signed-in browser session (404, unchanged)."""
    from playwright.sync_api import expect

    from memory.models import Candidate

    expect.set_options(timeout=20_000)
    ada = UserFactory(username="ada", is_staff=False)
    MembershipFactory(user=ada, workspace=world.workspace)
    assign_perm("memory.review_domain", ada, world.architecture)
    api = client_for(world.coder)
    mine = api.post("/api/v1/candidates/", CANDIDATE, format="json")
    other = api.post(
        "/api/v1/candidates/",
        {
            **CANDIDATE,
            "candidate_id": "c-conv",
            "domain": "conventions",
            "proposed_memory": "Conventions candidate the architecture reviewer must not see.",
        },
        format="json",
    )
    assert mine.status_code == 201 and other.status_code == 201, (mine.content, other.content)
    mine_id, other_id = mine.json()["id"], other.json()["id"]
    before = Candidate.objects.get(pk=other_id)
    assert before.promotion_status == "candidate"

    page = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(f"{live_server.url}/login/?next=/review/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_test_id("sign-in").click()
    page.wait_for_url(f"{live_server.url}/review/")
    expect(page.get_by_test_id("who")).to_have_text("ada")

    # The queue lists architecture's candidate and not conventions', pending at the same time.
    entries = page.get_by_test_id("queue-entry")
    expect(entries).to_have_count(1)
    expect(entries.first).to_contain_text("Node 20")
    expect(entries.first).to_contain_text("architecture")
    expect(page.get_by_text("Conventions candidate")).to_have_count(0)
    expect(page.get_by_test_id("counts")).to_contain_text("Candidate needing approval: 1")
    shot = screenshot(page, "signin-domain-reviewer-queue")
    Path("/tmp/h12").mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, "/tmp/h12/reviewer-queue.png")

    # Open it and deny it with a reason, in place.
    entries.first.get_by_role("link").click()
    expect(page.get_by_test_id("proposed")).to_have_text(CANDIDATE["proposed_memory"])
    page.locator("#detail").get_by_label("Reason / note").fill("Node 20 is not settled for the web app yet.")
    page.get_by_role("button", name="Deny", exact=True).click()
    expect(page.get_by_test_id("decision-done").first).to_contain_text("Denied: Node 20 is not settled")
    expect(page.get_by_test_id("queue-empty")).to_be_visible()
    assert Candidate.objects.get(pk=mine_id).promotion_status == "denied"

    # The same session, straight at the other domain's candidate: unknown to them, and unchanged.
    token = page.locator('input[name="csrfmiddlewaretoken"]').first.get_attribute("value")
    assert token
    assert page.request.get(f"{live_server.url}/review/candidate/{other_id}/").status == 404
    refused = page.request.post(
        f"{live_server.url}/review/candidate/{other_id}/decide/",
        form={"csrfmiddlewaretoken": token, "action": "approve", "reason": "not mine"},
        headers={"X-CSRFToken": token},
    )
    assert refused.status == 404, refused.text()
    after = Candidate.objects.get(pk=other_id)
    assert after.promotion_status == "candidate"
    assert after.human_approved_at is None and after.updated_at == before.updated_at
