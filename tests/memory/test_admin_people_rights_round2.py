"""The rest of issue 32 round 2, through the admin as a browser uses it (CSRF enforced): memberships
change only for people the workspace admin manages and are made only for people they may add;
guardian's reviewer-permission pages reach only people and groups they manage; the user list's
group filter names only the groups they see; the admin's password and user pages are audited.

Found from outside: an admin of acme demoted and removed a co-admin who also administers globex,
and made any account id a member (an admin of another workspace, a superuser); gave `review_domain`
to people they do not manage; read every group's name in the user list's filter; and set passwords
in the admin without the `user.password_set` event `manage.py set_password` records.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from guardian.models import GroupObjectPermission, UserObjectPermission

from memory import access
from memory.models import AuditEvent, WorkspaceMembership
from tests.factories import DomainFactory, MembershipFactory, UserFactory, WorkspaceFactory
from tests.memory import test_admin_people_rights as round1
from tests.memory.test_admin_people_rights import (
    NEW_PASSWORD,
    People,
    browser,
    change_url,
    password_url,
    set_password,
    submit,
    user_form,
)

User = get_user_model()
people = round1.people  # the fixture: the same people as round 1


def acme(people: People) -> Any:
    return people.member.engram_memberships.get().workspace


def membership(user: Any, workspace: Any) -> WorkspaceMembership:
    return WorkspaceMembership.objects.get(user=user, workspace=workspace)


def membership_url(m: WorkspaceMembership, op: str = "change") -> str:
    return reverse(f"admin:memory_workspacemembership_{op}", args=[m.pk])


def membership_form(m: WorkspaceMembership, is_admin: bool) -> dict[str, Any]:
    data: dict[str, Any] = {"user": m.user_id, "workspace": m.workspace_id}
    if is_admin:
        data["is_admin"] = "on"
    return data


def add_member(client: Any, user: Any, workspace: Any, is_admin: bool = False) -> Any:
    data: dict[str, Any] = {"user": user.pk, "workspace": workspace.pk}
    if is_admin:
        data["is_admin"] = "on"
    return submit(client, reverse("admin:memory_workspacemembership_add"), data)


# --- Memberships --------------------------------------------------------------------------------
@pytest.mark.django_db
def test_an_admin_cannot_demote_or_remove_a_co_admin_who_also_administers_another_workspace(
    people: People,
) -> None:
    co_admin = membership(people.globex_admin, acme(people))
    WorkspaceMembership.objects.filter(pk=co_admin.pk).update(is_admin=True)
    client = browser(people.acme_admin)

    assert client.get(membership_url(co_admin)).status_code == 200  # seen, read-only
    assert submit(client, membership_url(co_admin), membership_form(co_admin, is_admin=False)).status_code == 403
    assert submit(client, membership_url(co_admin, "delete"), {"post": "yes"}).status_code == 403
    bulk = {"action": "delete_selected", "_selected_action": [co_admin.pk], "post": "yes"}
    submit(client, reverse("admin:memory_workspacemembership_changelist"), bulk)
    assert WorkspaceMembership.objects.get(pk=co_admin.pk).is_admin

    # A superuser's membership is out of reach too.
    root = MembershipFactory(user=people.root, workspace=acme(people), is_admin=True)
    assert submit(client, membership_url(root), membership_form(root, is_admin=False)).status_code == 403
    assert submit(client, membership_url(root, "delete"), {"post": "yes"}).status_code == 403
    assert WorkspaceMembership.objects.get(pk=root.pk).is_admin


@pytest.mark.django_db
def test_an_admin_demotes_and_removes_the_people_they_manage(people: People) -> None:
    ws = acme(people)
    promoted = membership(people.member, ws)
    WorkspaceMembership.objects.filter(pk=promoted.pk).update(is_admin=True)
    client = browser(people.acme_admin)

    assert submit(client, membership_url(promoted), membership_form(promoted, is_admin=False)).status_code == 302
    assert not WorkspaceMembership.objects.get(pk=promoted.pk).is_admin
    assert AuditEvent.objects.filter(verb="membership.changed", target_id=promoted.pk).exists()

    # The bulk delete removes those they manage and leaves the others.
    co_admin = membership(people.globex_admin, ws)
    WorkspaceMembership.objects.filter(pk=co_admin.pk).update(is_admin=True)
    theirs = membership(people.member2, ws)
    # Django refuses the whole action when one row may not be deleted; the rows reached alone go.
    bulk = {"action": "delete_selected", "_selected_action": [theirs.pk], "post": "yes"}
    assert submit(client, reverse("admin:memory_workspacemembership_changelist"), bulk).status_code == 302
    assert not WorkspaceMembership.objects.filter(pk=theirs.pk).exists()
    mixed = {"action": "delete_selected", "_selected_action": [promoted.pk, co_admin.pk], "post": "yes"}
    submit(client, reverse("admin:memory_workspacemembership_changelist"), mixed)
    assert WorkspaceMembership.objects.filter(pk=co_admin.pk).exists()


@pytest.mark.django_db
def test_the_person_of_a_membership_is_fixed_once_made(people: People) -> None:
    theirs = membership(people.member, acme(people))
    client = browser(people.acme_admin)
    form = {"user": people.root.pk, "workspace": theirs.workspace_id, "is_admin": "on"}
    assert submit(client, membership_url(theirs), form).status_code == 302
    theirs.refresh_from_db()
    assert (theirs.user_id, theirs.is_admin) == (people.member.pk, True)


@pytest.mark.django_db
def test_an_admin_adds_only_people_they_manage_or_of_no_workspace_holding_nothing_more(people: People) -> None:
    ws = acme(people)
    beta = WorkspaceFactory(slug="beta", name="Beta")
    MembershipFactory(user=people.acme_admin, workspace=beta, is_admin=True)
    client = browser(people.acme_admin)

    # Someone of another workspace only, an admin of another workspace, a superuser: refused.
    for outranking in (people.outsider, people.globex_admin, people.root):
        refused = add_member(client, outranking, beta, is_admin=True)
        assert refused.status_code == 200 and "user" in refused.context["adminform"].form.errors
        assert not WorkspaceMembership.objects.filter(user=outranking, workspace=beta).exists()

    # Someone they manage, even as an admin: what they hold, the admin holds.
    assert add_member(client, people.member, beta, is_admin=True).status_code == 302
    assert membership(people.member, beta).is_admin

    # The person box names nobody they may not add, whatever id is put in the address.
    add_page = reverse("admin:memory_workspacemembership_add")
    assert b">root</a>" not in client.get(f"{add_page}?user={people.root.pk}").content
    assert b">outsider</a>" not in client.get(f"{add_page}?user={people.outsider.pk}").content
    assert b">member2</a>" in client.get(f"{add_page}?user={people.member2.pk}").content

    # A fresh account of no workspace becomes theirs to manage.
    newcomer = UserFactory(username="newcomer", is_staff=False)
    assert not access.may_manage_user(people.acme_admin, newcomer)
    assert add_member(client, newcomer, ws).status_code == 302
    assert access.may_manage_user(people.acme_admin, newcomer)
    assert AuditEvent.objects.filter(verb="membership.created", target_id=membership(newcomer, ws).pk).exists()


@pytest.mark.django_db
def test_an_account_of_no_workspace_holding_a_right_the_admin_lacks_is_not_theirs_to_add(
    people: People,
) -> None:
    globex = people.outsider.engram_memberships.get().workspace
    people.globex_admin.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_workspacemembership", "view_workspacemembership"])
    )
    client = browser(people.globex_admin)
    # The helper's group holds model permissions the admin of globex does not.
    refused = add_member(client, people.helper, globex)
    assert refused.status_code == 200 and "user" in refused.context["adminform"].form.errors
    assert not people.helper.engram_memberships.exists()
    # The admin of acme holds every model permission: the helper is theirs to add.
    assert add_member(browser(people.acme_admin), people.helper, acme(people)).status_code == 302
    assert set(access.addable_members(people.staffer)) == set()  # administers nothing


# --- Guardian's reviewer permissions of a domain ------------------------------------------------
def manage_user_url(domain: Any, user: Any) -> str:
    return reverse("admin:memory_memorydomain_permissions_manage_user", args=[domain.pk, user.pk])


def manage_group_url(domain: Any, group: Group) -> str:
    return reverse("admin:memory_memorydomain_permissions_manage_group", args=[domain.pk, group.pk])


@pytest.mark.django_db
def test_reviewer_permissions_go_only_to_people_and_groups_the_admin_manages(people: People) -> None:
    domain = DomainFactory(workspace=acme(people), name="architecture")
    client = browser(people.acme_admin)
    body = {"permissions": ["review_domain"]}

    for person in (people.globex_admin, people.root, people.outsider):
        assert client.get(manage_user_url(domain, person)).status_code == 404, person.username
        assert submit(client, manage_user_url(domain, person), body).status_code == 404
    ops = Group.objects.create(name="ops")
    ops.user_set.add(people.globex_admin)
    for group in (ops, Group.objects.get(name="helpers")):
        assert client.get(manage_group_url(domain, group)).status_code == 404, group.name
        assert submit(client, manage_group_url(domain, group), body).status_code == 404
    assert not UserObjectPermission.objects.filter(object_pk=str(domain.pk)).exists()
    assert not GroupObjectPermission.objects.filter(object_pk=str(domain.pk)).exists()

    before = AuditEvent.objects.filter(verb="reviewer_permission.changed").count()
    assert submit(client, manage_user_url(domain, people.member), body).status_code == 302
    assert User.objects.get(pk=people.member.pk).has_perm("memory.review_domain", domain)
    crew = Group.objects.create(name="crew")
    crew.user_set.add(people.member2)
    assert submit(client, manage_group_url(domain, crew), body).status_code == 302
    assert User.objects.get(pk=people.member2.pk).has_perm("memory.review_domain", domain)
    assert AuditEvent.objects.filter(verb="reviewer_permission.changed").count() == before + 2


# --- The user list's group filter ----------------------------------------------------------------
def group_filter_choices(client: Any) -> set[str]:
    page = client.get(reverse("admin:auth_user_changelist"))
    assert page.status_code == 200
    [groups] = [spec for spec in page.context["cl"].filter_specs if getattr(spec, "field_path", "") == "groups"]
    return {name for _, name in groups.lookup_choices}


@pytest.mark.django_db
def test_the_group_filter_names_only_the_groups_the_person_sees(people: People) -> None:
    Group.objects.create(name="ops").user_set.add(people.root)
    Group.objects.create(name="crew").user_set.add(people.member)
    page = browser(people.acme_admin).get(reverse("admin:auth_user_changelist"))
    assert b"ops" not in page.content and b"helpers" not in page.content
    assert group_filter_choices(browser(people.acme_admin)) == {"crew"}
    assert group_filter_choices(browser(people.helper)) == {"helpers"}
    assert group_filter_choices(browser(people.root)) == {"ops", "crew", "helpers"}


# --- The admin's password and user pages are audited --------------------------------------------
@pytest.mark.django_db
def test_setting_a_password_in_the_admin_is_audited_like_manage_py_set_password(people: People) -> None:
    client = browser(people.acme_admin)
    assert set_password(client, people.member).status_code == 302
    event = AuditEvent.objects.get(verb="user.password_set", target_id=people.member.pk)
    assert (event.actor_user_id, event.workspace_id, event.target_type) == (people.acme_admin.pk, None, "user")

    # Refused or invalid, nothing is recorded.
    assert set_password(client, people.root).status_code == 404
    mismatch = {"password1": NEW_PASSWORD, "password2": "something else 42", "usable_password": "true"}
    assert submit(client, password_url(people.member2), mismatch).status_code == 200
    assert AuditEvent.objects.filter(verb="user.password_set").count() == 1

    # Turning password sign-in off is a password change too.
    off = {"usable_password": "false", "unset-password": "1"}
    assert submit(client, password_url(people.member2), off).status_code == 302
    assert not User.objects.get(pk=people.member2.pk).has_usable_password()
    event = AuditEvent.objects.get(verb="user.password_set", target_id=people.member2.pk)
    assert event.detail == {"usable": False}


@pytest.mark.django_db
def test_the_password_and_its_event_are_one_transaction(people: People, monkeypatch) -> None:
    import memory.admin.users

    def broken(**kwargs: Any) -> None:
        raise RuntimeError("the audit trail is down")

    monkeypatch.setattr(memory.admin.users, "record_event", broken)
    before = User.objects.get(pk=people.member.pk).password
    with pytest.raises(RuntimeError):
        set_password(browser(people.acme_admin), people.member)
    assert User.objects.get(pk=people.member.pk).password == before


@pytest.mark.django_db
def test_renaming_or_deactivating_someone_in_the_admin_is_audited(people: People) -> None:
    client = browser(people.acme_admin)
    target = people.member
    form = user_form(target, username="member-renamed", is_active=False)
    assert submit(client, change_url(target), form).status_code == 302
    event = AuditEvent.objects.get(verb="user.changed", target_id=target.pk)
    assert event.actor_user_id == people.acme_admin.pk
    assert event.detail["username"] == ["member", "member-renamed"]
    assert event.detail["is_active"] == [True, False]
    assert {"username", "is_active"} <= set(event.detail["changed"])


@pytest.mark.django_db
def test_creating_and_deleting_people_in_the_admin_is_audited(people: People) -> None:
    client = browser(people.acme_admin)
    add = {"username": "newcomer", "usable_password": "true", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
    assert submit(client, reverse("admin:auth_user_add"), add).status_code == 302
    newcomer = User.objects.get(username="newcomer")
    created = AuditEvent.objects.get(verb="user.created", target_id=newcomer.pk)
    assert (created.actor_user_id, created.detail) == (people.acme_admin.pk, {"username": "newcomer"})

    # One deleted from its page, one by the bulk action beside someone they may not delete.
    assert submit(client, round1.delete_url(people.member2), {"post": "yes"}).status_code == 302
    round1.bulk_delete(client, [people.member, people.root])
    deleted = dict(AuditEvent.objects.filter(verb="user.deleted").values_list("target_id", "detail"))
    assert deleted == {people.member2.pk: {"username": "member2"}, people.member.pk: {"username": "member"}}
    assert User.objects.filter(pk=people.root.pk).exists()
