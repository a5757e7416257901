"""Links that resolve for the person who sees them (issue 37): activity entries of conflicts open
the page showing the conflict, headings say which rule decided, stored facts link to the memory
browser, GET /logout/ answers a page, every page carries its own favicon."""

import re

import pytest
from django.test import Client

from tests.review import link_world

pytestmark = pytest.mark.usefixtures("reviewer_reviews_world_domains")


@pytest.fixture
def links(world):
    return link_world.build(world)


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_decided_both_true_opens_as_the_possible_conflict_it_was(world, links):
    from review.selectors_activity import recent_activity

    entries = recent_activity(world.admin_user, [world.workspace], limit=100)
    urls = {e.target_url for e in entries if e.event.target_type == "conflict"}
    assert f"/review/possible/{links.both_true.pk}/" in urls
    assert f"/review/conflict/{links.agents_conflict.pk}/" in urls
    for url in urls:
        assert _client(world.admin_user).get(url).status_code == 200, url


def test_a_conflict_heading_names_the_rule_that_decided_it(world, links):
    client = _client(world.admin_user)
    between_agents = client.get(f"/review/conflict/{links.agents_conflict.pk}/").content.decode()
    rule = links.agents_conflict.get_rule_display()
    assert f"Conflict decided on {rule} #{links.agents_conflict.pk}" in between_agents
    assert "human-stated fact lost" not in between_agents.split("<h2>")[1]
    human = client.get(f"/review/conflict/{links.human_lost.pk}/").content.decode()
    assert f"Conflict decided on {links.human_lost.get_rule_display()}: a human-stated fact lost" in human


def test_similarity_is_shown_as_stored_not_rounded_up(world, links):
    from memory.models import Conflict

    Conflict.objects.filter(pk=links.agents_conflict.pk).update(similarity=0.9962)
    html = _client(world.admin_user).get(f"/review/conflict/{links.agents_conflict.pk}/").content.decode()
    assert "wording similarity 0.996" in html and "similarity 1.00" not in html


def test_stored_as_fact_links_the_memory_browser_not_the_admin(world, links):
    html = _client(world.reviewer).get(f"/review/remember/{links.approved.pk}/").content.decode()
    stored = re.findall(r'Stored as fact <a href="([^"]+)"', html)
    assert stored and all(u.startswith("/memory/acme/facts/") for u in stored)
    assert all(_client(world.reviewer).get(u).status_code == 200 for u in stored)


def test_get_logout_answers_a_sign_out_form_and_signs_nobody_out(world):
    client = _client(world.reviewer)
    response = client.get("/logout/")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'method="post" action="/logout/"' in html and "csrfmiddlewaretoken" in html
    assert client.get("/review/").status_code == 200  # still signed in


def test_get_logout_when_signed_out_goes_to_sign_in(world):
    response = Client().get("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"


def test_every_page_names_its_own_icon(world):
    html = _client(world.reviewer).get("/").content.decode()
    assert re.search(r'<link rel="icon" href="data:image/svg\+xml,', html)


def test_the_decisions_tab_is_shown_only_to_who_may_record(world):
    tab = 'href="/memory/acme/decisions/new/"'
    for user in (world.reviewer, world.outsider_reviewer):
        html = _client(user).get("/memory/acme/policies/").content.decode()
        assert (tab in html) == (_client(user).get("/memory/acme/decisions/new/").status_code == 200), user
    assert tab in _client(world.admin_user).get("/memory/acme/policies/").content.decode()
