"""Remember review endpoints: submit, long-poll, consume; every state transition and 409."""

import time

import pytest

from memory.actors import Actor
from memory.models import AuditEvent
from review.models import RememberReview
from review.services import approve_review, reject_review
from tests.conftest import client_for
from tests.review.samples import FILES, OUTPUT

ERROR_KEYS = {"code", "detail", "fields"}


@pytest.fixture(autouse=True)
def _reviewer_decides_every_layer(request):
    """The person resolving reviews here may decide every item: approved items land in domains
    created on approval, which only workspace admins may decide (issue 16)."""
    if "world" not in request.fixturenames:
        return
    from memory.models import WorkspaceMembership

    world = request.getfixturevalue("world")
    WorkspaceMembership.objects.filter(workspace=world.workspace, user=world.reviewer).update(is_admin=True)


def _submit(client, **overrides):
    body = {"session_id": "turn-7", "repo": "web", "output": OUTPUT, "files": FILES, **overrides}
    return client.post("/api/v1/reviews/", body, format="json")


@pytest.fixture
def submitted(world, api):
    response = _submit(api)
    assert response.status_code == 201, response.json()
    return response.json()


def _review(data):
    return RememberReview.objects.get(pk=data["id"])


# --- POST reviews/ -----------------------------------------------------------------------------
def test_submit_is_201_with_items_and_the_absolute_page_url(world, api):
    response = _submit(api)
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "pending" and body["resolution"] is None and body["repo"] == "web"
    assert body["review_url"] == f"http://testserver/review/remember/{body['id']}/"
    items = body["items"]
    assert [i["path"] for i in items] == ["docs/architecture.md", "CONTRIBUTING.md", "billing/rules.py"]
    first = items[0]
    assert set(first) >= {"path", "bytes", "recommended_layer", "rationale", "suggested_memory_content", "source"}
    assert first["bytes"] == len(FILES["docs/architecture.md"].encode())
    assert first["source"] == "json" and first["recommended_layer"] == "project/context"


def test_submit_with_a_broken_block_falls_back_to_paths(world, api):
    output = 'Picks:\n```json\n{"recommendations": [{"path": "docs/a.md",\n```\nand src/b.py'
    response = _submit(api, output=output, files={"docs/a.md": "hello"})
    assert response.status_code == 201
    body = response.json()
    assert body["used_fallback"] is True
    assert [(i["path"], i["source"], i["bytes"]) for i in body["items"]] == [
        ("docs/a.md", "fallback", 5),
        ("src/b.py", "fallback", 0),
    ]


def test_submit_with_no_items_is_400_no_review_items_and_writes_nothing(world, api):
    before = (RememberReview.objects.count(), AuditEvent.objects.count())
    response = _submit(api, output="Nothing worth remembering this turn.")
    assert response.status_code == 400
    assert set(response.json()) == ERROR_KEYS and response.json()["code"] == "no_review_items"
    assert (RememberReview.objects.count(), AuditEvent.objects.count()) == before


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"session_id": ""}, "session_id"),
        ({"output": None}, "output"),
        ({"files": ["a.md"]}, "files"),
        ({"files": {"a.md": 3}}, "files"),
        ({"repo": "not a slug"}, "repo"),
    ],
)
def test_submit_with_bad_fields_is_400_with_field_messages(world, api, overrides, field):
    response = _submit(api, **overrides)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input" and field in response.json()["fields"]
    assert not RememberReview.objects.exists()


def test_submit_with_an_unknown_repo_is_400(world, api):
    response = _submit(api, repo="mobile")
    assert response.status_code == 400 and response.json()["code"] == "unknown_repo"


def test_submit_needs_an_agent_key(world):
    response = _submit(client_for(None))
    assert response.status_code == 401 and set(response.json()) == ERROR_KEYS


def test_submit_with_nul_escapes_in_the_output_is_stored_cleanly(world, api):
    output = '```json\n{"recommendations": [{"path": "a\\u0000.md", "rationale": "x\\ud800y"}]}\n```'
    response = _submit(api, output=output)
    assert response.status_code == 201
    assert response.json()["items"][0]["path"] == "a.md"


# --- GET reviews/{id}/ -----------------------------------------------------------------------
def test_get_a_pending_review_returns_at_once_without_wait(world, api, submitted, settings):
    settings.ENGRAM_MAX_WAITERS = 0  # a poll that tried to wait would be refused with Retry-After
    response = api.get(f"/api/v1/reviews/{submitted['id']}/")
    assert response.status_code == 200
    assert response.json()["status"] == "pending" and response.json()["resolution"] is None
    assert "Retry-After" not in response  # it never asked to wait


def test_get_with_wait_holds_while_pending_then_answers_pending(world, api, submitted):
    started = time.monotonic()
    response = api.get(f"/api/v1/reviews/{submitted['id']}/?wait=1")
    elapsed = time.monotonic() - started
    assert response.status_code == 200 and response.json()["status"] == "pending"
    assert 0.9 <= elapsed < 10  # held the second asked, not the longest wait (30 s)


