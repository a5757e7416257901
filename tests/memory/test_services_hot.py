"""The hot tier: remember, consolidate (through propose_fact), merge, harmonize."""

import pytest

from memory.actors import Actor
from memory.errors import InvalidInput
from memory.models import AuditEvent, Conflict, Fact, HotMemory
from memory.services.facts import FactInput, propose_fact
from memory.services.hot import consolidate, harmonize, merge_near_duplicates, remember


def test_remember_keeps_a_session_entry(world):
    entry = remember(
        agent=world.coder, session_id="s1", content="The build needs Node 20.", domain=world.architecture, topic="build"
    )
    assert HotMemory.objects.get(pk=entry.pk).consolidated_at is None


def test_remember_refuses_empty_content_and_writes_nothing(world):
    with pytest.raises(InvalidInput):
        remember(agent=world.coder, session_id="s1", content="  ")
    assert HotMemory.objects.count() == 0


def test_consolidate_promotes_through_the_write_path_with_re_mention_and_conflict(world):
    propose_fact(
        domain=world.architecture,
        by=Actor.of_user(world.admin_user),
        data=FactInput(
            topic="build", content="The web app requires Node 20.", memory_type="procedure", veracity="human_stated"
        ),
    )
    remember(
        agent=world.coder,
        session_id="s1",
        content="Node 20 is required to build the web app.",
        domain=world.architecture,
        topic="build",
    )
    remember(
        agent=world.coder,
        session_id="s1",
        content="The web app requires Node 22.",
        domain=world.architecture,
        topic="build",
    )
    remember(
        agent=world.coder,
        session_id="s1",
        content="Deploy keys rotate every 90 days.",
        domain=world.architecture,
        topic="secrets",
    )
    remember(agent=world.coder, session_id="other", content="Not this session.", domain=world.architecture, topic="x")
    report = consolidate(agent=world.coder, session_id="s1")
    assert (report.entries, report.re_mentioned, report.promoted, report.conflicts) == (3, 1, 2, 1)
    assert HotMemory.objects.filter(session_id="s1", consolidated_at__isnull=True).count() == 0
    assert HotMemory.objects.filter(session_id="other", consolidated_at__isnull=True).count() == 1
    assert AuditEvent.objects.filter(verb="memory.consolidated").exists()


def test_consolidate_without_a_domain_uses_the_knowledge_domain(world):
    remember(agent=world.coder, session_id="s2", content="Staging data resets every Sunday.")
    consolidate(agent=world.coder)
    fact = Fact.objects.get(content="Staging data resets every Sunday.")
    assert fact.domain.label == "knowledge"


def test_merge_near_duplicates_keeps_the_stronger_fact(world):
    a = Fact.objects.create(
        workspace=world.workspace,
        domain=world.architecture,
        topic="logs",
        memory_type="convention",
        veracity="agent_inferred",
        confidence=0.7,
        content="Logs are retained for 30 days.",
    )
    b = Fact.objects.create(
        workspace=world.workspace,
        domain=world.architecture,
        topic="logs",
        memory_type="convention",
        veracity="human_stated",
        confidence=1.0,
        content="We keep logs for 30 days.",
    )
    assert merge_near_duplicates(domain_id=world.architecture.pk, topic="logs", by=Actor.of_agent(world.coder)) == 1
    a.refresh_from_db()
    b.refresh_from_db()
    assert a.superseded_by_id == b.pk
    assert b.mention_count == 2


def test_harmonize_resolves_contradictions_between_agents_only(world):
    common = dict(
        workspace=world.workspace,
        domain=world.architecture,
        topic="ci",
        memory_type="decision",
        veracity="agent_inferred",
        confidence=0.7,
    )
    mine = Fact.objects.create(
        content="The CI pipeline runs on GitHub Actions.", created_by_agent=world.coder, **common
    )
    theirs = Fact.objects.create(content="The CI pipeline runs on GitLab CI.", created_by_agent=world.planner, **common)
    Fact.objects.create(content="CI caches the pip download directory.", created_by_agent=world.planner, **common)
    report = harmonize(agent=world.coder)
    assert (report.conflicts_found, report.resolved) == (1, 1)
    conflict = Conflict.objects.get()
    assert conflict.detected_by == "harmonize"
    assert {conflict.winner_id, conflict.loser_id} == {mine.pk, theirs.pk}
    assert Fact.objects.filter(topic="ci").live().count() == 2
    again = harmonize(agent=world.coder)
    assert again.resolved == 0
