"""POST facts/batch/ (issue 19): each item goes through POST facts/'s write path — same checks,
same re-mention / conflict / possible-conflict rules, including between items of one batch — and
is answered in order. Real PostgreSQL and the real model (the outcomes are semantic)."""

from __future__ import annotations

import asyncio
import json
import time
from unittest import mock

import pytest
from django.core.cache import cache
from django.test import override_settings

from agents.api.throttling import AgentRateThrottle
from memory.actors import Actor
from memory.models import AuditEvent, Conflict, Fact, FactMention
from memory.services.tenancy import set_grant
from tests.conftest import client_for
from tests.factories import AgentFactory, DomainFactory

pytestmark = pytest.mark.django_db

BATCH = "/api/v1/facts/batch/"


def item(topic: str, content: str, **extra: object) -> dict[str, object]:
    return {"domain": "architecture", "topic": topic, "content": content, "memory_type": "convention", **extra}


# A run of writes touching every rule: new facts, a restatement of an earlier item, a person's
# word contradicting an agent's (decided by veracity), an unsure pair (a person decides), an item
# refused for its fields, one for its domain, and a contradiction of an item that already lost.
SEQUENCE = [
    item("deploys", "Production deploys happen on Tuesdays."),
    item("database", "The primary database is PostgreSQL 16 with pgvector."),
    item("deploys", "Deploys to production happen on Tuesdays."),  # restates item 0
    item("cache", "The session cache lives in Redis with a 30 minute TTL."),
    item("cache", "The session cache lives in Redis with a 45 minute TTL.", veracity="human_stated"),  # contradicts 3
    item("team", "Mia leads the platform team."),
    item("team", "Omar leads the platform team."),  # unsure: a possible conflict
    item("style", "Python code is indented with spaces.", memory_type="rumour"),  # refused: memory_type
    item("style", "Python code is indented with spaces.", domain="nowhere"),  # refused: unknown domain
    item("style", "Python code is indented with spaces."),
    item("style", "Python code is indented with tabs.", veracity="tool_generated"),  # contradicts 9, loses
    item("cache", "The session cache lives in Redis with a 30 minute TTL."),  # restates the loser of 4
    item("queues", "Emails are sent by a separate mailer service."),
]


def relay(workspace, role):
    """An importer relaying people's words: it may state human_stated, as the sequence does."""
    return AgentFactory(workspace=workspace, role=role, name=f"relay-{workspace.slug}", relays_human_words=True)


def comparable(answer: dict, facts_by_id: dict[int, Fact]) -> tuple:
    """One item's answer without ids and timestamps: what a writer of the sequence learns."""
    if answer["status"] != 201:
        return (answer["status"], answer["error"]["code"], sorted(answer["error"]["fields"]))
    fact = answer["fact"]
    compared = facts_by_id[answer["compared_with"]].content if answer["compared_with"] else None
    return (
        201,
        answer["outcome"],
        fact["content"],
        fact["veracity"],
        answer["reason"],
        compared,
        answer["conflict_id"] is not None,
        None if answer["similarity"] is None else round(answer["similarity"], 2),
    )


def state(domain) -> list[tuple]:
    facts = Fact.objects.filter(domain=domain)
    by_id = {f.pk: f for f in facts}
    return sorted(
        (
            f.topic,
            f.content,
            f.veracity,
            f.mention_count,
            round(f.confidence, 6),
            f.status,
            by_id[f.superseded_by_id].content if f.superseded_by_id else None,
            tuple(sorted(m.text for m in FactMention.objects.filter(fact=f))),
        )
        for f in facts
    )


def conflicts(domain) -> list[tuple]:
    return sorted(
        (c.topic, c.status, c.rule, c.existing.content, c.proposed.content, c.winner.content if c.winner else None)
        for c in Conflict.objects.filter(domain=domain).select_related("existing", "proposed", "winner")
    )


def audit(workspace) -> list[str]:
    return sorted(AuditEvent.objects.filter(workspace_id=workspace.pk, verb__startswith="fact").values_list("verb"))


