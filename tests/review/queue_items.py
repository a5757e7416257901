"""Queue items built through the services, for the queue list's view and browser tests."""

from __future__ import annotations

import itertools
from typing import Any

from memory.actors import Actor
from memory.models import Agent, Candidate, Conflict, Fact, MemoryDomain
from memory.services.facts import FactInput, propose_fact
from memory.services.lifecycle import challenge_fact
from memory.services.promotion import parse_candidate_document, submit_candidate
from review.demo import DEMO_CANDIDATE

_SEQUENCE = itertools.count(1)
DOC: dict[str, Any] = dict(DEMO_CANDIDATE)


def candidate(agent: Agent, domain: MemoryDomain, text: str, *, topic: str | None = None) -> Candidate:
    """A candidate needing a person's approval, submitted by `agent`, on its own topic."""
    topic = topic or f"topic-{next(_SEQUENCE)}"
    document = parse_candidate_document(
        {**DOC, "candidate_id": f"c-{topic}", "topic": topic, "domain": domain.name, "proposed_memory": text}
    )
    created, _ = submit_candidate(domain=domain, topic=topic, document=document, by=Actor.of_agent(agent))
    return created


def fact(agent: Agent, domain: MemoryDomain, topic: str, text: str) -> Fact:
    result = propose_fact(
        domain=domain, by=Actor.of_agent(agent), data=FactInput(topic=topic, content=text, memory_type="convention")
    )
    return result.fact


def challenged(agent: Agent, domain: MemoryDomain, topic: str, text: str) -> Fact:
    """A fact written by `agent`, then challenged: a queue item to revalidate or deprecate."""
    written = fact(agent, domain, topic, text)
    return challenge_fact(fact=written, by=Actor.system("test"), reason="stale")


def possible(agent: Agent, domain: MemoryDomain, topic: str, old: str, new: str) -> Conflict:
    """An open possible conflict between two live facts (the classifier was unsure)."""
    existing = fact(agent, domain, f"{topic}-old", old)
    proposed = fact(agent, domain, f"{topic}-new", new)
    # the write path may have asked about the pair itself (issue 34: across topics of a domain)
    asked = Conflict.objects.filter(existing=existing, proposed=proposed, status=Conflict.Status.OPEN).first()
    if asked is not None:
        return asked
    return Conflict.objects.create(
        workspace=domain.workspace,
        domain=domain,
        topic=topic,
        existing=existing,
        proposed=proposed,
        status=Conflict.Status.OPEN,
        resolution="",
        rule="",
        similarity=0.8,
        reason="unsure",
    )
