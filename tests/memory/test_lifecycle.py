"""The fact lifecycle (SPEC §7): challenge, revalidate, deprecate, archive; stale detection;
a promoted fact losing a conflict; challenged and deprecated facts leaving recall."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from memory.actors import Actor
from memory.errors import FactNotLive, InvalidInput, StateConflict
from memory.models import AuditEvent, DecayProfile, Fact
from memory.search.hybrid import search_memory
from memory.search.preamble import build_preamble
from memory.services.facts import FactInput, propose_fact
from memory.services.lifecycle import (
    archive_deprecated_fact,
    challenge_fact,
    deprecate_fact,
    detect_stale,
    revalidate_fact,
)
from tests.factories import CandidateFactory, FactFactory

BY = Actor.system("test")


def status_of(fact: Fact) -> str:
    return Fact.objects.get(pk=fact.pk).status


# --- Transitions -------------------------------------------------------------------------------------
def test_challenge_moves_an_active_fact_to_challenged_with_an_audit_event(world):
    fact = FactFactory(domain=world.architecture)
    challenge_fact(fact=fact, by=BY, reason="failed_replay", detail="replay #3")
    assert status_of(fact) == "challenged"
    event = AuditEvent.objects.get(verb="fact.challenged", target_id=fact.pk)
    assert event.detail == {"from": "active", "to": "challenged", "reason": "failed_replay", "detail": "replay #3"}


@pytest.mark.parametrize("status", ["challenged", "deprecated", "archived"])
def test_challenge_refuses_a_fact_that_is_not_active(world, status):
    fact = FactFactory(domain=world.architecture, status=status)
    with pytest.raises(StateConflict) as caught:
        challenge_fact(fact=fact, by=BY, reason="stale")
    assert caught.value.status == 409
    assert status_of(fact) == status
    assert not AuditEvent.objects.filter(target_id=fact.pk).exists()


def test_challenge_refuses_an_unknown_reason(world):
    fact = FactFactory(domain=world.architecture)
    with pytest.raises(InvalidInput):
        challenge_fact(fact=fact, by=BY, reason="vibes")
    assert status_of(fact) == "active"


def test_revalidate_returns_a_challenged_fact_to_active_and_stamps_it(world):
    fact = FactFactory(domain=world.architecture, status="challenged")
    revalidate_fact(fact=fact, by=BY, validated_by="human", note="checked")
    fact = Fact.objects.get(pk=fact.pk)
    assert fact.status == "active"
    assert fact.validated_by == "human"
    assert (timezone.now() - fact.last_validated_at).total_seconds() < 60
    assert AuditEvent.objects.get(verb="fact.revalidated", target_id=fact.pk).detail["from"] == "challenged"


@pytest.mark.parametrize("status", ["deprecated", "archived"])
def test_revalidate_refuses_a_retired_fact(world, status):
    fact = FactFactory(domain=world.architecture, status=status)
    with pytest.raises(StateConflict):
        revalidate_fact(fact=fact, by=BY, validated_by="replay")
    assert status_of(fact) == status


def test_revalidate_refuses_a_superseded_fact(world):
    winner = FactFactory(domain=world.architecture)
    loser = FactFactory(
        domain=world.architecture, status="challenged", superseded_by=winner, superseded_at=timezone.now()
    )
    with pytest.raises(FactNotLive):
        revalidate_fact(fact=loser, by=BY, validated_by="human")
    assert status_of(loser) == "challenged"


@pytest.mark.parametrize("status", ["active", "challenged"])
def test_deprecate_retires_an_active_or_challenged_fact(world, status):
    fact = FactFactory(domain=world.architecture, status=status)
    deprecate_fact(fact=fact, by=BY, reason="replaced by the new CI")
    assert status_of(fact) == "deprecated"
    assert (
        AuditEvent.objects.get(verb="fact.deprecated", target_id=fact.pk).detail["reason"] == "replaced by the new CI"
    )


@pytest.mark.parametrize("status", ["deprecated", "archived"])
def test_deprecate_refuses_a_fact_already_retired(world, status):
    fact = FactFactory(domain=world.architecture, status=status)
    with pytest.raises(StateConflict):
        deprecate_fact(fact=fact, by=BY)


def test_archive_follows_deprecation(world):
    fact = FactFactory(domain=world.architecture, status="deprecated")
    archive_deprecated_fact(fact=fact, by=BY)
    assert status_of(fact) == "archived"


@pytest.mark.parametrize("status", ["active", "challenged", "archived"])
def test_archive_refuses_a_fact_that_was_not_deprecated(world, status):
    fact = FactFactory(domain=world.architecture, status=status)
    with pytest.raises(StateConflict):
        archive_deprecated_fact(fact=fact, by=BY)
    assert status_of(fact) == status


# --- Recall -----------------------------------------------------------------------------------------
TASK = "Fix the flaky deploy pipeline for the billing service"


@pytest.mark.parametrize("retire", [challenge_fact, deprecate_fact])
def test_challenged_and_deprecated_facts_leave_recall(world, retire):
    fact = FactFactory(domain=world.architecture, topic="deploys", content="The deploy pipeline retries flaky steps.")
    assert [f.pk for f in build_preamble(agent=world.coder, task=TASK).facts] == [fact.pk]
    kwargs = {"reason": "stale"} if retire is challenge_fact else {}
    retire(fact=fact, by=BY, **kwargs)
    assert not Fact.objects.recallable().filter(pk=fact.pk).exists()
    assert build_preamble(agent=world.coder, task=TASK).facts == []
    hits = search_memory(agent=world.coder, query="deploy pipeline retries flaky", mode="keyword").hits
    assert fact.pk not in [hit.fact.pk for hit in hits]


# --- Conflicts --------------------------------------------------------------------------------------------
def test_a_promoted_fact_that_loses_a_conflict_is_challenged(world):
    candidate = CandidateFactory(domain=world.architecture, promotion_status="active")
    promoted = FactFactory(
        domain=world.architecture,
        topic="deploys",
        content="Production deploys happen on Tuesdays.",
        origin="promotion",
        origin_candidate=candidate,
    )
    result = propose_fact(
        domain=world.architecture,
        data=FactInput(
            topic="deploys",
            content="Production deploys happen on Fridays.",
            memory_type="decision",
            veracity="human_stated",
        ),
        by=Actor.of_user(world.admin_user),  # a person: agents may not state human_stated
    )
    assert result.outcome == "conflict_won"
    loser = Fact.objects.get(pk=promoted.pk)
    assert loser.superseded_by_id == result.fact.pk
    assert loser.status == "challenged"
    event = AuditEvent.objects.get(verb="fact.challenged", target_id=promoted.pk)
    assert event.detail["reason"] == "conflict"
    assert Fact.objects.get(pk=result.fact.pk).status == "active"


def test_a_promoted_newcomer_that_loses_a_conflict_is_stored_challenged(world):
    candidate = CandidateFactory(domain=world.architecture, promotion_status="active")
    FactFactory(
        domain=world.architecture,
        topic="deploys",
        content="Production deploys happen on Tuesdays.",
        veracity="human_stated",
    )
    result = propose_fact(
        domain=world.architecture,
        data=FactInput(
            topic="deploys",
            content="Production deploys happen on Fridays.",
            memory_type="decision",
            extra={"origin": "promotion", "origin_candidate": candidate},
        ),
        by=Actor.of_agent(world.coder),
    )
    assert result.outcome == "conflict_lost"
    assert result.fact.status == "challenged"
    assert Fact.objects.get(pk=result.fact.pk).status == "challenged"


def test_an_ordinary_fact_that_loses_a_conflict_keeps_its_status(world):
    plain = FactFactory(domain=world.architecture, topic="deploys", content="Production deploys happen on Tuesdays.")
    result = propose_fact(
        domain=world.architecture,
        data=FactInput(
            topic="deploys",
            content="Production deploys happen on Fridays.",
            memory_type="decision",
            veracity="human_stated",
        ),
        by=Actor.of_user(world.admin_user),  # a person: agents may not state human_stated
    )
    assert result.outcome == "conflict_won"
    assert status_of(plain) == "active"
    assert not AuditEvent.objects.filter(verb="fact.challenged").exists()


# --- Stale detection ---------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def default_decay_profiles(db):
    # The default profiles come from a data migration; a transactional test run earlier on the same
    # worker truncates every table, so put them back (update_or_create: a no-op when present).
    import importlib

    from django.apps import apps

    importlib.import_module("memory.migrations.0002_default_decay_profiles").forwards(apps, None)


def _aged(
    world,
    memory_type: str,
    *,
    created_days: int,
    validated_days: int | None = None,
    mentioned_days: int | None = None,
    **kw,
) -> Fact:
    """A lifecycle-managed (promoted) fact created, validated and last mentioned that many days
    ago (never re-mentioned unless `mentioned_days` is given)."""
    now = timezone.now()
    kw.setdefault("origin", "promotion")
    return FactFactory(
        domain=world.architecture,
        memory_type=memory_type,
        created_at=now - timedelta(days=created_days),
        last_mentioned_at=now - timedelta(days=created_days if mentioned_days is None else mentioned_days),
        last_validated_at=now - timedelta(days=validated_days) if validated_days is not None else None,
        **kw,
    )


def test_detect_stale_challenges_exactly_the_overdue_facts(world):
    windows = dict(DecayProfile.objects.values_list("memory_type", "stale_after_days"))
    decision, observation = windows["decision"], windows["observation"]
    overdue = [
        _aged(world, "decision", created_days=decision + 5),  # never validated, created long ago
        _aged(world, "decision", created_days=decision * 3, validated_days=decision + 1),  # validated too long ago
        _aged(world, "observation", created_days=observation + 1),
    ]
    fresh = [
        _aged(world, "decision", created_days=decision * 3, validated_days=decision - 5),  # revalidated in time
        _aged(world, "decision", created_days=decision - 5),
        _aged(world, "observation", created_days=observation - 1),
    ]
    winner = FactFactory(domain=world.architecture)
    left_alone = [
        _aged(world, "decision", created_days=decision * 2, status="deprecated"),
        _aged(world, "decision", created_days=decision * 2, status="archived"),
        _aged(world, "decision", created_days=decision * 2, superseded_by=winner, superseded_at=timezone.now()),
    ]
    already = _aged(world, "decision", created_days=decision * 2, status="challenged")

    counts = detect_stale()

    assert counts == {"decision": 2, "observation": 1}
    assert {f.pk for f in Fact.objects.filter(status="challenged")} == {f.pk for f in overdue} | {already.pk}
    assert all(status_of(f) == "active" for f in fresh)
    assert [status_of(f) for f in left_alone] == ["deprecated", "archived", "active"]
    events = AuditEvent.objects.filter(verb="fact.challenged")
    assert {e.target_id for e in events} == {f.pk for f in overdue}
    assert all(e.detail["reason"] == "stale" and e.actor_label == "system:detect_stale" for e in events)
    assert detect_stale() == {}  # idempotent


def test_detect_stale_follows_the_window_an_admin_set(world):
    DecayProfile.objects.filter(memory_type="procedure").update(stale_after_days=3)
    fact = _aged(world, "procedure", created_days=4)
    assert detect_stale() == {"procedure": 1}
    assert status_of(fact) == "challenged"


def test_detect_stale_command_prints_how_many(world):
    _aged(world, "observation", created_days=DecayProfile.objects.get(memory_type="observation").stale_after_days + 2)
    out = io.StringIO()
    call_command("detect_stale", stdout=out)
    assert out.getvalue().strip() == "Challenged 1 stale fact(s): observation 1."
    out = io.StringIO()
    call_command("detect_stale", stdout=out)
    assert out.getvalue().strip() == "Challenged 0 stale fact(s)."


def test_detect_stale_runs_as_a_daily_beat_task(world):
    from config.celery import app
    from memory.tasks import detect_stale_facts

    entry = app.conf.beat_schedule["detect-stale-facts"]
    assert entry["task"] == "memory.tasks.detect_stale_facts" == detect_stale_facts.name
    assert entry["schedule"].hour == {3}
    fact = _aged(
        world, "observation", created_days=DecayProfile.objects.get(memory_type="observation").stale_after_days + 2
    )
    assert detect_stale_facts.apply().get() == {"observation": 1}
    assert status_of(fact) == "challenged"


# --- Stale detection watches lifecycle-managed facts only (issue 20) ------------------------------------------
def test_detect_stale_challenges_an_old_promoted_fact_but_not_an_old_plain_agent_fact(world):
    days = DecayProfile.objects.get(memory_type="decision").stale_after_days + 30
    candidate = CandidateFactory(domain=world.architecture, promotion_status="active")
    promoted = _aged(world, "decision", created_days=days)  # origin "promotion"
    from_candidate = _aged(world, "decision", created_days=days, origin="agent", origin_candidate=candidate)
    with_probe = _aged(world, "decision", created_days=days, origin="agent", verification="make contract-check")
    plain_agent = _aged(world, "decision", created_days=days, origin="agent")
    plain_human = _aged(world, "decision", created_days=days, origin="human", veracity="human_stated")

    assert detect_stale() == {"decision": 3}

    assert [status_of(f) for f in (promoted, from_candidate, with_probe)] == ["challenged"] * 3
    assert [status_of(f) for f in (plain_agent, plain_human)] == ["active", "active"]
    assert not AuditEvent.objects.filter(
        verb="fact.challenged", target_id__in=[plain_agent.pk, plain_human.pk]
    ).exists()


def test_detect_stale_spares_a_promoted_fact_re_mentioned_recently(world):
    """Fact 52 of the issue: created and validated long ago, stated again seconds before the run."""
    days = DecayProfile.objects.get(memory_type="decision").stale_after_days + 30
    fact = _aged(
        world, "decision", created_days=days * 2, validated_days=days, content="Production deploys happen on Tuesdays."
    )
    untouched = _aged(world, "decision", created_days=days * 2, validated_days=days)
    result = propose_fact(
        domain=world.architecture,
        data=FactInput(topic=fact.topic, content="Production deploys happen on Tuesdays.", memory_type="decision"),
        by=Actor.of_agent(world.coder),
    )
    assert result.outcome == "re_mentioned" and result.fact.pk == fact.pk

    assert detect_stale() == {"decision": 1}

    assert status_of(fact) == "active"
    assert status_of(untouched) == "challenged"


def test_detect_stale_measures_from_the_latest_of_validation_mention_and_creation(world):
    window = DecayProfile.objects.get(memory_type="decision").stale_after_days
    old, recent = window + 10, window - 10
    spared = [
        _aged(world, "decision", created_days=old, mentioned_days=recent),  # re-mentioned in time
        _aged(world, "decision", created_days=old, validated_days=recent),  # revalidated in time
        _aged(world, "decision", created_days=recent),  # young
    ]
    overdue = _aged(world, "decision", created_days=old * 2, validated_days=old, mentioned_days=old + 1)

    assert detect_stale() == {"decision": 1}

    assert [status_of(f) for f in spared] == ["active"] * 3
    event = AuditEvent.objects.get(verb="fact.challenged", target_id=overdue.pk)
    assert event.detail["reason"] == "stale"
    assert event.detail["detail"].startswith(f"not validated or mentioned for {window} days (last validated ")
    assert "last mentioned " in event.detail["detail"]