def test_get_with_wait_returns_at_once_when_already_resolved(world, api, submitted):
    approve_review(review=_review(submitted), by=Actor.of_user(world.reviewer))
    started = time.monotonic()
    body = api.get(f"/api/v1/reviews/{submitted['id']}/?wait=30").json()
    assert time.monotonic() - started < 10  # not held for the 30 s asked
    assert body["status"] == "approved"
    resolution = body["resolution"]
    assert resolution["approved"] is True
    assert resolution["selected_paths"] == ["docs/architecture.md", "CONTRIBUTING.md", "billing/rules.py"]
    assert len(resolution["stored_ids"]) == 3 and resolution["edits"] == {}
    assert "approved" in resolution["note"]
    assert [i["stored_fact_id"] for i in body["items"]] == resolution["stored_ids"]


def test_beyond_the_waiters_cap_a_wait_answers_at_once_with_retry_after(world, api, submitted, settings):
    settings.ENGRAM_MAX_WAITERS = 0
    started = time.monotonic()
    response = api.get(f"/api/v1/reviews/{submitted['id']}/?wait=30")
    assert time.monotonic() - started < 10  # not held for the 30 s asked
    assert response.status_code == 200 and response.json()["status"] == "pending"
    assert response["Retry-After"] == "2"
    assert "Retry-After" not in api.get(f"/api/v1/reviews/{submitted['id']}/")  # no wait asked, none refused


@pytest.mark.parametrize("wait", ["31", "-1", "soon"])
def test_get_with_a_bad_wait_is_400(world, api, submitted, wait):
    response = api.get(f"/api/v1/reviews/{submitted['id']}/?wait={wait}")
    assert response.status_code == 400 and "wait" in response.json()["fields"]


def test_another_workspace_review_is_404_on_every_endpoint(world, submitted):
    intruder = client_for(world.foreign_agent)
    approve_review(review=_review(submitted), by=Actor.of_user(world.reviewer))
    for response in (
        intruder.get(f"/api/v1/reviews/{submitted['id']}/"),
        intruder.post(f"/api/v1/reviews/{submitted['id']}/consume/"),
    ):
        assert response.status_code == 404
        assert response.json()["code"] == "review_not_found"
    assert _review(submitted).status == "approved"  # the intruder's consume changed nothing


def test_an_unknown_review_is_404(world, api):
    assert api.get("/api/v1/reviews/999999/").status_code == 404


def test_another_agent_of_the_workspace_is_answered_as_if_the_review_did_not_exist(world, submitted):
    # A review carries the submitting agent's session files: it is that agent's alone.
    reject_review(review=_review(submitted), by=Actor.of_user(world.reviewer))
    other = client_for(world.planner)
    assert other.get(f"/api/v1/reviews/{submitted['id']}/").status_code == 404
    assert other.post(f"/api/v1/reviews/{submitted['id']}/consume/").status_code == 404
    assert _review(submitted).status == "rejected"


# --- POST reviews/{id}/consume/ -----------------------------------------------------------------
def test_consume_while_pending_is_409_review_pending(world, api, submitted):
    response = api.post(f"/api/v1/reviews/{submitted['id']}/consume/")
    assert response.status_code == 409
    assert set(response.json()) == ERROR_KEYS and response.json()["code"] == "review_pending"
    assert _review(submitted).status == "pending"


def test_approved_then_consumed_then_409_on_every_further_transition(world, api, submitted):
    review = approve_review(review=_review(submitted), by=Actor.of_user(world.reviewer))
    response = api.post(f"/api/v1/reviews/{submitted['id']}/consume/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "consumed" and body["consumed_at"] and body["resolution"]["approved"] is True
    again = api.post(f"/api/v1/reviews/{submitted['id']}/consume/")
    assert again.status_code == 409 and again.json()["code"] == "review_already_consumed"
    from review.errors import ReviewAlreadyResolved

    with pytest.raises(ReviewAlreadyResolved):
        approve_review(review=review, by=Actor.of_user(world.reviewer))
    assert api.get(f"/api/v1/reviews/{submitted['id']}/").json()["status"] == "consumed"


def test_rejected_then_consumed(world, api, submitted):
    reject_review(review=_review(submitted), by=Actor.of_user(world.reviewer), reviewer_note="Too noisy.")
    body = api.get(f"/api/v1/reviews/{submitted['id']}/?wait=5").json()
    assert body["status"] == "rejected"
    assert body["resolution"]["approved"] is False and body["resolution"]["stored_ids"] == []
    assert "Too noisy." in body["resolution"]["note"]
    assert api.post(f"/api/v1/reviews/{submitted['id']}/consume/").json()["status"] == "consumed"


def test_get_is_free_of_n_plus_one(world, api, submitted, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        assert api.get(f"/api/v1/reviews/{submitted['id']}/").status_code == 200


def test_the_schema_documents_the_three_operations(world, api):
    schema = client_for(None).get("/api/v1/schema/?format=json").json()
    operations = {op["operationId"] for methods in schema["paths"].values() for op in methods.values()}
    assert {"submit_remember_review", "get_remember_review", "consume_remember_review"} <= operations
