"""As-of recall over the API and MCP (issue 21, point 3): `as_of` / `valid_at` on search and the
preamble, `?as_of=` on GET facts/{id}/; bad moments are 400 and write nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import AuditEvent, Episode, EpisodeFact, Fact
from tests.memory.test_as_of import QUERY, TASK, Timeline, build_timeline


@pytest.fixture
def timeline(world) -> Timeline:
    return build_timeline(world)


def iso(moment):
    return moment.isoformat()


def test_search_as_of_answers_then_and_echoes_both_moments(world, api, timeline):
    for mode in ("keyword", "semantic", "hybrid"):
        body = api.post("/api/v1/search/", {"query": QUERY, "mode": mode, "as_of": iso(timeline.m2)}, format="json")
        assert body.status_code == 200, body.json()
        body = body.json()
        assert [r["id"] for r in body["results"]] == [timeline.b.pk]
        assert body["as_of"] is not None and body["valid_at"] is None
    valid_at = iso(timezone.now() - timedelta(days=21))
    body = api.post("/api/v1/search/", {"query": QUERY, "valid_at": valid_at}, format="json").json()
    assert {r["id"] for r in body["results"]} == {timeline.c.pk, timeline.d.pk}
    assert body["as_of"] is None and body["valid_at"] is not None


def test_search_and_preamble_default_answer_is_todays(world, api, timeline):
    body = api.post("/api/v1/search/", {"query": QUERY}, format="json").json()
    assert [r["id"] for r in body["results"]] == [timeline.c.pk]
    assert body["as_of"] is None and body["valid_at"] is None
    preamble = api.post("/api/v1/preamble/", {"task": TASK}, format="json").json()
    assert [f["id"] for f in preamble["facts"]] == [timeline.c.pk]
    assert preamble["policies"] == [f"- [architecture] {timeline.p2.rule}"]
    assert preamble["as_of"] is None


def test_preamble_as_of_has_the_policies_and_facts_of_then(world, api, timeline):
    body = api.post("/api/v1/preamble/", {"task": TASK, "as_of": iso(timeline.m1)}, format="json").json()
    assert [f["id"] for f in body["facts"]] == [timeline.a.pk]
    assert body["policies"] == [f"- [architecture] {timeline.p1.rule}"]
    assert body["text"].startswith("Memory as believed at") and body["as_of"]


def test_fact_history_as_of(world, api, timeline):
    t = timeline
    then = api.get(f"/api/v1/facts/{t.a.pk}/", {"as_of": iso(t.m1)}).json()
    assert (then["superseded_by"], then["status"], then["as_of"] is not None) == (None, "active", True)
    assert [h["id"] for h in then["history"]] == [t.a.pk]
    now = api.get(f"/api/v1/facts/{t.a.pk}/").json()
    assert now["superseded_by"] == t.b.pk and [h["id"] for h in now["history"]] == [t.a.pk, t.b.pk]
    assert now["as_of"] is None
    b_then = api.get(f"/api/v1/facts/{t.b.pk}/", {"as_of": iso(t.m3)}).json()
    assert (b_then["status"], b_then["challenge"]) == ("active", None)
    b_later = api.get(f"/api/v1/facts/{t.b.pk}/", {"as_of": iso(t.m4)}).json()
    assert b_later["status"] == "challenged" and b_later["challenge"]["reason"] == "review"
    c_then = api.get(f"/api/v1/facts/{t.c.pk}/", {"as_of": iso(t.m3)}).json()
    assert (c_then["mentions"], c_then["mentions_total"]) == ([], 0)
    missing = api.get(f"/api/v1/facts/{t.b.pk}/", {"as_of": iso(t.m1)})
    assert (missing.status_code, missing.json()["code"]) == (404, "fact_not_found")


def test_an_unencoded_plus_offset_in_the_query_string_still_reads(world, api, timeline):
    moment = timeline.m1.astimezone(timezone.get_fixed_timezone(120)).isoformat()
    assert "+02:00" in moment
    response = api.get(f"/api/v1/facts/{timeline.a.pk}/?as_of={moment}")  # `+` arrives as a space
    assert response.status_code == 200 and response.json()["superseded_by"] is None


HOSTILE = [
    "tomorrow",
    "2026-13-45T00:00:00Z",
    "2026-05-01T12:00:00",  # naive
    "2026-05-01",  # a date, no time or zone
    "",
    "0001-01-01T00:00:00+05:00",  # no UTC instant
    12345,
    ["2026-05-01T12:00:00Z"],
    {"at": "2026-05-01T12:00:00Z"},
]


@pytest.mark.parametrize("value", [*HOSTILE, "future"])
def test_bad_moments_are_refused_and_nothing_is_written(world, api, timeline, value):
    if value == "future":
        value = iso(timezone.now() + timedelta(days=1))
    counts = (Episode.objects.count(), EpisodeFact.objects.count(), AuditEvent.objects.count())
    recalls = sorted(Fact.objects.values_list("pk", "recall_count"))
    for field in ("as_of", "valid_at"):
        for path, body in (("/api/v1/search/", {"query": QUERY}), ("/api/v1/preamble/", {"task": TASK})):
            response = api.post(path, {**body, field: value}, format="json")
            assert response.status_code == 400, (path, field, value)
            assert response.json()["code"] == "invalid_input" and field in response.json()["fields"]
    if isinstance(value, str) and value:  # an empty `?as_of=` is as if not given (DRF's query-string rule)
        response = api.get(f"/api/v1/facts/{timeline.a.pk}/", {"as_of": value})
        assert (response.status_code, response.json()["code"]) == (400, "invalid_input"), value
    assert (Episode.objects.count(), EpisodeFact.objects.count(), AuditEvent.objects.count()) == counts
    assert sorted(Fact.objects.values_list("pk", "recall_count")) == recalls


def test_a_moment_before_the_workspace_existed_is_an_empty_answer(world, api):
    long_ago = "1999-01-01T00:00:00Z"
    body = api.post("/api/v1/search/", {"query": QUERY, "as_of": long_ago}, format="json").json()
    assert body["results"] == [] and body["as_of"].startswith("1999-01-01")
    preamble = api.post("/api/v1/preamble/", {"task": TASK, "as_of": long_ago}, format="json").json()
    assert preamble["facts"] == [] and preamble["policies"] == []


def test_another_workspace_agent_sees_none_of_it_as_of(world, timeline):
    from tests.conftest import client_for

    foreign = client_for(world.foreign_agent)
    body = foreign.post("/api/v1/search/", {"query": QUERY, "as_of": iso(timeline.m3)}, format="json").json()
    assert body["results"] == []
    response = foreign.get(f"/api/v1/facts/{timeline.a.pk}/", {"as_of": iso(timeline.m1)})
    assert response.status_code == 404


@pytest.mark.django_db(transaction=True)  # sync MCP tools run in a worker thread
def test_mcp_tools_take_as_of_and_answer_as_the_api(world, api, timeline):
    from agents import mcp_server
    from tests.agents.test_operations_parity import SITE, _call_tool

    server = mcp_server.build_server(world.coder.plain_key, site_url=SITE)
    moment = iso(timeline.m1)
    fact = _call_tool(server, "get_fact", {"fact_id": timeline.a.pk, "as_of": moment}).structured_content
    assert fact == api.get(f"/api/v1/facts/{timeline.a.pk}/", {"as_of": moment}).json()
    assert fact["superseded_by"] is None
    found = _call_tool(server, "search_memory", {"query": QUERY, "as_of": moment}).structured_content
    assert [r["id"] for r in found["results"]] == [timeline.a.pk] and found["as_of"]
    preamble = _call_tool(server, "get_preamble", {"task": TASK, "as_of": moment}).structured_content
    assert preamble["policies"] == [f"- [architecture] {timeline.p1.rule}"]
    refused = _call_tool(server, "search_memory", {"query": QUERY, "as_of": "2026-05-01T12:00:00"})
    assert refused.structured_content["code"] == "invalid_input"