def test_a_batch_gives_the_same_answers_and_state_as_posting_one_by_one(world):
    one_by_one_agent = relay(world.workspace, world.coder_role)
    other_domain = DomainFactory(workspace=world.other_workspace, name="architecture")
    batch_agent = relay(world.other_workspace, world.foreign_agent.role)

    posted = []
    for body in SEQUENCE:
        response = client_for(one_by_one_agent).post("/api/v1/facts/", body, format="json")
        answer = response.json()
        posted.append({"status": response.status_code, **answer} if response.status_code == 201 else answer)
    response = client_for(batch_agent).post(BATCH, {"items": SEQUENCE}, format="json")
    assert response.status_code == 200
    batched = response.json()

    refused = {7, 8}
    assert [r["index"] for r in batched["results"]] == list(range(len(SEQUENCE)))
    assert (batched["created"], batched["failed"]) == (len(SEQUENCE) - 2, 2)
    facts = {f.pk: f for f in Fact.objects.all()}
    expected = [
        (400, p["code"], sorted(p["fields"])) if i in refused else comparable(p, facts) for i, p in enumerate(posted)
    ]
    assert [comparable(r, facts) for r in batched["results"]] == expected
    assert [r.get("outcome") for r in batched["results"]] == [
        "created",
        "created",
        "re_mentioned",
        "created",
        "conflict_won",
        "created",
        "possible_conflict",
        None,
        None,
        "created",
        "conflict_lost",  # tool_generated weighs less than agent_inferred
        "conflict_lost",
        "created",
    ]
    assert state(other_domain) == state(world.architecture)
    assert conflicts(other_domain) == conflicts(world.architecture)
    assert audit(world.other_workspace) == audit(world.workspace)
    written = Fact.objects.filter(domain=other_domain)
    assert all(f.embedding is not None and f.created_by_agent_id == batch_agent.pk for f in written)


def test_a_restatement_inside_the_batch_re_mentions_the_earlier_item(world, api):
    first = item("deploys", "Deploys ship every Tuesday after the standup.")
    again = item("deploys", "Deploys go out on Tuesdays after the standup.")
    results = api.post(BATCH, {"items": [first, item("db", "We use PostgreSQL."), again]}, format="json").json()[
        "results"
    ]
    assert [r["outcome"] for r in results] == ["created", "created", "re_mentioned"]
    assert results[2]["fact"]["id"] == results[2]["compared_with"] == results[0]["fact"]["id"]
    assert results[2]["fact"]["mention_count"] == 2
    fact = Fact.objects.get(pk=results[0]["fact"]["id"])
    assert [m.text for m in fact.mentions.all()] == [again["content"]]
    assert Fact.objects.filter(topic="deploys").count() == 1


def test_a_contradiction_inside_the_batch_answers_as_one_by_one(world, api):
    spaces, tabs = (
        item("style", "Python code is indented with spaces."),
        item("style", "Python code is indented with tabs."),
    )
    mia, omar = item("team", "Mia leads the platform team."), item("team", "Omar leads the platform team.")
    results = api.post(BATCH, {"items": [spaces, tabs, mia, omar]}, format="json").json()["results"]
    # The same pairs, one by one, in another domain of the same workspace.
    single = [
        api.post("/api/v1/facts/", {**body, "domain": "conventions"}, format="json").json()
        for body in (spaces, tabs, mia, omar)
    ]
    assert [r["outcome"] for r in results] == [s["outcome"] for s in single]
    assert results[1]["outcome"] in ("conflict_won", "conflict_lost", "possible_conflict")
    assert results[1]["compared_with"] == results[0]["fact"]["id"] and results[1]["conflict_id"]
    assert (results[3]["outcome"], results[3]["compared_with"]) == ("possible_conflict", results[2]["fact"]["id"])
    assert results[3]["reason"] == single[3]["reason"] and results[3]["reason"].startswith("unsure")
    open_conflict = Conflict.objects.get(pk=results[3]["conflict_id"])
    assert (open_conflict.status, open_conflict.winner_id) == ("open", None)


