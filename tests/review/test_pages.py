"""The remember review page (htmx): access, autosaved edits with diffs, approve/reject in place,
409 when someone else resolved it, file download, dashboard queue, admin link."""

import pytest
from django.test import Client

from memory.actors import Actor
from memory.models import Fact
from review.models import ReviewItem
from review.services import approve_review, submit_review
from tests.factories import MembershipFactory, UserFactory
from tests.review.samples import ARCH_NOTE, FILES, OUTPUT

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _reviewers_decide_every_layer(world):
    """These tests act as people who may decide every item: approved items land in domains that
    may not exist yet (created on approval), which only workspace admins may decide (issue 16).
    Per-domain reviewers are tested in tests/test_people_access.py."""
    from memory.models import WorkspaceMembership

    WorkspaceMembership.objects.filter(
        workspace=world.workspace, user__in=[world.reviewer, world.outsider_reviewer]
    ).update(is_admin=True)


@pytest.fixture
def review(world):
    return submit_review(agent=world.coder, session_id="turn-9", output=OUTPUT, files=FILES, repo="web")


def _client(user):
    client = Client()
    client.force_login(user)
    return client


def _url(review, suffix=""):
    return f"/review/remember/{review.pk}/{suffix}"


def _item(review, path):
    return ReviewItem.objects.get(review=review, path=path)


def _form(item, **values):
    data = {f"item-{item.pk}-present": "1"}
    if values.pop("selected", True):
        data[f"item-{item.pk}-selected"] = "1"
    for key, value in values.items():
        data[f"item-{item.pk}-{key}"] = value
    return data


# --- access ------------------------------------------------------------------------------------
def test_a_member_sees_the_waiting_card_and_the_items_grouped_by_layer(world, review):
    response = _client(world.reviewer).get(_url(review))
    assert response.status_code == 200
    html = response.content.decode()
    assert "is waiting for your decision" in html and "coder-a" in html
    assert html.index("user/profile ") < html.index("project/context ") < html.index("domain/knowledge ")
    assert "docs/architecture.md" in html and ARCH_NOTE in html
    assert "repo:web/context" in html  # where project/context items go
    assert "# Architecture" in html  # the file itself, inline
    assert 'hx-headers=\'{"X-CSRFToken"' in html and "htmx.min.js" in html


def test_anonymous_people_are_sent_to_log_in(world, review):
    response = Client().get(_url(review))
    assert response.status_code == 302 and response["Location"].startswith("/login/?next=")


def test_people_outside_the_workspace_get_404_everywhere(world, review):
    stranger = UserFactory(username="stranger")
    MembershipFactory(user=stranger, workspace=world.other_workspace)
    client = _client(stranger)
    item = _item(review, "CONTRIBUTING.md")
    assert client.get(_url(review)).status_code == 404
    assert client.get(_url(review, f"items/{item.pk}/file")).status_code == 404
    assert client.post(_url(review, f"items/{item.pk}/"), _form(item, selected=False), **HTMX).status_code == 404
    assert client.post(_url(review, "approve/"), **HTMX).status_code == 404
    assert _item(review, "CONTRIBUTING.md").selected is True


def test_a_superuser_may_open_any_review(world, review):
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    assert _client(root).get(_url(review)).status_code == 200


