"""Sign-in for everyone who reviews (issue 16 §4): the site's own login page for members who are
not staff, POST-only logout, same-site `next=` only, and `manage.py set_password`."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from memory.models import AuditEvent
from tests.factories import MembershipFactory, UserFactory

PASSWORD = "correct horse battery staple"


@pytest.fixture
def member(world):
    """A workspace member who is not staff: the review pages are theirs, the admin is not."""
    person = UserFactory(username="mira", is_staff=False)
    MembershipFactory(user=person, workspace=world.workspace)
    return person


def _sign_in(client: Client, username: str, password: str = PASSWORD, next_url: str | None = None):
    url = "/login/" if next_url is None else f"/login/?next={next_url}"
    data = {"username": username, "password": password}
    if next_url is not None:
        data["next"] = next_url
    return client.post(url, data)


def test_login_page_is_the_sites_own_with_csrf():
    client = Client(enforce_csrf_checks=True)
    page = client.get("/login/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="csrfmiddlewaretoken"' in html and 'data-testid="login-form"' in html
    assert "set_password" in html  # says how a forgotten password is reset
    # Without the token the form is refused.
    assert client.post("/login/", {"username": "x", "password": "y"}).status_code == 403


def test_member_who_is_not_staff_signs_in_and_reaches_the_review_pages(member):
    client = Client()
    response = _sign_in(client, "mira")
    assert response.status_code == 302 and response["Location"] == "/"
    queue = client.get("/review/")
    assert queue.status_code == 200
    html = queue.content.decode()
    assert 'data-testid="who">mira<' in html and 'data-testid="logout"' in html
    assert 'action="/logout/"' in html
    assert 'href="/admin/"' not in html  # no link to a door that stays shut for them
    assert client.get("/").status_code == 200


def test_admin_stays_refused_for_members_who_are_not_staff(member):
    client = Client()
    _sign_in(client, "mira")
    admin = client.get("/admin/")
    assert admin.status_code == 302 and admin["Location"].startswith("/admin/login/")
    refused = client.post("/admin/login/", {"username": "mira", "password": PASSWORD})
    assert refused.status_code == 200 and b"staff account" in refused.content


def test_staff_still_sign_in_at_the_admin_login(world):
    client = Client()
    response = client.post("/admin/login/?next=/admin/", {"username": "wsadmin", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_wrong_password_shows_the_form_again(member):
    response = _sign_in(Client(), "mira", password="not it")
    assert response.status_code == 200 and b'role="alert"' in response.content


def test_next_is_followed_to_this_site_only(member):
    response = _sign_in(Client(), "mira", next_url="/review/")
    assert response["Location"] == "/review/"
    for outside in ("https://evil.example/phish", "//evil.example/phish", "http://evil.example"):
        response = _sign_in(Client(), "mira", next_url=outside)
        assert response.status_code == 302 and response["Location"] == "/", outside


def test_anonymous_people_are_sent_to_the_site_login(world):
    response = Client().get("/review/")
    assert response.status_code == 302 and response["Location"] == "/login/?next=/review/"


def test_only_a_post_signs_out_and_the_pages_then_ask_to_sign_in(member):
    client = Client()
    _sign_in(client, "mira")
    assert client.get("/logout/").status_code == 200  # a link elsewhere cannot sign anyone out:
    assert client.get("/review/").status_code == 200
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    after = client.get("/review/")
    assert after.status_code == 302 and after["Location"].startswith("/login/?next=")


def test_set_password_command_sets_it_audits_and_ends_other_sessions(member):
    elsewhere = Client()
    _sign_in(elsewhere, "mira")
    assert elsewhere.get("/review/").status_code == 200
    out = io.StringIO()
    call_command(
        "set_password",
        "--username",
        "mira",
        "--password-stdin",
        stdin=io.StringIO("a new Long phrase 42\n"),
        stdout=out,
    )
    assert "Password set for mira" in out.getvalue() and "/login/" in out.getvalue()
    assert "admin (/admin/) is not" in out.getvalue()
    member.refresh_from_db()
    assert member.check_password("a new Long phrase 42")
    assert AuditEvent.objects.filter(verb="user.password_set", target_id=member.pk).count() == 1
    assert _sign_in(Client(), "mira", password="a new Long phrase 42").status_code == 302
    assert elsewhere.get("/review/").status_code == 302  # the old session is over


@pytest.mark.parametrize("weak", ["short", "password123"])
def test_set_password_command_refuses_a_weak_password(member, weak):
    with pytest.raises(CommandError, match="Password refused"):
        call_command("set_password", "--username", "mira", "--password-stdin", stdin=io.StringIO(weak + "\n"))
    member.refresh_from_db()
    assert member.check_password(PASSWORD)
    assert not AuditEvent.objects.filter(verb="user.password_set").exists()


def test_set_password_command_prompts_twice_and_refuses_a_mismatch(member, monkeypatch):
    answers = iter(["a new Long phrase 42", "a different phrase 42"])
    monkeypatch.setattr("review.management.commands.set_password.getpass", lambda prompt: next(answers))
    with pytest.raises(CommandError, match="differ"):
        call_command("set_password", "--username", "mira")
    answers = iter(["a new Long phrase 42", "a new Long phrase 42"])
    call_command("set_password", "--username", "mira", stdout=io.StringIO())
    member.refresh_from_db()
    assert member.check_password("a new Long phrase 42")


def test_set_password_command_refuses_an_unknown_user(db):
    with pytest.raises(CommandError, match="No user 'nobody'"):
        call_command("set_password", "--username", "nobody", "--password-stdin", stdin=io.StringIO("whatever 12345\n"))
    assert not get_user_model().objects.filter(username="nobody").exists()
