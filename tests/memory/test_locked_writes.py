"""Merge, harmonize and meeting decisions write what they read through the one locking helper
(issue 36, memory.services.locking): planned outside any transaction, then the domain locked and
the plan re-checked. A concurrent writer commits between the plan and the locks (on its own thread
and connection); a stale plan is planned again, and a pair of facts the plan never read is read by
the real pair model outside the transaction (NeedsInference), then the same plan written again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.utils import timezone

from memory import pair_model
from memory.actors import Actor
from memory.embeddings import embed_meanings
from memory.models import Conflict, Fact, MemoryDomain
from memory.services import decisions as decisions_service
from memory.services import hot, locking
from memory.services.decisions import DECISIONS_DOMAIN, record_meeting_decisions
from memory.services.hot import harmonize, merge_near_duplicates
from tests.factories import WorkspaceFactory
from tests.races import race

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.second_reading]

YESTERDAY = timezone.localdate() - timedelta(days=1)


@dataclass
class Steps:
    """How often write_planned planned, and ran the locked writing step."""

    plans: int = 0
    writes: int = 0


def between_plan_and_lock(monkeypatch, module, change) -> Steps:
    """Wrap the first call `module` makes to write_planned so that, once its first plan is made and
    before any lock is taken, `change` runs to completion on another thread (its own connection,
    committed); count its plans and writing steps. Later calls (`change`'s own among them) run
    unwrapped."""
    steps = Steps()
    real = locking.write_planned
    calls = []

    def write_planned(plan, write, **options):
        calls.append(plan)
        if len(calls) > 1:
            return real(plan, write, **options)

        def planning(hint):
            planned = plan(hint)
            steps.plans += 1
            if steps.plans == 1:
                _results, errors = race(change)
                assert not errors, errors
            return planned

        def writing(planned):
            steps.writes += 1
            return write(planned)

        return real(planning, writing, **options)

    monkeypatch.setattr(module, "write_planned", write_planned)
    return steps


def fact(world, content: str, *, agent, topic: str = "ops", embedded: bool = True, **extra) -> Fact:
    """A live fact of `architecture` stored as an import would (no merge, no comparison); with
    `embedded`, carrying both vectors the write path stores."""
    vectors = {}
    if embedded:
        (meaning,) = embed_meanings([(topic, content)])
        vectors = {"embedding": meaning.stored, "content_embedding": meaning.content, "embedded_at": timezone.now()}
    return Fact.objects.create(
        workspace=world.workspace,
        domain=world.architecture,
        topic=topic,
        content=content,
        memory_type="convention",
        confidence=0.7,
        created_by_agent=agent,
        **vectors,
        **extra,
    )


def unread(old: str, new: str) -> bool:
    """Whether the pair model has no cached reading of (old, new): nothing read it yet."""
    return pair_model.bounded([(old, new)])[0] not in pair_model._cache


# --- merge_near_duplicates ----------------------------------------------------------------------


def test_merge_plans_again_when_a_fact_without_a_vector_arrives_before_the_lock(world, monkeypatch):
    kept = fact(world, "We keep build logs for 30 days.", agent=world.coder)
    fact(world, "The staging cluster runs in eu-west-1.", agent=world.coder)
    late = {}

    def import_a_restatement():  # only a plan embeds: under the lock it could not be compared
        late["fact"] = fact(world, "Build logs are retained for 30 days.", agent=world.planner, embedded=False)

    steps = between_plan_and_lock(monkeypatch, hot, import_a_restatement)
    assert merge_near_duplicates(domain_id=world.architecture.pk, by=Actor.of_agent(world.coder)) == 1
    assert steps.plans == 2
    assert Fact.objects.get(pk=late["fact"].pk).superseded_by_id == kept.pk


def test_merge_reads_a_pair_written_since_its_plan_outside_the_transaction(world, monkeypatch):
    old = "The API gateway times out after 30 seconds."
    new = "Requests to the API gateway time out after thirty seconds."
    kept = fact(world, old, agent=world.coder, veracity="human_stated")
    assert unread(old, new)
    late = {}

    def write_a_restatement():
        late["fact"] = fact(world, new, agent=world.planner)

    steps = between_plan_and_lock(monkeypatch, hot, write_a_restatement)
    assert merge_near_duplicates(domain_id=world.architecture.pk, by=Actor.of_agent(world.coder)) == 1
    # the locked step met the unread pair, rolled back; it was read outside and the same plan written
    assert (steps.plans, steps.writes) == (1, 2)
    assert not unread(old, new)
    assert Fact.objects.get(pk=late["fact"].pk).superseded_by_id == kept.pk


# --- harmonize ----------------------------------------------------------------------------------


def test_harmonize_plans_again_when_a_fact_without_a_vector_arrives_before_the_lock(world, monkeypatch):
    old = fact(world, "The web app requires Node 20.", agent=world.coder, topic="node")
    fact(world, "The staging cluster runs in eu-west-1.", agent=world.planner)
    late = {}

    def import_a_contradiction():
        late["fact"] = fact(world, "The web app requires Node 22.", agent=world.planner, topic="node", embedded=False)

    steps = between_plan_and_lock(monkeypatch, hot, import_a_contradiction)
    report = harmonize(agent=world.coder, domain=world.architecture)
    assert steps.plans == 2
    assert (report.topics_checked, report.conflicts_found, report.resolved) == (2, 1, 1)
    conflict = Conflict.objects.get(detected_by="harmonize")
    assert {conflict.winner_id, conflict.loser_id} == {old.pk, late["fact"].pk}


def test_harmonize_reads_a_pair_written_since_its_plan_outside_the_transaction(world, monkeypatch):
    old, new = "Releases of the mobile app ship on Tuesdays.", "We ship mobile app releases on Thursdays."
    fact(world, old, agent=world.coder, topic="releases")
    fact(world, "The staging cluster runs in eu-west-1.", agent=world.planner)
    assert unread(old, new)

    def write_a_contradiction():
        fact(world, new, agent=world.planner, topic="releases")

    steps = between_plan_and_lock(monkeypatch, hot, write_a_contradiction)
    report = harmonize(agent=world.coder, domain=world.architecture)
    assert (steps.plans, steps.writes) == (1, 2)
    assert not unread(old, new)
    # counted once, though the locked step ran twice
    assert (report.topics_checked, report.conflicts_found, report.resolved) == (2, 1, 1)
    assert Conflict.objects.filter(detected_by="harmonize").count() == 1


# --- record_meeting_decisions -------------------------------------------------------------------


def record(world, decision: str, *, topic: str = "", title: str = "Release sync"):
    return record_meeting_decisions(
        workspace=world.workspace,
        by=Actor.of_user(world.admin_user),
        title=title,
        day=YESTERDAY,
        decisions=[decision],
        topic=topic,
    )


def test_a_first_meeting_plans_again_when_another_creates_the_decisions_domain_before_the_lock(world, monkeypatch):
    earlier = {}

    def another_meeting():
        earlier["record"] = record(world, "Releases ship on Thursdays.", topic="release-days", title="Other sync")

    steps = between_plan_and_lock(monkeypatch, decisions_service, another_meeting)
    result = record(world, "We ship releases on Tuesdays.").results[0]
    assert steps.plans == 2  # planned without a domain, then against the one the other meeting made
    assert MemoryDomain.objects.filter(workspace=world.workspace, name=DECISIONS_DOMAIN).count() == 1
    # the second plan chose the topic of the closest decision, so the two are read as one question
    assert result.fact.topic == "release-days"
    assert result.compared_with == earlier["record"].results[0].fact.pk


def test_a_meeting_plans_again_when_a_closer_decision_is_written_before_the_lock(world, monkeypatch):
    record(world, "The billing service moves to PostgreSQL 16.", topic="billing")
    earlier = {}

    def another_meeting():
        earlier["record"] = record(world, "Releases ship on Fridays.", topic="release-days", title="Other sync")

    steps = between_plan_and_lock(monkeypatch, decisions_service, another_meeting)
    result = record(world, "We ship releases on Mondays.").results[0]
    assert steps.plans == 2  # the topic chosen by meaning moved under the lock
    assert result.fact.topic == "release-days"
    assert result.compared_with == earlier["record"].results[0].fact.pk


def test_two_first_meetings_at_once_write_into_one_decisions_domain():
    for round_ in range(3):  # whichever creates the domain first, the other writes into it
        workspace = WorkspaceFactory(slug=f"race-{round_}")

        def meeting(text, workspace=workspace):
            by = Actor.system("meeting-test")
            return record_meeting_decisions(workspace=workspace, by=by, title="Sync", day=YESTERDAY, decisions=[text])

        results, errors = race(
            lambda: meeting("The billing service moves to PostgreSQL 16."),
            lambda: meeting("Design reviews happen on Wednesdays."),
        )
        assert not errors, errors
        domain = MemoryDomain.objects.get(workspace=workspace, name=DECISIONS_DOMAIN)
        assert {r.domain.pk for r in results} == {domain.pk}
        assert Fact.objects.filter(domain=domain).live().count() == 2
