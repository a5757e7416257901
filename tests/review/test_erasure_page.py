"""The erasure page and the admin action (issue 21): preview exactly what goes, then confirm."""

from __future__ import annotations

import pytest

from memory.models import AuditEvent, Fact
from tests.factories import DomainFactory, FactFactory, MembershipFactory, UserFactory

SECRET = "Carol's home address is 12 Elm Row."
URL = "/memory/acme/erase/"


@pytest.fixture
def fact(world):
    return FactFactory(domain=world.architecture, topic="people", content=SECRET)


def test_the_preview_shows_the_facts_texts_and_counts_and_writes_nothing(world, fact, client):
    client.force_login(world.admin_user)
    before = AuditEvent.objects.count()
    page = client.get(URL, {"kind": "ids", "ids": str(fact.pk)})
    assert page.status_code == 200
    html = page.content.decode()
    assert SECRET.replace("'", "&#x27;") in html and 'data-testid="count-memory.fact">1<' in html
    assert 'name="csrfmiddlewaretoken"' in html and "cannot be undone" in html
    assert Fact.objects.filter(pk=fact.pk).exists() and AuditEvent.objects.count() == before


def test_confirming_with_a_reason_erases_and_shows_the_tombstone(world, fact, client):
    client.force_login(world.admin_user)
    page = client.post(
        URL,
        {"kind": "ids", "ids": str(fact.pk), "previewed": str(fact.pk), "reason": "erasure request", "confirm": "yes"},
    )
    assert page.status_code == 200
    tombstone = AuditEvent.objects.get(verb="subject.erased")
    assert f"#{tombstone.pk}" in page.content.decode() and "Carol" not in page.content.decode()
    assert not Fact.objects.filter(pk=fact.pk).exists()


def test_without_the_confirmation_or_a_reason_nothing_is_erased(world, fact, client):
    client.force_login(world.admin_user)
    for data in ({"reason": "r"}, {"confirm": "yes"}):
        page = client.post(URL, {"kind": "ids", "ids": str(fact.pk), "previewed": str(fact.pk), **data})
        assert page.status_code == 400
    assert Fact.objects.filter(pk=fact.pk).exists()


def test_the_page_checks_csrf(world, fact):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(world.admin_user)
    page = client.post(URL, {"kind": "ids", "ids": str(fact.pk), "reason": "r", "confirm": "yes"})
    assert page.status_code == 403
    assert Fact.objects.filter(pk=fact.pk).exists()


def test_a_member_gets_403_and_another_workspaces_admin_404(world, fact, client):
    client.force_login(world.reviewer)
    assert client.get(URL, {"kind": "ids", "ids": str(fact.pk)}).status_code == 403
    stranger = UserFactory(username="globex-admin")
    MembershipFactory(user=stranger, workspace=world.other_workspace, is_admin=True)
    client.force_login(stranger)
    assert client.post(URL, {"kind": "ids", "ids": str(fact.pk), "reason": "r", "confirm": "yes"}).status_code == 404
    assert Fact.objects.filter(pk=fact.pk).exists()


def test_an_empty_or_bad_selection_says_so(world, client):
    client.force_login(world.admin_user)
    assert "matches no fact" in client.get(URL, {"kind": "search", "query": "nothing-here"}).content.decode()
    assert client.get(URL, {"kind": "domain", "domain": "nosuch"}).status_code == 400


def test_the_admin_action_leads_to_the_preview_of_those_facts(world, fact, admin_client):
    other = FactFactory(domain=world.architecture, topic="people", content="Dan's address is 3 Oak St.")
    response = admin_client.post(
        "/admin/memory/fact/", {"action": "erase_selected", "_selected_action": [fact.pk, other.pk]}
    )
    assert response.status_code == 302
    assert response["Location"] == f"{URL}?kind=ids&ids={fact.pk}%2C{other.pk}"
    assert Fact.objects.filter(pk__in=[fact.pk, other.pk]).count() == 2
    preview = admin_client.get(response["Location"])
    assert preview.status_code == 200 and 'data-testid="count-memory.fact">2<' in preview.content.decode()


def test_the_admin_action_refuses_facts_of_two_workspaces(world, fact, admin_client):
    foreign = FactFactory(domain=DomainFactory(workspace=world.other_workspace, name="ops"), content="Elsewhere.")
    response = admin_client.post(
        "/admin/memory/fact/", {"action": "erase_selected", "_selected_action": [fact.pk, foreign.pk]}, follow=True
    )
    assert "one workspace at a time" in response.content.decode()


def test_a_selection_that_changed_since_the_preview_is_shown_again_not_erased(world, fact, client):
    client.force_login(world.admin_user)
    newer = FactFactory(domain=world.architecture, topic="people", content="Carol's new address is 4 Ash Lane.")
    page = client.post(
        URL,
        {"kind": "search", "query": "Carol address", "previewed": str(fact.pk), "reason": "r", "confirm": "yes"},
    )
    assert page.status_code == 409
    html = page.content.decode()
    assert "preview it again" in html and "4 Ash Lane" in html
    assert Fact.objects.filter(pk__in=[fact.pk, newer.pk]).count() == 2
