"""The exposure trail (issue 21): every fact and policy served by the preamble and search, over
the API or MCP, is recorded per dispatch/search from the recall buffer; ids only; pruned after
the retention setting; readable from a bare fact id."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents import operations as ops
from agents.runs import start_run
from memory import recalls
from memory.actors import Actor
from memory.models import Exposure, Fact
from memory.recalls import Served, served_over
from memory.scheduler import DAILY_JOBS
from memory.search.hybrid import search_memory
from memory.search.preamble import build_preamble
from memory.selectors_exposure import exposures_of_fact, recipients_of, stopped_believing_at
from memory.services.embedding import embed_missing
from memory.services.exposure import prune_exposures
from memory.services.facts import supersede_fact
from memory.services.lifecycle import challenge_fact
from tests.factories import FactFactory, PolicyFactory

TASK = "Fix the flaky deploy pipeline for the billing service"


def _fact(world, content, *, topic="deploys", domain=None, **kw):
    return FactFactory(domain=domain or world.architecture, topic=topic, content=content, **kw)


def _bag(rows):
    return sorted(rows, key=repr)


def _trail(**filters):
    """(agent, surface, fact, policy, episode) of each exposure, in a stable order."""
    return _bag(
        Exposure.objects.filter(**filters).values_list("agent_id", "surface", "fact_id", "policy_id", "episode_id")
    )


def test_the_preamble_records_its_policies_and_facts(world):
    rule_a = PolicyFactory(domain=world.conventions, rule="Never edit an issued invoice.")
    rule_b = PolicyFactory(domain=world.architecture, rule="Ask before adding a datastore.")
    PolicyFactory(domain=world.architecture, rule="An inactive rule.", active=False)
    fact = _fact(world, "The deploy pipeline retries flaky steps twice.")
    _fact(world, "Nothing about that task at all: invoices are numbered.", topic="invoices")

    preamble = build_preamble(agent=world.coder, task=TASK)

    assert [f.pk for f in preamble.facts] == [fact.pk]
    episode = preamble.episode_id
    assert _trail() == _bag(
        [
            (world.coder.pk, "preamble", None, rule_a.pk, episode),
            (world.coder.pk, "preamble", None, rule_b.pk, episode),
            (world.coder.pk, "preamble", fact.pk, None, episode),
        ]
    )
    assert set(Exposure.objects.values_list("workspace_id", flat=True)) == {world.workspace.pk}


def test_a_preamble_with_policies_only_still_records_them(world):
    rule = PolicyFactory(domain=world.architecture, rule="Ask before adding a datastore.")
    build_preamble(agent=world.coder, task="short task")  # under 20 characters: no facts
    assert _trail() == [(world.coder.pk, "preamble", None, rule.pk, Exposure.objects.get().episode_id)]


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_search_records_the_returned_facts_in_every_mode(world, mode):
    a = _fact(world, "The deploy freeze starts on December 20.", topic="freeze")
    b = _fact(world, "Deploys to production need a second approver.", topic="approvals")
    embed_missing()
    result = search_memory(agent=world.coder, query="deploy freeze December", mode=mode, limit=5)
    returned = [h.fact.pk for h in result.hits]
    assert a.pk in returned
    assert _trail() == _bag((world.coder.pk, "search", pk, None, result.episode_id) for pk in returned)
    assert set(returned) <= {a.pk, b.pk}


def test_a_search_that_finds_nothing_records_nothing(world):
    _fact(world, "The deploy freeze starts on December 20.", topic="freeze")
    search_memory(agent=world.coder, query="kubernetes ingress annotations", mode="keyword")
    assert not Exposure.objects.exists()


def test_the_operations_called_by_the_mcp_server_record_the_mcp_surface(world):
    rule = PolicyFactory(domain=world.architecture, rule="Ask before adding a datastore.")
    fact = _fact(world, "The deploy pipeline retries flaky steps twice.")
    with served_over("mcp"):
        preamble = ops.get_preamble(world.coder, {"task": TASK})
        searched = ops.search(world.coder, {"query": "deploy pipeline retries", "mode": "keyword"})
    over_http = ops.search(world.coder, {"query": "deploy pipeline retries", "mode": "keyword"})
    p_episode, s_episode = preamble.body["episode_id"], searched.body["episode_id"]
    assert _trail() == _bag(
        [
            (world.coder.pk, "mcp_preamble", None, rule.pk, p_episode),
            (world.coder.pk, "mcp_preamble", fact.pk, None, p_episode),
            (world.coder.pk, "mcp_search", fact.pk, None, s_episode),
            (world.coder.pk, "search", fact.pk, None, over_http.body["episode_id"]),
        ]
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_get_preamble_call_over_mcp_stdio_records_mcp_preamble(world):
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    from tests.agents.test_mcp import _env
    from tests.procs import ROOT

    fact = _fact(world, "The deploy pipeline retries flaky steps twice.")
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp"], env=_env(world.coder.plain_key), cwd=str(ROOT)
    )

    async def main():
        async with Client(params) as client:
            return await client.call_tool("get_preamble", {"task": TASK})

    answer = asyncio.run(main())
    assert not answer.is_error
    assert _trail() == [(world.coder.pk, "mcp_preamble", fact.pk, None, answer.structured_content["episode_id"])]


def test_the_run_an_agent_has_open_is_recorded(world):
    fact = _fact(world, "The deploy pipeline retries flaky steps twice.")
    build_preamble(agent=world.coder, task=TASK)
    run = start_run(agent=world.coder, task="Migrate the billing service", by=Actor.of_agent(world.coder))
    build_preamble(agent=world.coder, task=TASK)
    build_preamble(agent=world.coder2, task=TASK)  # another agent's dispatch is not in that run
    runs = Exposure.objects.filter(fact_id=fact.pk).order_by("id").values_list("agent_id", "run_id")
    assert list(runs) == [(world.coder.pk, None), (world.coder.pk, run.pk), (world.coder2.pk, None)]


def test_a_flush_writes_the_whole_batch_in_one_insert(world, settings):
    facts = [_fact(world, f"Fact {i} about deploy pipelines.", topic=f"t{i}") for i in range(5)]
    rule = PolicyFactory(domain=world.architecture, rule="Ask before adding a datastore.")
    settings.ENGRAM_RECALL_MODE = "background"
    buffer = recalls.RecallBuffer()
    buffer._thread = type("Alive", (), {"is_alive": staticmethod(lambda: True)})()  # no flusher thread here
    now = timezone.now()
    for agent in (world.coder, world.coder2, world.planner):
        served = [Served(world.workspace.pk, agent.pk, None, "search", f.pk, None, now) for f in facts]
        served.append(Served(world.workspace.pk, agent.pk, None, "preamble", None, rule.pk, now))
        buffer.add(None, [f.pk for f in facts], served)
    assert not Exposure.objects.exists()  # nothing written on the request path
    with CaptureQueriesContext(connection) as queries:
        buffer.flush()
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('INSERT INTO "memory_exposure"')]
    assert len(inserts) == 1
    assert Exposure.objects.count() == 18
    assert Fact.objects.get(pk=facts[0].pk).recall_count == 3
    with CaptureQueriesContext(connection) as queries:
        buffer.flush()  # nothing pending: no query at all
    assert queries.captured_queries == []


def test_a_failed_flush_keeps_the_exposures_for_the_next_one(world, settings, monkeypatch):
    fact = _fact(world, "The deploy pipeline retries flaky steps twice.")
    settings.ENGRAM_RECALL_MODE = "background"
    buffer = recalls.RecallBuffer()
    buffer._thread = type("Alive", (), {"is_alive": staticmethod(lambda: True)})()
    buffer.add(
        None, [fact.pk], [Served(world.workspace.pk, world.coder.pk, None, "search", fact.pk, None, timezone.now())]
    )

    def boom(served):
        raise RuntimeError("database hiccup")

    monkeypatch.setattr(recalls, "_write_exposures", boom)
    with pytest.raises(RuntimeError):
        buffer.flush()
    assert Fact.objects.get(pk=fact.pk).recall_count == 0  # the counters rolled back with it
    monkeypatch.undo()
    buffer.flush()
    assert _trail() == [(world.coder.pk, "search", fact.pk, None, None)]
    assert Fact.objects.get(pk=fact.pk).recall_count == 1


def test_no_content_is_stored_in_an_exposure(world):
    rule = PolicyFactory(domain=world.architecture, rule="Ask before adding a datastore.")
    fact = _fact(world, "The deploy pipeline retries flaky steps twice.")
    build_preamble(agent=world.coder, task=TASK)
    columns = {f.column for f in Exposure._meta.concrete_fields}
    assert columns == {
        "id",
        "workspace_id",
        "agent_id",
        "episode_id",
        "surface",
        "fact_id",
        "policy_id",
        "run_id",
        "served_at",
    }
    for row in Exposure.objects.values():
        assert not any(isinstance(v, str) and (fact.content in v or rule.rule in v) for v in row.values())
        assert row["surface"] in Exposure.Surface.values


def test_the_trail_survives_the_facts_deletion_and_reads_from_a_bare_id(world):
    fact = _fact(world, "The deploy pipeline retries flaky steps twice.")
    build_preamble(agent=world.coder, task=TASK)
    fact_id, before = fact.pk, timezone.now()
    Fact.objects.filter(pk=fact_id).delete()  # as an erasure would
    assert [e.agent_id for e in exposures_of_fact(world.workspace, fact_id)] == [world.coder.pk]
    assert list(exposures_of_fact(world.workspace.pk, fact_id, since=before)) == []
    assert list(exposures_of_fact(world.other_workspace, fact_id)) == []  # scoped to the workspace
    [who] = recipients_of(world.workspace, [fact_id])
    assert (who.agent_name, who.times, who.fact_ids, who.surfaces) == ("coder-a", 1, [fact_id], ["preamble"])


def test_stopped_believing_is_the_supersession_or_the_status_change(world):
    a = _fact(world, "The deploy pipeline retries flaky steps twice.")
    assert stopped_believing_at(a) is None
    b = supersede_fact(fact=a, by=Actor.of_agent(world.coder), content="The deploy pipeline retries thrice.")
    a.refresh_from_db()
    assert stopped_believing_at(a) == a.superseded_at
    assert stopped_believing_at(b) is None
    challenge_fact(fact=b, by=Actor.of_agent(world.coder), reason="failed_replay")
    b.refresh_from_db()
    assert stopped_believing_at(b) == b.status_changed_at


def test_after_supersession_only_later_servings_count_as_since(world):
    old = _fact(world, "The deploy pipeline retries flaky steps twice.")
    build_preamble(agent=world.coder, task=TASK)  # served while believed
    new = supersede_fact(
        fact=old, by=Actor.of_agent(world.planner), content="The deploy pipeline retries flaky steps thrice."
    )
    old.refresh_from_db()
    build_preamble(agent=world.coder2, task=TASK)  # the new version, after
    # The old version served after it stopped being believed (an as-of recall, a batch flushed late).
    Exposure.objects.create(
        workspace=world.workspace, agent=world.planner, surface="search", fact_id=old.pk, served_at=timezone.now()
    )
    chain = [old.pk, new.pk]
    since = recipients_of(world.workspace, chain, since=old.superseded_at)
    before = recipients_of(world.workspace, chain, until=old.superseded_at)
    assert {(r.agent_name, tuple(r.fact_ids)) for r in since} == {("coder-b", (new.pk,)), ("planner-a", (old.pk,))}
    assert [(r.agent_name, r.fact_ids) for r in before] == [("coder-a", [old.pk])]


def test_pruning_removes_only_rows_older_than_the_retention(world, settings):
    fact = _fact(world, "The deploy pipeline retries flaky steps twice.")
    now = timezone.now()

    def served(days):
        return Exposure.objects.create(
            workspace=world.workspace,
            agent=world.coder,
            surface="search",
            fact_id=fact.pk,
            served_at=now - timedelta(days=days),
        )

    old, edge, recent = served(91), served(89), served(1)
    settings.ENGRAM_EXPOSURE_RETENTION_DAYS = 90
    assert prune_exposures(now=now, batch=1) == 1
    assert set(Exposure.objects.values_list("pk", flat=True)) == {edge.pk, recent.pk}
    assert prune_exposures(now=now) == 0  # idempotent
    assert prune_exposures(now=now + timedelta(days=2)) == 1
    settings.ENGRAM_EXPOSURE_RETENTION_DAYS = 0  # keep forever
    assert prune_exposures(now=now + timedelta(days=1000)) == 0
    assert list(Exposure.objects.values_list("pk", flat=True)) == [recent.pk]
    assert old.pk not in set(Exposure.objects.values_list("pk", flat=True))


def test_pruning_is_a_daily_job(world, settings):
    from memory.tasks import prune_exposures as task

    assert "memory.tasks.prune_exposures" in {job.task for job in DAILY_JOBS}
    Exposure.objects.create(
        workspace=world.workspace, surface="search", fact_id=1, served_at=timezone.now() - timedelta(days=400)
    )
    with override_settings(ENGRAM_EXPOSURE_RETENTION_DAYS=90):
        assert task() == {"deleted": 1}


def test_an_as_of_recall_of_a_replaced_fact_counts_as_received_since(world):
    old = _fact(world, "The deploy freeze starts on December 15.", topic="freeze")
    before_change = timezone.now()
    supersede_fact(fact=old, by=Actor.of_agent(world.planner), content="The deploy freeze starts on December 20.")
    old.refresh_from_db()
    result = search_memory(agent=world.coder2, query="deploy freeze December", mode="keyword", as_of=before_change)
    assert [h.fact.pk for h in result.hits] == [old.pk]
    [who] = recipients_of(world.workspace, [old.pk], since=stopped_believing_at(old))
    assert (who.agent_name, who.fact_ids, who.surfaces) == ("coder-b", [old.pk], ["search"])
