"""A knowledge graph of ~160 facts over four domains, for the graph's JSON and browser tests
(issue 37: at ~150 facts the graph was unlabeled dots). Facts are stored directly: the graph draws
rows, no embedding or classifier decides anything here."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from memory.models import Episode, EpisodeFact, Fact, MemoryDomain
from tests.conftest import World
from tests.factories import DomainFactory, FactFactory

SUBJECTS = ("billing", "search", "ingest", "auth", "web", "mailer", "reports", "exports", "imports", "ledger")


@dataclass
class GraphWorld:
    domains: list[MemoryDomain]
    facts: list[Fact]
    old: Fact  # superseded by `new`: an edge between two facts of one domain
    new: Fact
    episode: Episode  # wrote `new`


def build(world: World, per_domain: int = 40) -> GraphWorld:
    """`per_domain` facts in each of the world's three domains and one more (operations)."""
    operations = DomainFactory(workspace=world.workspace, name="operations")
    domains = [world.architecture, world.conventions, world.repo_context, operations]
    facts = [
        FactFactory(
            domain=domain,
            topic=f"{domain.name}-{i}",
            content=f"The {SUBJECTS[i % len(SUBJECTS)]} service ({domain.name} note {i}) deploys through "
            "the staged pipeline and reports to the on-call channel every morning.",
        )
        for domain in domains
        for i in range(per_domain)
    ]
    old, new = facts[0], facts[1]
    Fact.objects.filter(pk=old.pk).update(superseded_by=new, superseded_at=timezone.now())
    old.refresh_from_db()
    episode = Episode.objects.create(workspace=world.workspace, kind="session", title="a long working session")
    EpisodeFact.objects.create(episode=episode, fact=new, relation="written")
    return GraphWorld(domains, facts, old, new, episode)
