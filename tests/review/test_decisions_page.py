"""The meeting decisions page (issue 20, point 7) and provenance on the fact page (point 4)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from guardian.shortcuts import assign_perm

from memory.actors import Actor
from memory.models import Episode, EpisodeFact, Fact, MemoryDomain
from memory.services.tenancy import create_domain
from review.services import approve_review, submit_review
from tests.factories import CandidateFactory, FactFactory
from tests.review.samples import FILES, OUTPUT

URL = "/memory/acme/decisions/new/"


def _client(user, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def _form(**overrides):
    return {
        "title": "Q3 planning",
        "date": (timezone.localdate() - timedelta(days=3)).isoformat(),
        "decisions": "- We drop the Mongo cluster by March.\n- Billing moves to PostgreSQL 16.\n",
        "topic": "",
        **overrides,
    }


def test_a_workspace_admin_records_decisions_and_sees_each_lines_outcome(world):
    answer = _client(world.admin_user).post(URL, _form())
    assert answer.status_code == 200, answer.content.decode()[:2000]
    page = answer.content.decode()
    assert page.count('data-testid="outcome"') == 2
    assert 'data-outcome="created"' in page
    facts = list(Fact.objects.filter(domain__name="decisions").order_by("pk"))
    assert [f.content for f in facts] == ["We drop the Mongo cluster by March.", "Billing moves to PostgreSQL 16."]
    assert {(f.memory_type, f.veracity, f.created_by_user_id) for f in facts} == {
        ("decision", "human_stated", world.admin_user.pk)
    }
    episode = Episode.objects.get(kind="meeting")
    assert episode.title == "Q3 planning"
    assert timezone.localtime(episode.started_at).date() == timezone.localdate() - timedelta(days=3)
    assert set(EpisodeFact.objects.filter(episode=episode).values_list("fact_id", flat=True)) == {f.pk for f in facts}
    for fact in facts:
        assert f"/memory/acme/facts/{fact.pk}/" in page


def test_the_form_is_shown_to_a_person_who_may_decide_in_decisions(world):
    domain = create_domain(workspace=world.workspace, name="decisions", by=Actor.system("t"))
    assign_perm("memory.review_domain", world.reviewer, domain)
    page = _client(world.reviewer).get(URL)
    assert page.status_code == 200
    assert 'data-testid="decisions-form"' in page.content.decode()
    answer = _client(world.reviewer).post(URL, _form(decisions="We keep weekly releases."))
    assert answer.status_code == 200
    assert Fact.objects.filter(domain=domain, created_by_user=world.reviewer).count() == 1


def test_a_reviewer_without_write_on_decisions_is_denied_and_nothing_is_written(world, reviewer_reviews_world_domains):
    # Before the domain exists only an admin may create it; once it exists, a reviewer of other domains is refused.
    for _ in range(2):
        assert _client(world.reviewer).get(URL).status_code == 403
        answer = _client(world.reviewer).post(URL, _form())
        assert answer.status_code == 403
        assert 'data-testid="denied"' in answer.content.decode()
        assert not Fact.objects.filter(domain__name="decisions").exists()
        create_domain(workspace=world.workspace, name="decisions", by=Actor.system("t"))
    assert not Episode.objects.filter(kind="meeting").exists()


def test_another_workspace_is_404(world):
    assert _client(world.admin_user).get("/memory/globex/decisions/new/").status_code == 404
    assert _client(world.admin_user).post("/memory/globex/decisions/new/", _form()).status_code == 404
    assert not MemoryDomain.objects.filter(name="decisions").exists()


def test_anonymous_is_sent_to_sign_in(world):
    answer = Client().get(URL)
    assert answer.status_code == 302 and "/login/" in answer["Location"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"date": (timezone.localdate() + timedelta(days=2)).isoformat()}, "must not be in the future"),
        ({"title": ""}, "This field is required"),
        ({"decisions": "\n".join(f"Decision {i}." for i in range(51))}, "At most 50 decisions"),
        ({"date": "not a date"}, "Enter a valid date"),
    ],
)
def test_bad_input_is_shown_in_place_with_the_input_kept_and_nothing_written(world, overrides, message):
    form = _form(**overrides)
    answer = _client(world.admin_user).post(URL, form)
    assert answer.status_code == 422
    page = answer.content.decode()
    assert message in page
    assert 'data-testid="form-errors"' in page
    assert "We drop the Mongo cluster by March." in page or form["decisions"].splitlines()[0] in page
    assert not Fact.objects.filter(domain__name="decisions").exists()
    assert not Episode.objects.filter(kind="meeting").exists()


def test_a_decision_too_long_is_named_by_its_line(world, settings):
    settings.ENGRAM_FACT_MAX_CHARS = 60
    answer = _client(world.admin_user).post(URL, _form(decisions="Short.\n" + "x" * 61))
    assert answer.status_code == 422
    assert "Decision 2:" in answer.content.decode()
    assert not Fact.objects.filter(domain__name="decisions").exists()


def test_the_post_needs_the_csrf_token(world):
    client = _client(world.admin_user, csrf=True)
    page = client.get(URL)
    assert client.post(URL, _form()).status_code == 403
    assert not Fact.objects.filter(domain__name="decisions").exists()
    token = page.cookies["csrftoken"].value
    assert client.post(URL, {**_form(), "csrfmiddlewaretoken": token}).status_code == 200
    assert Fact.objects.filter(domain__name="decisions").count() == 2


def test_the_fact_page_shows_provenance_with_links_to_the_review_and_the_candidate(world):
    from memory.models import WorkspaceMembership

    WorkspaceMembership.objects.filter(workspace=world.workspace, user=world.reviewer).update(is_admin=True)
    review = submit_review(agent=world.coder, session_id="turn-11", output=OUTPUT, files=FILES, repo="web")
    review = approve_review(review=review, by=Actor.of_user(world.reviewer))
    stored = review.resolution["stored"][0]
    page = _client(world.admin_user).get(f"/memory/acme/facts/{stored['fact_id']}/").content.decode()
    assert 'data-testid="provenance"' in page
    assert f'href="/review/remember/{review.pk}/"' in page
    assert stored["path"] in page
    assert "<code>turn-11</code>" in page
    candidate = CandidateFactory(domain=world.architecture)
    promoted = FactFactory(domain=world.architecture, origin="promotion", origin_candidate=candidate)
    page = _client(world.admin_user).get(f"/memory/acme/facts/{promoted.pk}/").content.decode()
    assert f'href="/review/candidate/{candidate.pk}/"' in page
    assert 'data-testid="provenance-review"' not in page
