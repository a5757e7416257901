"""People's erasure API (issue 21): preview and erase for signed-in workspace admins only."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from memory.models import AuditEvent, Fact
from tests.conftest import client_for
from tests.factories import DomainFactory, FactFactory, MembershipFactory, UserFactory

PREVIEW, ERASE = "/api/v1/admin/erasures/preview/", "/api/v1/admin/erasures/"
SECRET = "Bob's badge number is 80417."


def person(user, *, csrf: bool = False) -> APIClient:
    client = APIClient(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture
def fact(world):
    return FactFactory(domain=world.architecture, topic="badges", content=SECRET)


def body(fact, **extra):
    return {"workspace": "acme", "selection": {"kind": "ids", "ids": [fact.pk]}, **extra}


def test_the_preview_lists_exactly_what_will_go_and_writes_nothing(world, fact):
    before = AuditEvent.objects.count()
    answer = person(world.admin_user).post(PREVIEW, body(fact), format="json")
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert data["counts"]["memory.fact"] == 1
    assert data["facts"] == [
        {
            "id": fact.pk,
            "domain": "architecture",
            "topic": "badges",
            "content": SECRET,
            "status": "active",
            "superseded_by": None,
        }
    ]
    assert Fact.objects.filter(pk=fact.pk).exists() and AuditEvent.objects.count() == before


def test_an_admin_erases_and_gets_the_tombstone_without_the_content(world, fact):
    answer = person(world.admin_user).post(ERASE, body(fact, reason="GDPR art. 17 request"), format="json")
    assert answer.status_code == 201, answer.content
    data = answer.json()
    assert data["erased"]["memory.fact"] == [fact.pk] and len(data["sha256"]) == 64
    assert SECRET not in answer.content.decode()
    assert AuditEvent.objects.get(pk=data["tombstone"]).verb == "subject.erased"
    assert not Fact.objects.filter(pk=fact.pk).exists()


def test_erasing_needs_a_reason(world, fact):
    answer = person(world.admin_user).post(ERASE, body(fact), format="json")
    assert (answer.status_code, answer.json()["code"]) == (400, "reason_required")
    assert Fact.objects.filter(pk=fact.pk).exists()


@pytest.mark.parametrize("url", [PREVIEW, ERASE])
def test_an_agent_key_can_never_erase(world, fact, url):
    answer = client_for(world.coder).post(url, body(fact, reason="r"), format="json")
    assert (answer.status_code, answer.json()["code"]) == (403, "erasure_forbidden")
    assert Fact.objects.filter(pk=fact.pk).exists()


def test_a_member_who_is_not_admin_is_refused_and_another_workspaces_admin_sees_nothing(world, fact):
    answer = person(world.reviewer).post(ERASE, body(fact, reason="r"), format="json")
    assert (answer.status_code, answer.json()["code"]) == (403, "erasure_forbidden")
    stranger = UserFactory(username="globex-admin")
    MembershipFactory(user=stranger, workspace=world.other_workspace, is_admin=True)
    answer = person(stranger).post(ERASE, body(fact, reason="r"), format="json")
    assert (answer.status_code, answer.json()["code"]) == (404, "not_found")
    # naming their own workspace, the fact of another workspace is not theirs to select
    answer = person(stranger).post(ERASE, {**body(fact, reason="r"), "workspace": "globex"}, format="json")
    assert (answer.status_code, answer.json()["code"]) == (400, "nothing_to_erase")
    assert Fact.objects.filter(pk=fact.pk).exists()


def test_without_a_session_the_answer_is_401(fact):
    assert APIClient().post(PREVIEW, body(fact), format="json").status_code == 401


def test_csrf_is_enforced_for_the_session(world, fact):
    answer = person(world.admin_user, csrf=True).post(ERASE, body(fact, reason="r"), format="json")
    assert answer.status_code == 403
    assert Fact.objects.filter(pk=fact.pk).exists()


@pytest.mark.parametrize(
    ("selection", "code"),
    [
        ({"kind": "bogus"}, "invalid_selection"),
        ({"kind": "ids", "ids": "x y"}, "invalid_selection"),
        ({"kind": "domain", "domain": "nosuch"}, "invalid_selection"),
        ({"kind": "search", "query": "zzzunmatchedzzz"}, "nothing_to_erase"),
        ({"kind": "agent", "agent": "planner-a"}, "nothing_to_erase"),
    ],
)
def test_bad_or_empty_selections_are_400_with_a_stable_code(world, fact, selection, code):
    answer = person(world.admin_user).post(PREVIEW, {"workspace": "acme", "selection": selection}, format="json")
    assert (answer.status_code, answer.json()["code"]) == (400, code)


def test_a_domain_selection_with_a_topic(world):
    DomainFactory(workspace=world.workspace, name="people")
    kept = FactFactory(domain=world.architecture, topic="other", content="Kept.")
    gone = FactFactory(domain=world.architecture, topic="badges", content="Gone.")
    selection = {"kind": "domain", "domain": "architecture", "topic": "badges"}
    answer = person(world.admin_user).post(
        ERASE, {"workspace": "acme", "selection": selection, "reason": "r"}, format="json"
    )
    assert answer.status_code == 201
    assert Fact.objects.filter(pk=kept.pk).exists() and not Fact.objects.filter(pk=gone.pk).exists()


def test_erasing_what_differs_from_the_preview_is_409(world, fact):
    FactFactory(domain=world.architecture, topic="badges", content="Bob's second badge is 80418.")
    selection = {"kind": "search", "query": "badge"}
    answer = person(world.admin_user).post(
        ERASE, {"workspace": "acme", "selection": selection, "fact_ids": [fact.pk], "reason": "r"}, format="json"
    )
    assert (answer.status_code, answer.json()["code"]) == (409, "selection_changed")
    assert Fact.objects.filter(pk=fact.pk).exists()
