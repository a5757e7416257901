"""Nobody changes someone who holds more than they do, nor gives a group more than they hold
(issue 32), through the admin as a browser uses it: the form is fetched, its CSRF token posted back
(`Client(enforce_csrf_checks=True)`).

Found from outside: a staff account holding `auth.change_user` but administering no workspace set a
superuser's password on `/admin/auth/user/<id>/password/` and signed in as them, deactivated and
renamed other superusers; a staff account whose group holds `auth.change_group` gave its own group
every permission. The rule is memory.access's (manageable_users, manageable_groups,
grantable_permissions); these tests drive it through the change form, the password page, the delete
page, the bulk delete action and the group form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.urls import reverse
from guardian.shortcuts import assign_perm

from memory import access
from memory.models import WorkspaceMembership
from tests.factories import DomainFactory, MembershipFactory, UserFactory, WorkspaceFactory

User = get_user_model()
NEW_PASSWORD = "a much better passphrase 42"
TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@dataclass
class People:
    root: Any  # superuser
    root2: Any  # another superuser
    acme_admin: Any  # administers acme; every model permission
    globex_admin: Any  # administers globex, plain member of acme
    member: Any  # plain member of acme, a few model permissions
    member2: Any  # plain member of acme, not staff, nothing else
    outsider: Any  # plain member of globex only
    staffer: Any  # staff, plain member of acme, EVERY model permission, administers nothing
    helper: Any  # staff, administers nothing, its permissions only through its group "helpers"


@pytest.fixture
def people(db) -> People:
    acme = WorkspaceFactory(slug="acme", name="Acme")
    globex = WorkspaceFactory(slug="globex", name="Globex")
    every = list(Permission.objects.all())

    root = UserFactory(username="root", is_superuser=True)
    root2 = UserFactory(username="root2", is_superuser=True)
    acme_admin = UserFactory(username="acme-admin")
    MembershipFactory(user=acme_admin, workspace=acme, is_admin=True)
    acme_admin.user_permissions.add(*every)
    globex_admin = UserFactory(username="globex-admin")
    MembershipFactory(user=globex_admin, workspace=globex, is_admin=True)
    MembershipFactory(user=globex_admin, workspace=acme)
    member = UserFactory(username="member")
    MembershipFactory(user=member, workspace=acme)
    member.user_permissions.add(*Permission.objects.filter(codename__in=["view_fact", "view_candidate"]))
    member2 = UserFactory(username="member2", is_staff=False)
    MembershipFactory(user=member2, workspace=acme)
    outsider = UserFactory(username="outsider")
    MembershipFactory(user=outsider, workspace=globex)
    staffer = UserFactory(username="staffer")
    MembershipFactory(user=staffer, workspace=acme)
    staffer.user_permissions.add(*every)
    helper = UserFactory(username="helper")
    helpers = Group.objects.create(name="helpers")
    helpers.permissions.add(
        *Permission.objects.filter(
            content_type__app_label="auth",
            codename__in=["add_group", "change_group", "view_group", "delete_group", "change_user", "view_user"],
        )
    )
    helper.groups.add(helpers)
    return People(root, root2, acme_admin, globex_admin, member, member2, outsider, staffer, helper)


# --- A browser: fetch the page, post its token back ------------------------------------------
def browser(user: Any) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def token(client: Client, url: str) -> str:
    """The CSRF token of the form at `url`; of the admin index (its logout form) when that page
    is refused, as a browser holding any admin page would post it."""
    page = client.get(url)
    if page.status_code != 200:
        page = client.get(reverse("admin:index"))
    found = TOKEN.search(page.content.decode())
    assert found, f"no CSRF token on {url}"
    return found.group(1)


def submit(client: Client, url: str, data: dict[str, Any]) -> Any:
    return client.post(url, {**data, "csrfmiddlewaretoken": token(client, url)})


def change_url(user: Any) -> str:
    return reverse("admin:auth_user_change", args=[user.pk])


def password_url(user: Any) -> str:
    return reverse("admin:auth_user_password_change", args=[user.pk])


def delete_url(user: Any) -> str:
    return reverse("admin:auth_user_delete", args=[user.pk])


def user_form(user: Any, **changes: Any) -> dict[str, Any]:
    """The change form as the page posts it: unticked boxes are left out."""
    data: dict[str, Any] = {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "is_active": user.is_active,
        "is_staff": user.is_staff,
        "is_superuser": user.is_superuser,
        "groups": [g.pk for g in user.groups.all()],
        "user_permissions": [p.pk for p in user.user_permissions.all()],
    }
    data.update(changes)
    for box in ("is_active", "is_staff", "is_superuser"):
        if data[box]:
            data[box] = "on"
        else:
            del data[box]
    return data


def set_password(client: Client, target: Any) -> Any:
    return submit(
        client,
        password_url(target),
        {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"},
    )


def bulk_delete(client: Client, targets: list[Any]) -> Any:
    url = reverse("admin:auth_user_changelist")
    return submit(
        client, url, {"action": "delete_selected", "_selected_action": [t.pk for t in targets], "post": "yes"}
    )


def rights(user: Any) -> tuple:
    user = User.objects.get(pk=user.pk)
    return (
        user.username,
        user.is_active,
        user.is_staff,
        user.is_superuser,
        sorted(user.groups.values_list("pk", flat=True)),
        sorted(user.user_permissions.values_list("pk", flat=True)),
        user.password,
    )


def listed(client: Client) -> set[str]:
    page = client.get(reverse("admin:auth_user_changelist"))
    assert page.status_code == 200
    return {u.username for u in page.context["cl"].result_list}


# --- A staff account with every model permission and no workspace to administer -----------------
@pytest.mark.django_db
def test_staff_with_every_permission_cannot_touch_a_superuser_or_a_workspace_admin(people: People) -> None:
    client = browser(people.staffer)
    ops = Group.objects.create(name="ops")
    everything = list(Permission.objects.values_list("pk", flat=True))
    for target in (people.root, people.acme_admin, people.globex_admin, people.member):
        before = rights(target)
        assert client.get(change_url(target)).status_code == 404
        assert client.get(password_url(target)).status_code == 404
        assert client.get(delete_url(target)).status_code == 404

        assert set_password(client, target).status_code == 404
        renamed = user_form(
            target,
            username=f"{target.username}-x",
            is_active=False,
            is_staff=True,
            is_superuser=True,
            groups=[ops.pk],
            user_permissions=everything,
        )
        assert submit(client, change_url(target), renamed).status_code == 404
        assert submit(client, delete_url(target), {"post": "yes"}).status_code == 404
        assert rights(target) == before, target.username
        assert not User.objects.get(pk=target.pk).check_password(NEW_PASSWORD)

    victims = [people.root, people.root2, people.acme_admin, people.member, people.member2]
    assert bulk_delete(client, victims).status_code == 302
    assert User.objects.filter(pk__in=[v.pk for v in victims]).count() == len(victims)
    # The list names nobody but themselves.
    assert listed(client) == {"staffer"}


@pytest.mark.django_db
def test_staff_may_still_edit_their_own_account_but_not_their_rights(people: People) -> None:
    client = browser(people.staffer)
    assert client.get(change_url(people.staffer)).status_code == 200
    ops = Group.objects.create(name="ops")
    response = submit(
        client,
        change_url(people.staffer),
        user_form(people.staffer, first_name="Sam", is_superuser=True, groups=[ops.pk]),
    )
    assert response.status_code == 302
    people.staffer.refresh_from_db()
    assert people.staffer.first_name == "Sam"
    assert not people.staffer.is_superuser and not people.staffer.groups.exists()


# --- A workspace admin: the ordinary members of their workspace, nobody above -------------------
@pytest.mark.django_db
def test_workspace_admin_manages_ordinary_members_of_their_workspace(people: People) -> None:
    client = browser(people.acme_admin)
    target = people.member
    assert client.get(password_url(target)).status_code == 200
    assert set_password(client, target).status_code == 302
    target.refresh_from_db()
    assert target.check_password(NEW_PASSWORD)

    # Status and name change; the rights fields are read-only and ignored.
    ops = Group.objects.create(name="ops")
    form = user_form(target, username="member-renamed", is_active=False, is_superuser=True, groups=[ops.pk])
    assert submit(client, change_url(target), form).status_code == 302
    target.refresh_from_db()
    assert (target.username, target.is_active) == ("member-renamed", False)
    assert not target.is_superuser and not target.groups.exists()

    # Deactivated, they are still theirs to re-activate.
    assert submit(client, change_url(target), user_form(target, is_active=True)).status_code == 302
    target.refresh_from_db()
    assert target.is_active

    assert submit(client, delete_url(people.member2), {"post": "yes"}).status_code == 302
    assert not User.objects.filter(pk=people.member2.pk).exists()


@pytest.mark.django_db
def test_workspace_admin_cannot_reach_a_superuser_another_workspaces_admin_or_outsider(people: People) -> None:
    client = browser(people.acme_admin)
    for target in (people.root, people.globex_admin, people.outsider):
        before = rights(target)
        assert client.get(change_url(target)).status_code == 404, target.username
        assert set_password(client, target).status_code == 404
        assert submit(client, change_url(target), user_form(target, is_active=False)).status_code == 404
        assert submit(client, delete_url(target), {"post": "yes"}).status_code == 404
        assert rights(target) == before

    # The bulk delete reaches the ordinary member only.
    assert bulk_delete(client, [people.root, people.globex_admin, people.outsider, people.member2]).status_code == 302
    assert not User.objects.filter(pk=people.member2.pk).exists()
    assert User.objects.filter(pk__in=[people.root.pk, people.globex_admin.pk, people.outsider.pk]).count() == 3
    # The staffer holds no right this admin lacks (every model permission, a plain membership).
    assert listed(client) == {"acme-admin", "member", "staffer"}


@pytest.mark.django_db
def test_a_new_account_goes_on_to_a_membership_of_its_creator(people: People) -> None:
    client = browser(people.acme_admin)
    url = reverse("admin:auth_user_add")
    response = submit(
        client,
        url,
        {"username": "newcomer", "usable_password": "true", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
    )
    newcomer = User.objects.get(username="newcomer")
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('admin:memory_workspacemembership_add')}?user={newcomer.pk}"
    assert not access.may_manage_user(people.acme_admin, newcomer)
    WorkspaceMembership.objects.create(user=newcomer, workspace=people.member.engram_memberships.get().workspace)
    assert access.may_manage_user(people.acme_admin, newcomer)


# --- Superusers: everything -------------------------------------------------------------------
@pytest.mark.django_db
def test_a_superuser_changes_and_deletes_anyone(people: People) -> None:
    client = browser(people.root)
    target = people.root2
    assert set_password(client, target).status_code == 302
    ops = Group.objects.create(name="ops")
    perm = Permission.objects.get(codename="view_fact")
    form = user_form(target, username="root-two", is_active=False, groups=[ops.pk], user_permissions=[perm.pk])
    assert submit(client, change_url(target), form).status_code == 302
    target.refresh_from_db()
    assert target.check_password(NEW_PASSWORD)
    assert (target.username, target.is_active, list(target.groups.all()), list(target.user_permissions.all())) == (
        "root-two",
        False,
        [ops],
        [perm],
    )
    assert listed(client) >= {"root-two", "acme-admin", "globex-admin", "staffer", "outsider"}
    assert bulk_delete(client, [target, people.acme_admin]).status_code == 302
    assert not User.objects.filter(pk__in=[target.pk, people.acme_admin.pk]).exists()
    assert submit(client, delete_url(people.staffer), {"post": "yes"}).status_code == 302
    assert not User.objects.filter(pk=people.staffer.pk).exists()

    helpers = Group.objects.get(name="helpers")
    everything = list(Permission.objects.values_list("pk", flat=True))
    url = reverse("admin:auth_group_change", args=[helpers.pk])
    assert submit(client, url, {"name": "helpers", "permissions": everything}).status_code == 302
    assert helpers.permissions.count() == len(everything)


# --- Groups: never more than one holds ----------------------------------------------------------
def group_url(group: Group) -> str:
    return reverse("admin:auth_group_change", args=[group.pk])


@pytest.mark.django_db
def test_nobody_widens_their_own_group_beyond_what_they_hold(people: People) -> None:
    helpers = Group.objects.get(name="helpers")
    held = sorted(helpers.permissions.values_list("pk", flat=True))
    everything = list(Permission.objects.values_list("pk", flat=True))
    client = browser(people.helper)

    page = client.get(group_url(helpers))
    assert page.status_code == 200
    assert set(page.context["adminform"].form.fields["permissions"].queryset) == set(helpers.permissions.all())
    refused = submit(client, group_url(helpers), {"name": "helpers", "permissions": everything})
    assert refused.status_code == 200 and refused.context["adminform"].form.errors
    assert sorted(helpers.permissions.values_list("pk", flat=True)) == held

    # Alone in it, they may narrow it (to what they hold).
    assert submit(client, group_url(helpers), {"name": "helpers", "permissions": held[:-1]}).status_code == 302
    assert helpers.permissions.count() == len(held) - 1


@pytest.mark.django_db
def test_a_group_shared_with_others_is_read_only_and_other_groups_unknown(people: People) -> None:
    helpers = Group.objects.get(name="helpers")
    helpers.user_set.add(people.member)  # someone the helper does not manage
    held = sorted(helpers.permissions.values_list("pk", flat=True))
    everything = list(Permission.objects.values_list("pk", flat=True))
    client = browser(people.helper)
    assert client.get(group_url(helpers)).status_code == 200  # their own group: shown, read-only
    assert submit(client, group_url(helpers), {"name": "helpers", "permissions": everything}).status_code == 403
    assert sorted(helpers.permissions.values_list("pk", flat=True)) == held

    editors = Group.objects.create(name="editors")
    editors.permissions.add(Permission.objects.get(codename="view_fact"))  # not the helper's
    assert submit(client, group_url(editors), {"name": "editors", "permissions": everything}).status_code == 404
    assert editors.permissions.count() == 1

    # An empty group of their own making: only what they hold.
    url = reverse("admin:auth_group_add")
    assert submit(client, url, {"name": "mine", "permissions": everything}).status_code == 200
    assert not Group.objects.filter(name="mine").exists()
    assert submit(client, url, {"name": "mine", "permissions": held}).status_code == 302
    assert sorted(Group.objects.get(name="mine").permissions.values_list("pk", flat=True)) == held


@pytest.mark.django_db
def test_staff_with_every_permission_cannot_change_or_delete_groups_of_people_they_do_not_manage(
    people: People,
) -> None:
    ops = Group.objects.create(name="ops")
    ops.user_set.add(people.root)
    shared = Group.objects.create(name="shared")
    shared.user_set.add(people.staffer, people.acme_admin)
    client = browser(people.staffer)
    everything = list(Permission.objects.values_list("pk", flat=True))
    for group in (ops, Group.objects.get(name="helpers")):
        assert submit(client, group_url(group), {"name": group.name, "permissions": everything}).status_code == 404
    assert submit(client, group_url(shared), {"name": "shared", "permissions": everything}).status_code == 403
    assert not ops.permissions.exists() and not shared.permissions.exists()
    delete = reverse("admin:auth_group_delete", args=[shared.pk])
    assert submit(client, delete, {"post": "yes"}).status_code == 403
    changelist = reverse("admin:auth_group_changelist")
    bulk = {"action": "delete_selected", "_selected_action": [ops.pk, shared.pk], "post": "yes"}
    submit(client, changelist, bulk)
    assert Group.objects.filter(pk__in=[ops.pk, shared.pk]).count() == 2


# --- The rule itself --------------------------------------------------------------------------
@pytest.mark.django_db
def test_who_manages_whom(people: People) -> None:
    p = people
    assert set(access.manageable_users(p.root)) == set(User.objects.all())
    assert set(access.manageable_users(p.acme_admin)) == {p.acme_admin, p.member, p.member2, p.staffer}
    assert set(access.manageable_users(p.staffer)) == {p.staffer}
    assert set(access.manageable_users(p.globex_admin)) == {p.globex_admin, p.outsider}
    assert not access.may_manage_user(p.acme_admin, p.root)
    assert not access.may_manage_user(p.root2, None)

    # A model permission the admin lacks, held directly or through a group, puts someone out of reach.
    view_fact = Permission.objects.get(codename="view_fact")
    p.outsider.user_permissions.add(view_fact)
    assert not access.may_manage_user(p.globex_admin, p.outsider)
    p.globex_admin.groups.add(Group.objects.create(name="fact-readers"))
    p.globex_admin.groups.get().permissions.add(view_fact)
    assert access.may_manage_user(p.globex_admin, p.outsider)
    p.acme_admin.user_permissions.remove(Permission.objects.get(codename="delete_fact"))
    assert not access.may_manage_user(p.acme_admin, p.staffer)
    p.staffer.user_permissions.remove(Permission.objects.get(codename="delete_fact"))
    assert access.may_manage_user(p.acme_admin, p.staffer)
    Group.objects.get(name="helpers").user_set.add(p.member)
    assert access.may_manage_user(p.acme_admin, p.member)  # helpers' permissions are all the admin's
    Group.objects.get(name="helpers").permissions.add(Permission.objects.get(codename="delete_fact"))
    assert not access.may_manage_user(p.acme_admin, p.member)
    Group.objects.get(name="helpers").user_set.remove(p.member)

    # A review permission on a domain the admin does not decide puts the member out of reach.
    assign_perm(
        "memory.review_domain", p.member, DomainFactory(workspace=p.outsider.engram_memberships.get().workspace)
    )
    assert not access.may_manage_user(p.acme_admin, p.member)

    # Rights held count whether or not the account is active: an inactive superuser or admin of
    # another workspace stays out of reach; an inactive member stays within.
    User.objects.filter(pk__in=[p.root2.pk, p.globex_admin.pk, p.member2.pk]).update(is_active=False)
    for target in (p.root2, p.globex_admin, p.member2):
        target.refresh_from_db()
    assert not access.may_manage_user(p.acme_admin, p.root2)
    assert not access.may_manage_user(p.acme_admin, p.globex_admin)
    assert access.may_manage_user(p.acme_admin, p.member2)
    # An inactive person manages nobody.
    assert not access.manageable_users(p.root2).exists()


@pytest.mark.django_db
def test_who_grants_what(people: People) -> None:
    helpers = Group.objects.get(name="helpers")
    held = list(helpers.permissions.all())
    other = Permission.objects.exclude(pk__in=[p.pk for p in held]).first()
    assert access.may_grant_permissions(people.helper, held)
    assert access.may_grant_permissions(people.helper, [p.pk for p in held])
    assert not access.may_grant_permissions(people.helper, [*held, other])
    assert access.may_grant_permissions(people.root, Permission.objects.all())
    assert set(access.grantable_permissions(people.helper)) == set(held)
    assert access.may_manage_group(people.helper, helpers)
    assert not access.may_manage_group(people.member, helpers)
    assert set(access.visible_groups(people.member)) == set()
    assert set(access.visible_groups(people.helper)) == {helpers}
    assert access.may_set_user_rights(people.root) and not access.may_set_user_rights(people.acme_admin)


@pytest.mark.django_db
def test_the_group_form_refuses_a_permission_not_held_even_when_offered(people: People, rf) -> None:
    """The save is checked on the server, not only by the choices the widget offers."""
    from django.contrib import admin

    request = rf.post("/")
    request.user = people.helper
    form_class = admin.site.get_model_admin(Group).get_form(request, None, change=False)
    form = form_class(data={"name": "wide", "permissions": list(Permission.objects.values_list("pk", flat=True))})
    form.fields["permissions"].queryset = Permission.objects.all()  # a widget offering everything
    assert not form.is_valid()
    assert form.errors.as_data()["permissions"][0].code == "not_yours"