# --- edits -------------------------------------------------------------------------------------
def test_an_item_edit_is_saved_and_answers_with_its_status_partial_and_diff(world, review):
    item = _item(review, "CONTRIBUTING.md")
    response = _client(world.reviewer).post(
        _url(review, f"items/{item.pk}/"),
        _form(
            item, layer="user/profile", rationale=item.rationale, content="The user wants PRs under 300 <b>lines</b>."
        ),
        **HTMX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith(f'<div class="item-status" id="item-{item.pk}-status"')
    assert "<html" not in html  # the partial only
    assert "Saved" in html
    assert "<del>400</del>" in html and "<ins>300</ins>" in html
    assert "&lt;b&gt;" in html and "<b>" not in html  # user text is escaped, also inside the diff
    item.refresh_from_db()
    assert item.edited_content == "The user wants PRs under 300 <b>lines</b>." and item.note_edited


def test_deselecting_is_saved_and_survives_a_refresh(world, review):
    item = _item(review, "billing/rules.py")
    client = _client(world.reviewer)
    response = client.post(_url(review, f"items/{item.pk}/"), _form(item, selected=False), **HTMX)
    assert "Not stored (deselected)" in response.content.decode()
    page = client.get(_url(review)).content.decode()
    checkbox = page.split(f'name="item-{item.pk}-selected"')[1].split(">")[0]
    assert "checked" not in checkbox


def test_an_invalid_edit_is_422_with_the_message_and_saves_nothing(world, review):
    item = _item(review, "CONTRIBUTING.md")
    response = _client(world.reviewer).post(_url(review, f"items/{item.pk}/"), _form(item, layer="secret"), **HTMX)
    assert response.status_code == 422
    assert "layer:" in response.content.decode()
    assert _item(review, "CONTRIBUTING.md").edited_layer == ""


def test_the_reviewer_note_is_saved_as_typed(world, review):
    response = _client(world.reviewer).post(_url(review, "note/"), {"reviewer_note": "Keep it short."}, **HTMX)
    assert response.status_code == 200 and "Saved" in response.content.decode()
    review.refresh_from_db()
    assert review.reviewer_note == "Keep it short."


# --- decisions ---------------------------------------------------------------------------------
def test_approve_applies_the_forms_sent_along_and_shows_the_outcome_in_place(world, review):
    arch, contributing, billing = (
        _item(review, p) for p in ("docs/architecture.md", "CONTRIBUTING.md", "billing/rules.py")
    )
    data = {
        **_form(arch, content=ARCH_NOTE + " Uploads go through S3."),
        **_form(contributing),
        **_form(billing, selected=False),
        "reviewer_note": "Stored the two that matter.",
    }
    response = _client(world.reviewer).post(_url(review, "approve/"), data, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="remember-review"')
    assert "Approved" in html and "human edited" in html
    review.refresh_from_db()
    assert review.status == "approved" and len(review.resolution["stored_ids"]) == 2
    fact = Fact.objects.get(pk=_item(review, "docs/architecture.md").stored_fact_id)
    assert fact.human_edited and fact.content.endswith("Uploads go through S3.")
    assert f"/memory/{fact.workspace.slug}/facts/{fact.pk}/" in html  # the memory browser: open to reviewers


def test_reject_shows_the_outcome_and_stores_nothing(world, review):
    response = _client(world.reviewer).post(_url(review, "reject/"), {"reviewer_note": "Noise."}, **HTMX)
    assert response.status_code == 200 and "Rejected" in response.content.decode()
    assert not Fact.objects.filter(source="remember_agent_human_approved").exists()


def test_after_another_reviewer_resolved_it_the_page_says_so_with_409(world, review):
    approve_review(review=review, by=Actor.of_user(world.admin_user))
    client = _client(world.reviewer)
    for response in (
        client.post(_url(review, "approve/"), **HTMX),
        client.post(_url(review, "reject/"), **HTMX),
        client.post(_url(review, f"items/{_item(review, 'CONTRIBUTING.md').pk}/"), {}, **HTMX),
    ):
        assert response.status_code == 409
        html = response.content.decode()
        assert "already approved by wsadmin" in html
        assert response["HX-Retarget"] == "#remember-review"
    page = client.get(_url(review)).content.decode()
    assert "Approved" in page and "is waiting" not in page and 'data-testid="approve"' not in page


def test_a_page_without_htmx_gets_the_whole_page(world, review):
    response = _client(world.reviewer).post(_url(review, "reject/"))
    assert response.status_code == 200 and "<html" in response.content.decode()


# --- file, dashboard, admin ----------------------------------------------------------------------
def test_the_file_is_downloadable_and_viewable_inline_as_plain_text(world, review):
    item = _item(review, "docs/architecture.md")
    client = _client(world.reviewer)
    download = client.get(_url(review, f"items/{item.pk}/file"))
    assert download.status_code == 200
    assert download["Content-Type"] == "text/plain; charset=utf-8"
    assert (
        download["Content-Disposition"].startswith("attachment")
        and "architecture.md" in download["Content-Disposition"]
    )
    assert download.content.decode() == FILES["docs/architecture.md"]
    inline = client.get(_url(review, f"items/{item.pk}/file?inline=1"))
    assert inline["Content-Disposition"].startswith("inline") and inline["X-Content-Type-Options"] == "nosniff"


def test_the_dashboard_lists_pending_reviews_with_a_link(world, review, django_assert_max_num_queries):
    client = _client(world.reviewer)
    with django_assert_max_num_queries(20):
        html = client.get("/").content.decode()
    assert f'href="/review/remember/{review.pk}/"' in html and "3 files" in html
    approve_review(review=review, by=Actor.of_user(world.reviewer))
    html = client.get("/").content.decode()
    waiting = html[html.index('id="remember-queue"') :]
    waiting = waiting[: waiting.index("</ul>")]  # the activity list below links it, as approved (issue 18)
    assert f'href="/review/remember/{review.pk}/"' not in waiting


def test_the_admin_links_each_review_to_its_page(world, review):
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = _client(root)
    listing = client.get("/admin/review/rememberreview/").content.decode()
    assert f'href="/review/remember/{review.pk}/"' in listing
    detail = client.get(f"/admin/review/rememberreview/{review.pk}/change/")
    assert detail.status_code == 200 and f'href="/review/remember/{review.pk}/"' in detail.content.decode()
    assert client.get("/admin/review/layermapping/").status_code == 200


def test_admin_remaps_a_layer_through_the_audited_service(world, review):
    from django.contrib.auth import get_user_model

    from memory.models import AuditEvent
    from review.models import LayerMapping

    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    mapping = LayerMapping.objects.get(workspace=world.workspace, layer="domain/knowledge")
    response = _client(root).post(
        f"/admin/review/layermapping/{mapping.pk}/change/", {"domain_name": "conventions", "per_repo": ""}
    )
    assert response.status_code == 302
    mapping.refresh_from_db()
    assert mapping.domain_name == "conventions"
    assert AuditEvent.objects.filter(verb="layer_mapping.changed").exists()


def test_staff_see_only_their_workspace_reviews_in_the_admin_with_bounded_queries(
    world, review, django_assert_max_num_queries
):
    submit_review(agent=world.coder2, session_id="t2", output=OUTPUT, files=FILES)
    foreign = submit_review(agent=world.foreign_agent, session_id="t3", output=OUTPUT, files=FILES)
    from django.contrib.auth.models import Permission

    world.reviewer.user_permissions.add(*Permission.objects.filter(codename="view_rememberreview"))
    client = _client(world.reviewer)
    with django_assert_max_num_queries(12):
        html = client.get("/admin/review/rememberreview/").content.decode()
    assert f'href="/review/remember/{review.pk}/"' in html
    assert f'href="/review/remember/{foreign.pk}/"' not in html
    assert client.get(f"/admin/review/rememberreview/{foreign.pk}/change/").status_code in (302, 404)