def test_refused_items_are_answered_with_their_code_and_write_nothing(world, api):
    items = [
        item("a", "Builds run on GitHub Actions."),
        item("b", "x", memory_type="rumour"),
        item("b", "Fine text.", domain="repo:web/nowhere"),
        item("b", "Fine text.", episode_id=424242),
        item("b", "Fine text.", source_observation_ids=[424242]),
        item("b", "Fine text.", observed_at="2999-01-01T00:00:00Z"),
        item("b", ""),
        5,
        {"topic": "only a topic"},
        item("c", "Releases are tagged with semantic versions."),
    ]
    before = AuditEvent.objects.count()
    response = api.post(BATCH, {"items": items}, format="json")
    assert response.status_code == 200
    body = response.json()
    answers = [(r["index"], r["status"], r.get("error", {}).get("code")) for r in body["results"]]
    assert answers == [
        (0, 201, None),
        (1, 400, "invalid_input"),
        (2, 400, "unknown_domain"),
        (3, 400, "unknown_episode"),
        (4, 400, "unknown_observation"),
        (5, 400, "invalid_input"),
        (6, 400, "invalid_input"),
        (7, 400, "invalid_input"),
        (8, 400, "invalid_input"),
        (9, 201, None),
    ]
    assert body["results"][1]["error"]["fields"] == {"memory_type": mock.ANY}
    assert set(body["results"][8]["error"]["fields"]) == {"domain", "content", "memory_type"}
    assert (body["created"], body["failed"]) == (2, 8)
    assert sorted(Fact.objects.values_list("topic", flat=True)) == ["a", "c"]
    assert AuditEvent.objects.count() - before == 2  # fact.created twice
    # Each refusal is the one POST facts/ gives the same item.
    for index in (1, 2, 3, 4):
        single = api.post("/api/v1/facts/", items[index], format="json")
        assert (single.status_code, single.json()) == (400, body["results"][index]["error"])


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"items": []}, "batch_empty"),
        ({"items": [item(f"t{i}", f"Fact {i}.") for i in range(101)]}, "batch_too_large"),
        ({}, "invalid_input"),
        ({"items": "not a list"}, "invalid_input"),
        ({"items": {"0": item("t", "c")}}, "invalid_input"),
        ([item("t", "c")], "invalid_input"),
    ],
)
def test_an_empty_too_large_or_shapeless_batch_is_refused_whole(world, api, body, code):
    response = api.post(BATCH, body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == code
    assert not Fact.objects.exists() and not AuditEvent.objects.filter(verb__startswith="fact").exists()


def test_the_limit_is_the_setting(world, api):
    with override_settings(ENGRAM_BATCH_MAX_ITEMS=2):
        refused = api.post(BATCH, {"items": [item(f"t{i}", f"Fact {i}.") for i in range(3)]}, format="json")
        accepted = api.post(BATCH, {"items": [item(f"t{i}", f"Fact {i}.") for i in range(2)]}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (400, "batch_too_large")
    assert "At most 2" in refused.json()["detail"]
    assert accepted.status_code == 200 and accepted.json()["created"] == 2


def test_an_ordinary_agent_cannot_state_human_words_in_a_batch(world, api):
    claimed = item("deploys", "Production deploys happen on Fridays.", veracity="human_stated")
    results = api.post(BATCH, {"items": [claimed, item("db", "We use PostgreSQL.")]}, format="json").json()["results"]
    single = api.post("/api/v1/facts/", claimed, format="json")
    assert (results[0]["status"], results[0]["error"]) == (403, single.json())
    assert single.status_code == 403 and single.json()["code"] == "veracity_not_allowed"
    assert results[1]["status"] == 201
    assert not Fact.objects.filter(veracity="human_stated").exists()


def test_an_item_cannot_reach_another_workspace_or_a_none_domain(world, api):
    set_grant(role=world.coder_role, domain=world.conventions, level="none", by=Actor.system("t"))
    intruder = client_for(world.foreign_agent)
    results = intruder.post(BATCH, {"items": [item("t", "Sneaky fact.")]}, format="json").json()["results"]
    assert (results[0]["status"], results[0]["error"]["code"]) == (400, "unknown_domain")
    hidden = item("t", "Hidden.", domain="conventions")
    answer = api.post(BATCH, {"items": [hidden]}, format="json").json()["results"][0]
    assert (answer["status"], answer["error"]["code"]) == (400, "unknown_domain")  # as a missing one reads
    assert answer["error"] == api.post("/api/v1/facts/", hidden, format="json").json()
    assert not Fact.objects.exists()


def test_hostile_batches_are_refused_quickly(world, api):
    began = time.monotonic()
    huge = api.post(BATCH, {"items": [{} for _ in range(10_000)]}, format="json")
    assert (huge.status_code, huge.json()["code"]) == (400, "batch_too_large")
    nested = '{"items": [' + "[" * 5_000 + "]" * 5_000 + "]}"
    deep = api.generic("POST", BATCH, nested, content_type="application/json")
    assert (deep.status_code, deep.json()["code"]) == (400, "json_too_deep")
    long_items = {"items": [item(f"t{i}", "x" * 16_000) for i in range(200)]}
    too_big = api.generic("POST", BATCH, json.dumps(long_items), content_type="application/json")
    assert too_big.status_code in (400, 413)
    assert time.monotonic() - began < 5
    assert not Fact.objects.exists()


def test_a_batch_counts_one_request_per_item_against_the_rate_limit(world, api):
    cache.clear()
    with mock.patch.object(AgentRateThrottle, "rate", "5/min", create=True):
        first = api.post(BATCH, {"items": [item(f"t{i}", f"Fact number {i}.") for i in range(3)]}, format="json")
        second = api.post(BATCH, {"items": [item(f"u{i}", f"Other fact {i}.") for i in range(3)]}, format="json")
        single = api.post("/api/v1/facts/", item("v", "One more fact."), format="json")
    cache.clear()
    assert first.status_code == 200
    assert (second.status_code, second.json()["code"]) == (429, "throttled")
    assert single.status_code == 201  # 3 + 1 + 1 of 5: the refused batch counted once
    assert Fact.objects.count() == 4


def test_the_schema_documents_the_batch(world, api):
    schema = api.get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/facts/batch/"]["post"]
    assert operation["operationId"] == "propose_facts"
    assert "ENGRAM_BATCH_MAX_ITEMS" in operation["description"]
    assert {"200", "400", "429"} <= set(operation["responses"])
    result = schema["components"]["schemas"]["FactBatchItemOut"]["properties"]
    assert {"index", "status", "outcome", "fact", "error"} <= set(result)


@pytest.mark.django_db(transaction=True)
def test_the_client_proposes_a_batch(world, live_server):
    from engram_client import EngramClient, EngramError

    engram = EngramClient(live_server.url, key=world.coder.plain_key)
    answer = engram.propose_facts(
        [
            {**item("deploys", "Production deploys happen on Tuesdays."), "observed_at": None},
            item("deploys", "Deploys to production happen on Tuesdays."),
            item("x", "y", memory_type="rumour"),
        ]
    )
    assert [r["status"] for r in answer["results"]] == [201, 201, 400]
    assert [r.get("outcome") for r in answer["results"]] == ["created", "re_mentioned", None]
    assert (answer["created"], answer["failed"]) == (2, 1)
    with pytest.raises(EngramError) as refused:
        engram.propose_facts([])
    assert (refused.value.status, refused.value.code) == (400, "batch_empty")


@pytest.mark.django_db(transaction=True)  # sync MCP tools run in a worker thread
def test_the_mcp_tool_answers_as_the_endpoint(world):
    import anyio.to_thread
    from django.db import connections

    from agents import mcp_server

    async def call(server, arguments):
        try:
            return await server.call_tool("propose_facts", arguments)
        finally:  # the tool ran in an idle worker thread, reused here: free its connection
            await anyio.to_thread.run_sync(connections.close_all)

    server = mcp_server.build_server(world.coder.plain_key)
    items = [item("deploys", "Production deploys happen on Tuesdays."), item("x", "y", memory_type="rumour")]
    over_mcp = asyncio.run(call(server, {"items": items}))
    assert not over_mcp.is_error
    body = over_mcp.structured_content
    assert [(r["status"], r.get("outcome")) for r in body["results"]] == [(201, "created"), (400, None)]
    again = client_for(world.coder).post(BATCH, {"items": items}, format="json").json()
    assert [(r["status"], r.get("outcome")) for r in again["results"]] == [(201, "re_mentioned"), (400, None)]
    assert again["results"][1]["error"] == body["results"][1]["error"]
    empty = asyncio.run(call(server, {"items": []}))
    assert empty.is_error and empty.structured_content["code"] == "batch_empty"


def test_an_item_refused_while_writing_is_undone_alone(world, api):
    """A refusal found under the locks (here: the episode gone since the check) undoes that item's
    savepoint only; the batch's other writes stand."""
    from memory.errors import InvalidInput
    from memory.models import Episode, EpisodeFact
    from memory.services import batch as batch_services
    from memory.services import facts as fact_services

    episode = Episode.objects.create(workspace=world.workspace, agent=world.coder, kind="session")
    gone = InvalidInput("Unknown episode.", code="unknown_episode", fields={"episode_id": ["gone"]})
    items = [
        item("a", "Builds run on GitHub Actions."),
        item("b", "Releases are tagged with semantic versions.", episode_id=episode.pk),
        item("c", "Staging is rebuilt every night."),
    ]
    checks = []

    def check_episode(workspace_id, episode_id, by):
        if episode_id is None:
            return None
        checks.append(episode_id)
        if len(checks) > 1:  # checked before anything was written, then under the locks
            raise gone
        return episode

    # Checked first by the batch (memory.services.batch), then under the locks (propose_fact's path).
    with (
        mock.patch.object(batch_services, "_check_episode", side_effect=check_episode),
        mock.patch.object(fact_services, "_check_episode", side_effect=check_episode),
    ):
        body = api.post(BATCH, {"items": items}, format="json").json()
    assert [(r["status"], r.get("error", {}).get("code")) for r in body["results"]] == [
        (201, None),
        (400, "unknown_episode"),
        (201, None),
    ]
    assert sorted(Fact.objects.values_list("topic", flat=True)) == ["a", "c"]
    assert not EpisodeFact.objects.exists()
