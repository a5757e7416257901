"""Every link a page shows resolves for the person who sees it (issue 37): a breadth-first crawl of
the site's own links, signed in as a workspace admin, a reviewer of one domain and a plain member,
over a world with an item of every kind waiting and conflicts decided every way."""

from __future__ import annotations

import re
from collections import deque
from urllib.parse import urldefrag

import pytest
from django.test import Client

from memory import access
from tests.review import link_world

MAX_PAGES = 150
SKIP = ("/logout/", "/static/")
HREF = re.compile(r'href="(/[^"]*)"')


def _start_pages(links: link_world.LinkWorld, slug: str) -> list[str]:
    fact = links.challenged
    return [
        "/",
        "/review/",
        f"/memory/{slug}/",
        f"/memory/{slug}/facts/{fact.pk}/",
        f"/memory/{slug}/facts/{links.agents_conflict.winner_id}/",
        f"/memory/{slug}/graph/",
        f"/memory/{slug}/policies/",
        f"/memory/{slug}/decisions/new/",
        f"/access/{slug}/",
        f"/review/remember/{links.remember.pk}/",
        f"/review/remember/{links.approved.pk}/",
    ]


def _links_of(html: str) -> list[str]:
    found = []
    for href in HREF.findall(html):
        url = urldefrag(href.replace("&amp;", "&"))[0]
        if url and not url.startswith("//") and not url.startswith(SKIP):
            found.append(url)
    return found


def crawl(client: Client, start: list[str], *, opens_admin: bool) -> tuple[int, list[tuple[str, str, object]]]:
    """Fetch `start` and every same-site link the answers show, breadth first, up to MAX_PAGES.
    Returns the number of pages fetched and each (page, link, status) that is a 404, a 5xx or a
    link into the admin for a person the admin does not let in. Start pages the person may not
    open (a 403 or 404 they are not shown a link to) are not faults."""
    faults: list[tuple[str, str, object]] = []
    queue: deque[tuple[str, str]] = deque(("(start)", url) for url in start)
    seen = set(start)
    fetched = 0
    while queue and fetched < MAX_PAGES:
        page, url = queue.popleft()
        if url.startswith("/admin/"):
            if not opens_admin:
                faults.append((page, url, "admin link"))
            continue
        response = client.get(url)
        fetched += 1
        status = response.status_code
        if page != "(start)" and (status == 404 or status >= 500):
            faults.append((page, url, status))
        if status != 200 or not response.get("Content-Type", "").startswith("text/html"):
            continue
        for link in _links_of(response.content.decode()):
            if link not in seen:
                seen.add(link)
                queue.append((url, link))
    return fetched, faults


@pytest.fixture
def links(world):
    from guardian.shortcuts import assign_perm

    assign_perm("memory.review_domain", world.reviewer, world.architecture)  # one domain of three
    # The factories make staff accounts; a reviewer and a plain member are not staff: the admin
    # lets them in nowhere, so no page may link them there.
    type(world.reviewer).objects.filter(pk__in=[world.reviewer.pk, world.outsider_reviewer.pk]).update(is_staff=False)
    return link_world.build(world)


@pytest.mark.parametrize("persona", ["admin_user", "reviewer", "outsider_reviewer"])
def test_no_link_a_page_shows_is_dead_or_leads_into_an_admin_the_person_cannot_use(world, links, persona):
    user = type(world.admin_user).objects.get(pk=getattr(world, persona).pk)
    client = Client()
    client.force_login(user)
    fetched, faults = crawl(client, _start_pages(links, world.workspace.slug), opens_admin=access.is_staff(user))
    assert fetched > len(_start_pages(links, world.workspace.slug))  # the crawl followed links
    assert faults == [], "\n".join(f"{page} → {link}: {status}" for page, link, status in faults)
