"""The MCP tools of issue 39: submitting twice answers the live review, and
`list_remember_reviews` lists a session's reviews as `GET reviews/?session=` does."""

import asyncio

import anyio.to_thread
import pytest
from django.db import connections

from agents import mcp_server
from memory.actors import Actor
from review.models import RememberReview
from review.services import reject_review
from tests.conftest import client_for
from tests.review.samples import FILES, OUTPUT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reviewer_is_workspace_admin")]

SITE = "http://testserver"
SUBMISSION = {"session_id": "turn-7", "repo": "web", "output": OUTPUT, "files": FILES}


def _call(server, name, arguments):
    async def call():
        try:
            return await server.call_tool(name, arguments)
        finally:  # the tool ran in a worker thread, reused here: free its connection
            await anyio.to_thread.run_sync(connections.close_all)

    return asyncio.run(call())


def test_submitting_twice_over_mcp_answers_the_live_review_and_the_list_finds_it(world):
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    first = _call(server, "submit_remember_review", SUBMISSION)
    second = _call(server, "submit_remember_review", {**SUBMISSION, "output": "see docs/other.md"})
    assert not first.is_error and not second.is_error
    assert second.structured_content == first.structured_content
    assert RememberReview.objects.count() == 1

    listed = _call(server, "list_remember_reviews", {"session": "turn-7"})
    api = client_for(world.coder)
    assert not listed.is_error
    assert listed.structured_content == api.get("/api/v1/reviews/", {"session": "turn-7"}).json()
    assert [r["id"] for r in listed.structured_content["results"]] == [first.structured_content["id"]]

    review = RememberReview.objects.get()
    reject_review(review=review, by=Actor.of_user(world.reviewer))
    assert not _call(server, "consume_remember_review", {"review_id": review.pk}).is_error
    third = _call(server, "submit_remember_review", SUBMISSION)
    assert third.structured_content["id"] != review.pk and third.structured_content["status"] == "pending"
    pending = _call(server, "list_remember_reviews", {"session": "turn-7", "status": "pending", "limit": 1})
    assert [r["id"] for r in pending.structured_content["results"]] == [third.structured_content["id"]]
    paged = _call(server, "list_remember_reviews", {"session": "turn-7", "limit": 1})
    assert paged.structured_content["next"] == f"{SITE}/api/v1/reviews/?limit=1&offset=1&session=turn-7"
    assert paged.structured_content == api.get("/api/v1/reviews/", {"session": "turn-7", "limit": 1}).json()


def test_another_agent_lists_nothing_over_mcp(world):
    client_for(world.coder).post("/api/v1/reviews/", SUBMISSION, format="json")
    server = mcp_server.build_server(world.coder2.plain_key, site_url=SITE)
    listed = _call(server, "list_remember_reviews", {"session": "turn-7"})
    assert (listed.structured_content["count"], listed.structured_content["results"]) == (0, [])


@pytest.mark.parametrize(
    ("arguments", "code", "field"),
    [
        ({}, "invalid_input", "session"),
        ({"session": ""}, "invalid_input", "session"),
        ({"session": "s" * 201}, "invalid_input", "session"),
        ({"session": 7}, None, None),  # a number is read as its text, as in a query string
        ({"session": "turn-7", "status": "live"}, "invalid_input", "status"),
        ({"session": "turn-7", "status": ["pending"]}, "invalid_input", "status"),
        ({"session": {"x": 1}}, "invalid_input", "session"),
        ({"session": "turn-7", "limit": 0}, "invalid_input", "limit"),
        ({"session": "turn-7", "colour": "blue"}, "unknown_argument", "colour"),
        ({"session": "a\x00b"}, "invalid_characters", None),
    ],
)
def test_bad_arguments_are_the_apis_errors_never_a_crash(world, arguments, code, field):
    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    result = _call(server, "list_remember_reviews", arguments)
    if code is None:
        assert not result.is_error and result.structured_content["count"] == 0
        return
    assert result.is_error and result.structured_content["code"] == code, result.structured_content
    assert set(result.structured_content) >= {"code", "detail", "fields"}
    if field is not None:
        assert field in result.structured_content["fields"]
