"""propose_fact / supersede_fact (SPEC §3) against real PostgreSQL and the real model."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.actors import Actor
from memory.errors import FactNotLive, InvalidInput
from memory.models import AuditEvent, Conflict, EpisodeFact, Fact
from memory.selectors import conflicts_of, fact_history
from memory.services.facts import FactInput, create_episode, propose_fact, reinforce, supersede_fact


def propose(world, content, *, topic="deploys", veracity="agent_inferred", agent=None, domain=None, **extra):
    """As the coder agent; human_stated as a person (agents may not state it, issue 13)."""
    by = Actor.of_user(world.admin_user) if veracity == "human_stated" and agent is None else None
    return propose_fact(
        domain=domain or world.architecture,
        data=FactInput(topic=topic, content=content, memory_type="convention", veracity=veracity, **extra),
        by=by or Actor.of_agent(agent or world.coder),
    )


def test_a_new_fact_is_created_with_the_confidence_of_its_veracity(world):
    for veracity, expected, content in [
        ("human_stated", 1.0, "The deploy checklist lives in the wiki."),
        ("agent_inferred", 0.7, "Grafana dashboards are provisioned from the ops repository."),
        ("imported", 0.6, "Invoices are numbered per calendar year."),
        ("tool_generated", 0.5, "The nightly backup job writes to the cold-storage bucket."),
    ]:
        result = propose(world, content, topic=f"t-{veracity}", veracity=veracity)
        assert result.outcome == "created"
        assert result.fact.confidence == expected
        assert result.fact.embedding is not None and result.fact.content_embedding is not None


def test_re_mention_raises_confidence_by_the_formula_and_restarts_decay(world):
    first = propose(world, "Production deploys happen on Tuesdays.").fact
    Fact.objects.filter(pk=first.pk).update(last_mentioned_at=timezone.now() - timedelta(days=100))
    again = propose(world, "Deploys to production happen on Tuesdays.", veracity="tool_generated")
    assert again.outcome == "re_mentioned"
    assert again.fact.pk == first.pk
    fact = Fact.objects.get(pk=first.pk)
    assert fact.mention_count == 2
    assert fact.confidence == pytest.approx(0.7 + (1 - 0.7) * 0.3 * 0.5)
    assert (timezone.now() - fact.last_mentioned_at).total_seconds() < 60
    assert Fact.objects.filter(topic="deploys").count() == 1


def test_exact_restatement_with_other_case_and_spacing_is_a_re_mention(world):
    propose(world, "Logs are retained for 30 days.")
    result = propose(world, "  logs are RETAINED for 30 days ")
    assert result.outcome == "re_mentioned"


def test_reinforce_formula():
    assert reinforce(0.5, "human_stated") == pytest.approx(0.5 + 0.5 * 0.3 * 1.0)
    assert reinforce(1.0, "agent_inferred") == 1.0


def test_human_stated_fact_beats_an_agent_inferred_contradiction_and_the_conflict_says_why(world):
    human = propose(world, "Production deploys happen on Tuesdays.", veracity="human_stated").fact
    result = propose(world, "Production deploys happen on Fridays.")
    assert result.outcome == "conflict_lost"
    new = Fact.objects.get(pk=result.fact.pk)
    assert new.superseded_by_id == human.pk  # stored, already superseded
    assert "veracity" in new.supersede_reason
    conflict = Conflict.objects.get(pk=result.conflict.pk)
    assert (conflict.winner_id, conflict.loser_id, conflict.rule) == (human.pk, new.pk, "veracity")
    assert 0.54 <= conflict.similarity < 1.0
    assert Fact.objects.get(pk=human.pk).superseded_by_id is None


def test_a_stronger_newcomer_wins_and_supersedes_the_old_fact(world):
    old = propose(world, "The web app requires Node 20.", topic="node").fact
    result = propose(world, "The web app requires Node 22.", topic="node", veracity="human_stated")
    assert result.outcome == "conflict_won"
    assert Fact.objects.get(pk=old.pk).superseded_by_id == result.fact.pk
    assert result.conflict.rule == "veracity"


def test_equal_veracity_the_later_statement_wins_however_often_the_earlier_was_repeated(world):
    old = propose(world, "Logs are retained for 30 days.", topic="logs").fact
    Fact.objects.filter(pk=old.pk).update(confidence=0.9)  # re-mentioned often
    result = propose(world, "Logs are retained for 90 days.", topic="logs")
    assert (result.outcome, result.conflict.rule) == ("conflict_won", "update")
    assert Fact.objects.get(pk=old.pk).superseded_by_id == result.fact.pk
    # an imported statement older than the live one does not replace it
    live = result.fact
    earlier = live.observed_at - timedelta(days=3)
    result = propose(world, "Logs are retained for 7 days.", topic="logs", observed_at=earlier)
    assert (result.outcome, result.conflict.rule) == ("conflict_lost", "update")
    assert Fact.objects.get(pk=live.pk).superseded_by_id is None


def test_statements_of_the_same_moment_fall_back_to_confidence_then_the_proposal(world):
    moment = timezone.now() - timedelta(hours=1)
    old = propose(world, "Logs are retained for 30 days.", topic="logs", observed_at=moment).fact
    Fact.objects.filter(pk=old.pk).update(confidence=0.9)
    result = propose(world, "Logs are retained for 90 days.", topic="logs", observed_at=moment)
    assert (result.outcome, result.conflict.rule) == ("conflict_lost", "confidence")
    Fact.objects.filter(topic="logs").update(confidence=0.7)
    live = Fact.objects.get(topic="logs", superseded_by__isnull=True)
    result = propose(world, "Logs are retained for 7 days.", topic="logs", observed_at=moment)
    assert (result.outcome, result.conflict.rule) == ("conflict_won", "recency")
    assert Fact.objects.get(pk=live.pk).superseded_by_id == result.fact.pk


def test_an_older_observation_loses_to_the_later_statement(world):
    propose(world, "The staging cluster runs in eu-west-1.", topic="staging")
    result = propose(
        world,
        "The staging cluster runs in us-east-1.",
        topic="staging",
        observed_at=timezone.now() - timedelta(days=400),
    )
    assert result.outcome == "conflict_lost"
    assert result.conflict.rule == "update"  # the later statement stands


def test_far_apart_facts_on_one_topic_both_stay_live(world):
    propose(world, "Production deploys happen on Tuesdays.")
    result = propose(world, "The deploy script needs the AWS_PROFILE variable set.")
    assert result.outcome == "created"
    assert Fact.objects.filter(topic="deploys").live().count() == 2


def test_other_domains_are_never_compared_and_other_topics_of_the_domain_are(world):
    propose(world, "Production deploys happen on Tuesdays.")
    assert propose(world, "Production deploys happen on Fridays.", domain=world.conventions).outcome == "created"
    # issue 34: a contradiction under another topic of the same domain is asked about
    assert propose(world, "Production deploys happen on Fridays.", topic="release").outcome == "possible_conflict"


def test_supersede_keeps_the_old_row_and_refuses_a_fact_already_superseded(world, django_capture_on_commit_callbacks):
    old = propose(world, "Code review needs two approvals.", topic="review").fact
    with django_capture_on_commit_callbacks(execute=True):
        new = supersede_fact(
            fact=old, by=Actor.of_agent(world.coder), content="Code review needs one approval.", reason="team grew"
        )
    new.refresh_from_db()
    old.refresh_from_db()
    assert old.content == "Code review needs two approvals."
    assert (old.superseded_by_id, old.supersede_reason) == (new.pk, "team grew")
    assert new.embedding is not None  # embedded after commit (inline mode)
    with pytest.raises(FactNotLive):
        supersede_fact(fact=old, by=Actor.of_agent(world.coder), content="Code review needs three approvals.")


def test_a_person_superseding_states_it_as_human(world):
    old = propose(world, "Code review needs two approvals.", topic="review").fact
    new = supersede_fact(fact=old, by=Actor.of_user(world.admin_user), content="Code review needs one approval.")
    assert (new.veracity, new.human_edited, new.confidence) == ("human_stated", True, 1.0)


def test_history_shows_the_whole_chain_both_ways_with_conflicts(world):
    a = propose(world, "Code review needs two approvals.", topic="review").fact
    b = supersede_fact(fact=a, by=Actor.of_agent(world.coder), content="Code review needs one approval.")
    c = supersede_fact(
        fact=b, by=Actor.of_user(world.admin_user), content="Code review needs two approvals from owners."
    )
    lost = propose(world, "Code review needs three approvals from owners.", topic="review")
    assert lost.outcome == "conflict_lost"
    for member in (a, b, c):
        chain = [f.pk for f in fact_history(member)]
        assert chain[:3] == [a.pk, b.pk, c.pk]
        assert lost.fact.pk in chain
    assert [x.pk for x in conflicts_of([c.pk])] == [lost.conflict.pk]


def test_every_write_leaves_an_audit_event(world):
    before = AuditEvent.objects.count()
    first = propose(world, "Production deploys happen on Tuesdays.", veracity="human_stated").fact
    propose(world, "Deploys to production happen on Tuesdays.")
    propose(world, "Production deploys happen on Fridays.")
    supersede_fact(fact=first, by=Actor.of_user(world.admin_user), content="Production deploys happen on Wednesdays.")
    verbs = list(AuditEvent.objects.order_by("pk").values_list("verb", flat=True)[before:])
    assert verbs == ["fact.created", "fact.re_mentioned", "fact.conflict", "fact.superseded"]


def test_bad_fields_raise_and_write_nothing(world):
    before = (Fact.objects.count(), AuditEvent.objects.count())
    for data in [
        FactInput(topic="", content="x", memory_type="decision"),
        FactInput(topic="t", content="", memory_type="decision"),
        FactInput(topic="t", content="x" * 20_000, memory_type="decision"),
        FactInput(topic="t", content="x", memory_type="rumour"),
        FactInput(topic="t", content="x", memory_type="decision", veracity="divine"),
        FactInput(topic="t", content="x", memory_type="decision", source_observation_ids=[999_999]),
        FactInput(topic="t", content="x", memory_type="decision", episode_id=999_999),
    ]:
        with pytest.raises(InvalidInput):
            propose_fact(domain=world.architecture, data=data, by=Actor.of_agent(world.coder))
    assert (Fact.objects.count(), AuditEvent.objects.count()) == before


def test_sources_and_episodes_are_linked(world):
    from memory.models import Observation

    obs = Observation.objects.create(workspace=world.workspace, agent=world.coder, text="saw the deploy log")
    episode = create_episode(workspace_id=world.workspace.pk, by=Actor.of_agent(world.coder), kind="session")
    fact = propose(world, "Deploys take 12 minutes.", source_observation_ids=[obs.pk], episode_id=episode.pk).fact
    assert list(fact.source_observations.all()) == [obs]
    assert EpisodeFact.objects.filter(episode=episode, fact=fact, relation="written").exists()


def test_another_agents_observation_cannot_be_cited(world):
    from memory.models import Observation

    obs = Observation.objects.create(workspace=world.workspace, agent=world.coder2, text="private")
    with pytest.raises(InvalidInput):
        propose(world, "Deploys take 12 minutes.", source_observation_ids=[obs.pk])
