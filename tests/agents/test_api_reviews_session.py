"""One live remember review per agent and session (issue 39): a second submission answers the live
one (200, nothing written), and `GET reviews/?session=` lists the agent's own reviews of a session,
so that a restarted runtime finds the review it was waiting on."""

import pytest

from memory.actors import Actor
from memory.models import AuditEvent
from review.models import RememberReview, ReviewItem
from review.services import approve_review, consume_review, reject_review
from tests.conftest import client_for
from tests.review.samples import FILES, OUTPUT

pytestmark = pytest.mark.usefixtures("reviewer_is_workspace_admin")

OTHER_OUTPUT = (
    "```json\n" + '{"recommendations": [{"path": "docs/other.md", "recommended_layer": "project/context"}]}' + "\n```"
)


def _submit(client, **overrides):
    body = {"session_id": "turn-7", "repo": "web", "output": OUTPUT, "files": FILES, **overrides}
    return client.post("/api/v1/reviews/", body, format="json")


def _rows():
    return RememberReview.objects.count(), ReviewItem.objects.count(), AuditEvent.objects.count()


# --- POST reviews/: one live review per session ---------------------------------------------------
def test_a_second_submission_while_one_is_live_answers_it_with_200_and_writes_nothing(world, api):
    first = _submit(api)
    assert first.status_code == 201
    before = _rows()
    second = _submit(api, output=OTHER_OUTPUT, files={"docs/other.md": "other"}, repo=None)
    assert second.status_code == 200
    assert second.json() == first.json()  # the same review, as it stands: not the second output's items
    assert _rows() == before


@pytest.mark.parametrize("decide", [approve_review, reject_review])
def test_a_decided_review_not_yet_consumed_is_still_the_live_one(world, api, decide):
    first = _submit(api).json()
    decide(review=RememberReview.objects.get(pk=first["id"]), by=Actor.of_user(world.reviewer))
    before = _rows()
    again = _submit(api)
    assert again.status_code == 200
    assert again.json()["id"] == first["id"] and again.json()["status"] in ("approved", "rejected")
    assert again.json()["resolution"] is not None
    assert _rows() == before


def test_after_consumption_the_session_gets_a_new_review(world, api):
    first = _submit(api).json()
    reject_review(review=RememberReview.objects.get(pk=first["id"]), by=Actor.of_user(world.reviewer))
    assert api.post(f"/api/v1/reviews/{first['id']}/consume/").status_code == 200
    second = _submit(api)
    assert second.status_code == 201
    assert second.json()["id"] != first["id"] and second.json()["status"] == "pending"
    assert RememberReview.objects.filter(agent=world.coder, session_id="turn-7").count() == 2


def test_another_session_gets_its_own_review(world, api):
    first = _submit(api).json()
    other = _submit(api, session_id="turn-8")
    assert other.status_code == 201 and other.json()["id"] != first["id"]
    assert other.json()["session_id"] == "turn-8"


def test_another_agent_with_the_same_session_id_gets_its_own_review(world, api):
    first = _submit(api).json()
    for agent in (world.coder2, world.foreign_agent):
        response = _submit(client_for(agent), repo=None)
        assert response.status_code == 201, response.json()
        assert response.json()["id"] != first["id"]
        assert RememberReview.objects.get(pk=response.json()["id"]).agent_id == agent.pk
    assert _submit(api).json()["id"] == first["id"]  # the first agent's is still its own live one


def test_a_live_review_is_answered_even_when_the_second_output_nominates_nothing(world, api):
    first = _submit(api).json()
    again = _submit(api, output="Nothing worth keeping this time.")
    assert again.status_code == 200 and again.json()["id"] == first["id"]


def test_a_second_submission_still_refuses_bad_input(world, api):
    _submit(api)
    before = _rows()
    assert _submit(api, repo="mobile").json()["code"] == "unknown_repo"
    assert _submit(api, session_id="").json()["code"] == "invalid_input"
    assert _rows() == before


def test_the_database_holds_one_live_review_per_agent_and_session(world, api):
    from django.db import IntegrityError, transaction

    first = _submit(api).json()
    with pytest.raises(IntegrityError), transaction.atomic():
        RememberReview.objects.create(
            workspace=world.workspace, agent=world.coder, session_id="turn-7", raw_output="{}"
        )
    # Consumed reviews are not live: any number of them may share the session.
    review = RememberReview.objects.get(pk=first["id"])
    reject_review(review=review, by=Actor.of_user(world.reviewer))
    consume_review(review=review, by=Actor.of_agent(world.coder))
    RememberReview.objects.create(workspace=world.workspace, agent=world.coder, session_id="turn-7", raw_output="{}")


