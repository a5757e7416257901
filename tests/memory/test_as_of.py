"""As-of recall (issue 21, point 3): on a scripted timeline, search (every mode), the preamble and
fact history answer exactly what Engram believed at each moment (`as_of`, transaction time) and
what was true then (`valid_at`, valid time); without them, today's answer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from memory import decay, selectors
from memory.actors import Actor
from memory.models import AccessGrant, Fact, Policy
from memory.search import voices
from memory.search.as_of import policies_then
from memory.search.hybrid import MODES, search_memory
from memory.search.preamble import build_preamble
from memory.services.embedding import embed_missing
from memory.services.facts import FactInput, propose_fact, supersede_fact
from memory.services.lifecycle import challenge_fact
from memory.services.policies import propose_policy, supersede_policy
from tests.factories import FactFactory, PolicyFactory

QUERY = "job queue broker"
TASK = "Investigate the job queue broker configuration before the release"


@dataclass
class Timeline:
    a: Fact  # t0, superseded by b at t1
    b: Fact  # t1, challenged at t3
    c: Fact  # t2, observed 30 days before it was recorded
    d: Fact  # t2, observed 30 days before, expired 10 days before: true only back then
    p1: Policy  # t0, revised at t4
    p2: Policy  # t4
    before: datetime  # m0: nothing recorded yet
    m1: datetime  # after t0
    m2: datetime  # after t1
    m3: datetime  # after t2
    m4: datetime  # after t3 (and a re-mention of c)
    m5: datetime  # after t4


def _mark() -> datetime:
    moment = timezone.now()
    while timezone.now() == moment:  # the next step's timestamps are strictly later
        pass
    return moment


def _propose(world, topic, content, memory_type="decision", **extra):
    data = FactInput(topic=topic, content=content, memory_type=memory_type, **extra)
    return propose_fact(domain=world.architecture, data=data, by=Actor.of_agent(world.coder))


def build_timeline(world) -> Timeline:
    """t0 a and policy p1; t1 b supersedes a; t2 c and d, back-dated; t3 b challenged, c stated
    again; t4 p1 revised as p2 — with a moment marked after each step."""
    person = Actor.of_user(world.admin_user)
    before = _mark()
    a = _propose(world, "queue-broker", "The job queue broker is RabbitMQ.").fact
    p1 = propose_policy(domain=world.architecture, rule="Never purge the job queue by hand.", by=person)
    m1 = _mark()
    b = supersede_fact(fact=a, by=Actor.of_agent(world.coder), content="The job queue broker is Redis Streams.")
    m2 = _mark()
    month_ago = timezone.now() - timedelta(days=30)
    c = _propose(
        world, "queue-outage", "The job queue broker stalled during the October outage.", "event", observed_at=month_ago
    ).fact
    d = _propose(
        world,
        "queue-freeze",
        "The job queue broker was frozen for the audit.",
        "event",
        observed_at=month_ago,
        valid_until=timezone.now() - timedelta(days=10),
    ).fact
    m3 = _mark()
    challenge_fact(fact=b, by=person, reason="review", detail="the broker moved again")
    again = _propose(world, "queue-outage", "The job queue broker stalled during the October outage.", "event")
    assert again.outcome == "re_mentioned" and again.fact.pk == c.pk
    m4 = _mark()
    p2 = supersede_policy(policy=p1, rule="Never purge the job queue by hand; ask the on-call.", by=person)
    m5 = _mark()
    embed_missing()
    return Timeline(a, b, c, d, p1, p2, before, m1, m2, m3, m4, m5)


@pytest.fixture
def timeline(world) -> Timeline:
    return build_timeline(world)


def _found(world, *, mode="hybrid", **moments):
    return {h.fact.pk for h in search_memory(agent=world.coder, query=QUERY, mode=mode, **moments).hits}


def _expected(t: Timeline) -> list[tuple[str, set[int]]]:
    return [
        ("before", set()),
        ("m1", {t.a.pk}),
        ("m2", {t.b.pk}),
        ("m3", {t.b.pk, t.c.pk}),
        ("m4", {t.c.pk}),
        ("m5", {t.c.pk}),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_search_as_of_each_step_answers_what_was_believed_then(world, timeline, mode):
    for name, expected in _expected(timeline):
        assert _found(world, mode=mode, as_of=getattr(timeline, name)) == expected, (mode, name)


@pytest.mark.parametrize("mode", MODES)
def test_search_without_moments_is_todays_answer(world, timeline, mode):
    today = search_memory(agent=world.coder, query=QUERY, mode=mode, record=False)
    assert {h.fact.pk for h in today.hits} == {timeline.c.pk}
    assert today.as_of is None and today.valid_at is None
    assert _found(world, mode=mode, as_of=timezone.now()) == {timeline.c.pk}


@pytest.mark.parametrize("mode", MODES)
def test_valid_at_selects_what_was_true_then_among_what_was_believed(world, timeline, mode):
    t = timeline
    three_weeks_ago = timezone.now() - timedelta(days=21)
    # Believed now, true three weeks ago: the back-dated facts, the expired one included.
    assert _found(world, mode=mode, valid_at=three_weeks_ago) == {t.c.pk, t.d.pk}
    # Believed at m3 (b, c, d), true at m1 (b was observed only at t1) or at m2.
    assert _found(world, mode=mode, as_of=t.m3, valid_at=t.m1) == {t.c.pk}
    assert _found(world, mode=mode, as_of=t.m3, valid_at=t.m2) == {t.b.pk, t.c.pk}
    # Before c and d were recorded, nothing was known to be true three weeks earlier.
    assert _found(world, mode=mode, as_of=t.m2, valid_at=three_weeks_ago) == set()


def test_preamble_as_of_each_step_has_the_facts_and_policies_of_then(world, timeline):
    t = timeline
    rule_1, rule_2 = "[architecture] " + t.p1.rule, "[architecture] " + t.p2.rule
    expected_policies = {"before": [], "m1": [rule_1], "m2": [rule_1], "m3": [rule_1], "m4": [rule_1], "m5": [rule_2]}
    for name, facts in _expected(t):
        preamble = build_preamble(agent=world.coder, task=TASK, as_of=getattr(t, name))
        assert {f.pk for f in preamble.facts} == facts, name
        assert [line.removeprefix("- ") for line in preamble.policies] == expected_policies[name], name
        assert preamble.text.startswith("Memory as believed at"), name
        assert preamble.as_of == getattr(t, name)
    today = build_preamble(agent=world.coder, task=TASK)
    assert {f.pk for f in today.facts} == {t.c.pk}
    assert [line.removeprefix("- ") for line in today.policies] == [rule_2]
    assert not today.text.startswith("Memory as")


def test_preamble_valid_at_keeps_only_what_was_true_then(world, timeline):
    preamble = build_preamble(agent=world.coder, task=TASK, valid_at=timezone.now() - timedelta(days=21))
    assert {f.pk for f in preamble.facts} == {timeline.c.pk, timeline.d.pk}
    assert "true at" in preamble.text.splitlines()[0]


def test_a_deactivated_policy_counts_as_it_was_then(world):
    from memory.services.policies import deactivate_policy

    policy = propose_policy(domain=world.architecture, rule="Tag every release.", by=Actor.of_user(world.admin_user))
    active_then = _mark()
    deactivate_policy(policy=policy, by=Actor.of_user(world.admin_user))
    assert [p.pk for p in policies_then(world.coder, active_then)] == [policy.pk]
    assert policies_then(world.coder, timezone.now()) == []


def test_fact_history_as_of_shows_the_chain_and_mentions_of_then(world, timeline):
    t = timeline
    [a_then] = selectors.facts_as_they_were([t.a], t.m1)
    assert (a_then.superseded_by_id, a_then.superseded_at, a_then.status) == (None, None, "active")
    assert [f.pk for f in selectors.facts_as_they_were(selectors.fact_history(t.a), t.m1)] == [t.a.pk]
    chain = selectors.facts_as_they_were(selectors.fact_history(t.a), t.m3)
    assert [(f.pk, f.superseded_by_id, f.status) for f in chain] == [
        (t.a.pk, t.b.pk, "active"),
        (t.b.pk, None, "active"),
    ]
    chain = selectors.facts_as_they_were(selectors.fact_history(t.a), t.m5)
    assert [(f.pk, f.status) for f in chain] == [(t.a.pk, "active"), (t.b.pk, "challenged")]
    assert selectors.mentions_of(t.c, as_of=t.m3) == ([], 0)
    assert selectors.mentions_of(t.c, as_of=t.m4)[1] == selectors.mentions_of(t.c)[1] == 1
    t.a.refresh_from_db()
    assert t.a.superseded_by_id == t.b.pk  # the copies were never saved


def test_fact_as_of_before_it_was_recorded_is_not_found(world, timeline):
    from memory.errors import NotFound

    with pytest.raises(NotFound):
        selectors.fact_as_of(world.coder, timeline.b.pk, timeline.m1)


def test_decay_is_measured_at_as_of(world):
    month_ago = timezone.now() - timedelta(days=30)
    fact = FactFactory(
        domain=world.architecture,
        topic="deadline",
        content="The invoice export is due to the auditors.",
        memory_type="commitment",
        created_at=month_ago,
        last_mentioned_at=month_ago,
        observed_at=month_ago,
        status_changed_at=month_ago,
    )
    query = "invoice export auditors"
    [now_hit] = search_memory(agent=world.coder, query=query, mode="keyword", record=False).hits
    as_of = month_ago + timedelta(days=1)
    [then_hit] = search_memory(agent=world.coder, query=query, mode="keyword", record=False, as_of=as_of).hits
    assert now_hit.fact.pk == then_hit.fact.pk == fact.pk
    # A commitment (λ 14 days, k 2) is nearly forgotten after 30 days, fresh after one; decay
    # applies fully (issue 39), so the scores differ by the weights themselves.
    weight = lambda at: decay.weight_at("commitment", month_ago, at)  # noqa: E731
    assert weight(as_of) > 10 * weight(timezone.now())
    assert then_hit.score / now_hit.score == pytest.approx(weight(as_of) / weight(timezone.now()), rel=1e-3)


def test_a_none_grant_still_hides_a_domain_as_of_any_moment(world):
    hidden = FactFactory(domain=world.conventions, topic="q", content="The job queue broker password rotates weekly.")
    PolicyFactory(domain=world.conventions, rule="Never share the job queue broker password.")
    moment = _mark()
    AccessGrant.objects.create(role=world.coder_role, domain=world.conventions, level="none")
    embed_missing()
    for mode in MODES:
        assert hidden.pk not in _found(world, mode=mode, as_of=moment)
        assert hidden.pk in {
            h.fact.pk for h in search_memory(agent=world.planner, query=QUERY, mode=mode, as_of=moment).hits
        }
    preamble = build_preamble(agent=world.coder, task=TASK, as_of=moment)
    assert hidden.pk not in {f.pk for f in preamble.facts} and preamble.policies == []


def test_another_workspace_never_appears_as_of(world, timeline):
    from tests.factories import DomainFactory

    domain = DomainFactory(workspace=world.other_workspace, name="architecture")
    foreign = FactFactory(domain=domain, topic="q", content="The job queue broker is Kafka.")
    PolicyFactory(domain=domain, rule="Their rule.")
    embed_missing()
    moment = timezone.now()
    for mode in MODES:
        assert foreign.pk not in _found(world, mode=mode, as_of=moment, valid_at=moment)
    assert "Their rule." not in build_preamble(agent=world.coder, task=TASK, as_of=moment).text
    assert {h.fact.pk for h in search_memory(agent=world.foreign_agent, query=QUERY, as_of=moment).hits} == {foreign.pk}


def test_an_as_of_search_is_still_counted_as_todays_recall(world, timeline):
    result = search_memory(agent=world.coder, query=QUERY, mode="keyword", as_of=timeline.m1)
    assert [h.fact.pk for h in result.hits] == [timeline.a.pk] and result.episode_id is not None
    timeline.a.refresh_from_db()
    assert timeline.a.recall_count == 1  # a superseded fact, recalled today for a question about then


def test_the_current_path_adds_nothing_to_the_sql(world):
    current = voices.Scope(agent=world.coder)
    where, _ = voices._scope_where(current)
    assert "status_changed_at" not in where and "memory_auditevent" not in where and "created_at" not in where
    sql, _ = voices.lexical_sql(current, "job queue broker", limit=10)  # type: ignore[misc]
    assert "now() - memory_fact.last_mentioned_at" in sql and "memory_factmention" not in sql
    then = voices.Scope(agent=world.coder, as_of=timezone.now())
    assert "memory_auditevent" in voices._scope_where(then)[0]
    vector = [0.0] * 384
    assert "<=> %s::vector LIMIT" in voices.semantic_sql(current, vector, limit=5)[0]  # served by HNSW
    for scope in (then, voices.Scope(agent=world.coder, valid_at=timezone.now())):
        assert "+ 0" not in voices.semantic_sql(scope, vector, limit=5)[0]  # the graphs' candidates, not a scan