# --- GET reviews/?session= ------------------------------------------------------------------------
def _consumed(api, world, **overrides):
    review = _submit(api, **overrides).json()
    reject_review(review=RememberReview.objects.get(pk=review["id"]), by=Actor.of_user(world.reviewer))
    api.post(f"/api/v1/reviews/{review['id']}/consume/")
    return review["id"]


def test_the_list_answers_the_agents_reviews_of_the_session_newest_first(world, api):
    older = _consumed(api, world)
    newer = _submit(api).json()
    _submit(api, session_id="turn-8")  # another session
    _submit(client_for(world.coder2), repo=None)  # another agent, same session id
    response = api.get("/api/v1/reviews/", {"session": "turn-7"})
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["next"], body["previous"]) == (2, None, None)
    assert [r["id"] for r in body["results"]] == [newer["id"], older]
    assert [r["status"] for r in body["results"]] == ["pending", "consumed"]
    assert body["results"][0] == api.get(f"/api/v1/reviews/{newer['id']}/").json()  # as get_remember_review
    assert body["results"][0]["review_url"] == f"http://testserver/review/remember/{newer['id']}/"


def test_the_list_filters_by_status(world, api):
    consumed = _consumed(api, world)
    live = _submit(api).json()
    by_status = {
        status: [
            r["id"] for r in api.get("/api/v1/reviews/", {"session": "turn-7", "status": status}).json()["results"]
        ]
        for status in ("pending", "approved", "rejected", "consumed")
    }
    assert by_status == {"pending": [live["id"]], "approved": [], "rejected": [], "consumed": [consumed]}


def test_another_agent_lists_nothing_of_the_session(world, api):
    _submit(api)
    for agent in (world.coder2, world.planner, world.foreign_agent):
        body = client_for(agent).get("/api/v1/reviews/", {"session": "turn-7"}).json()
        assert (body["count"], body["results"]) == (0, [])


def test_the_list_pages_with_links(world, api):
    ids = [_consumed(api, world) for _ in range(3)]
    first = api.get("/api/v1/reviews/", {"session": "turn-7", "limit": 2}).json()
    assert first["count"] == 3 and [r["id"] for r in first["results"]] == ids[::-1][:2]
    assert first["next"] == "http://testserver/api/v1/reviews/?limit=2&offset=2&session=turn-7"
    second = api.get(first["next"]).json()
    assert [r["id"] for r in second["results"]] == [ids[0]] and second["next"] is None


@pytest.mark.parametrize("query", [{}, {"session": ""}, {"session": "   "}, {"session": "s" * 201}])
def test_the_list_needs_a_session_of_1_to_200_characters(world, api, query):
    response = api.get("/api/v1/reviews/", query)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input" and "session" in response.json()["fields"]


@pytest.mark.parametrize("status", ["live", "PENDING", "pending,consumed"])
def test_the_list_refuses_an_unknown_status(world, api, status):
    response = api.get("/api/v1/reviews/", {"session": "turn-7", "status": status})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input" and "status" in response.json()["fields"]


def test_an_empty_status_in_the_query_string_is_no_filter(world, api):
    _submit(api)  # as every list's filters read a query string: `?status=` is left out
    assert api.get("/api/v1/reviews/", {"session": "turn-7", "status": ""}).json()["count"] == 1


def test_the_list_refuses_an_unknown_argument(world, api):
    response = api.get("/api/v1/reviews/", {"session": "turn-7", "session_id": "turn-7"})
    assert response.status_code == 400 and response.json()["code"] == "unknown_argument"


def test_the_list_is_free_of_n_plus_one(world, api, django_assert_max_num_queries):
    for _ in range(3):
        review = _submit(api).json()
        approve_review(review=RememberReview.objects.get(pk=review["id"]), by=Actor.of_user(world.reviewer))
        api.post(f"/api/v1/reviews/{review['id']}/consume/")
    _submit(api)
    with django_assert_max_num_queries(7):
        body = api.get("/api/v1/reviews/", {"session": "turn-7"}).json()
    assert body["count"] == 4 and all(len(r["items"]) == 3 for r in body["results"])
    assert all(len(r["resolution"]["stored_ids"]) == 3 for r in body["results"][1:])


def test_the_schema_declares_the_list_and_both_answers_of_a_submission(world):
    schema = client_for(None).get("/api/v1/schema/?format=json").json()
    reviews = schema["paths"]["/api/v1/reviews/"]
    assert reviews["get"]["operationId"] == "list_remember_reviews"
    parameters = {p["name"]: p for p in reviews["get"]["parameters"]}
    assert {"session", "status", "limit", "offset"} <= set(parameters) and parameters["session"]["required"]
    assert {"200", "201"} <= set(reviews["post"]["responses"])
