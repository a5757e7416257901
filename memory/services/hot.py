"""The hot tier (SPEC §4): session entries (`remember`), their consolidation into facts through
the normal write path, near-duplicate merging, and harmonisation of diverging facts.

consolidate and harmonize run as Celery tasks (inline in embedded mode) when an agent or an
admin asks, never on a timer; each reports what it did in its return value and an audit event.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import combinations
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from memory.actors import Actor
from memory.audit import record_event
from memory.embeddings import cosine
from memory.errors import InvalidInput
from memory.models import VERACITY_WEIGHT, Conflict, Fact, HotMemory, MemoryDomain
from memory.services.facts import (
    FactInput,
    Outcome,
    decide_winner,
    embed_live_without_vectors,
    lock_topic,
    propose_fact,
    reinforce,
)
from memory.services.tenancy import create_domain
from memory.similarity import PairKind, classify_pair

if TYPE_CHECKING:
    from agents.models import Agent

DEFAULT_DOMAIN = "knowledge"
DEFAULT_TOPIC = "session-notes"
HOT_MAX_CHARS = 4000


@dataclass
class ConsolidationReport:
    promoted: int = 0
    re_mentioned: int = 0
    conflicts: int = 0
    merged: int = 0
    entries: int = 0


@dataclass
class HarmonizationReport:
    topics_checked: int = 0
    conflicts_found: int = 0
    resolved: int = 0


@transaction.atomic
def remember(
    *, agent: Agent, session_id: str, content: str, domain: MemoryDomain | None = None, topic: str = ""
) -> HotMemory:
    """Keep a session-scoped entry until it is consolidated."""
    errors = {}
    if not session_id.strip() or len(session_id) > 200:
        errors["session_id"] = ["1–200 characters."]
    if not content.strip() or len(content) > HOT_MAX_CHARS:
        errors["content"] = [f"1–{HOT_MAX_CHARS} characters."]
    if len(topic) > 200:
        errors["topic"] = ["At most 200 characters."]
    if errors:
        raise InvalidInput("The entry has invalid fields; see `fields`.", fields=errors)
    entry = HotMemory.objects.create(
        workspace_id=agent.workspace_id, agent=agent, session_id=session_id, content=content, domain=domain, topic=topic
    )
    record_event(
        actor=Actor.of_agent(agent),
        verb="hot.remembered",
        workspace_id=agent.workspace_id,
        target=entry,
        detail={"session_id": session_id},
    )
    return entry


def consolidate(*, agent: Agent, session_id: str | None = None) -> ConsolidationReport:
    """Promote the agent's pending entries to facts via propose_fact (re-mention and conflict
    rules apply), then merge near-duplicate live facts on the topics touched."""
    by = Actor.of_agent(agent)
    report = ConsolidationReport()
    entries = HotMemory.objects.filter(agent=agent, consolidated_at__isnull=True).select_related("domain")
    if session_id:
        entries = entries.filter(session_id=session_id)
    touched: set[tuple[int, str]] = set()
    fallback: MemoryDomain | None = None
    for entry in entries.order_by("created_at", "pk"):
        domain = entry.domain
        if domain is None:
            if fallback is None:
                fallback = _default_domain(agent)
            domain = fallback
        topic = entry.topic or DEFAULT_TOPIC
        result = propose_fact(
            domain=domain,
            by=by,
            data=FactInput(
                topic=topic,
                content=entry.content,
                memory_type="observation",
                extra={"origin": "hot_tier", "source": f"consolidate:{entry.session_id}"[:60]},
            ),
        )
        HotMemory.objects.filter(pk=entry.pk, consolidated_at__isnull=True).update(
            consolidated_at=timezone.now(), consolidated_fact=result.fact
        )
        report.entries += 1
        if result.outcome == Outcome.RE_MENTIONED:
            report.re_mentioned += 1
        else:
            report.promoted += 1
        if result.conflict is not None:
            report.conflicts += 1
        touched.add((domain.pk, topic))
    for domain_id, topic in sorted(touched):
        report.merged += merge_near_duplicates(domain_id=domain_id, topic=topic, by=by)
    with transaction.atomic():
        record_event(
            actor=by,
            verb="memory.consolidated",
            workspace_id=agent.workspace_id,
            target=None,
            detail={"session_id": session_id, **asdict(report)},
        )
    return report


def _default_domain(agent: Agent) -> MemoryDomain:
    from memory.models import Workspace

    workspace = Workspace.objects.get(pk=agent.workspace_id)
    return create_domain(workspace=workspace, name=DEFAULT_DOMAIN, by=Actor.of_system("consolidate"))


def merge_near_duplicates(*, domain_id: int, topic: str, by: Actor) -> int:
    """Merge live facts of one domain+topic that say the same thing: the stronger one (veracity,
    confidence, mentions, age) absorbs the other's mentions; the other is superseded by it."""
    embed_live_without_vectors(domain_id, topic)
    merged = 0
    with transaction.atomic():
        lock_topic(domain_id, topic)
        live = list(Fact.objects.select_for_update().filter(domain_id=domain_id, topic=topic).live().order_by("pk"))
        gone: set[int] = set()
        for a, b in combinations(live, 2):
            if a.pk in gone or b.pk in gone or a.embedding is None or b.embedding is None:
                continue
            similarity = cosine(list(a.embedding), list(b.embedding))
            if classify_pair(similarity, a.content, b.content) != PairKind.SAME:
                continue
            keep, drop = sorted(
                (a, b), key=lambda f: (-VERACITY_WEIGHT[f.veracity], -f.confidence, -f.mention_count, f.pk)
            )
            now = timezone.now()
            keep.mention_count += drop.mention_count
            keep.confidence = reinforce(keep.confidence, drop.veracity)
            keep.last_mentioned_at = max(keep.last_mentioned_at, drop.last_mentioned_at)
            keep.save(update_fields=["mention_count", "confidence", "last_mentioned_at"])
            drop.superseded_by, drop.superseded_at = keep, now
            drop.supersede_reason = f"merged into near-duplicate fact {keep.pk} (similarity {similarity:.2f})"
            drop.save(update_fields=["superseded_by", "superseded_at", "supersede_reason"])
            record_event(
                actor=by,
                verb="fact.merged",
                workspace_id=keep.workspace_id,
                target=drop,
                detail={"into": keep.pk, "similarity": round(similarity, 4)},
            )
            gone.add(drop.pk)
            merged += 1
    return merged


def harmonize(*, agent: Agent, domain: MemoryDomain | None = None) -> HarmonizationReport:
    """Find live facts on one domain+topic, written by different agents, that contradict each
    other, and resolve each pair with the conflict rule (recorded as a Conflict row)."""
    by = Actor.of_agent(agent)
    report = HarmonizationReport()
    visible = Fact.objects.visible_to(agent).live()
    if domain is not None:
        visible = visible.filter(domain=domain)
    groups = visible.values_list("domain_id", "topic").order_by("domain_id", "topic").distinct()
    for domain_id, topic in list(groups):
        embed_live_without_vectors(domain_id, topic)  # inference outside the transaction
        with transaction.atomic():
            lock_topic(domain_id, topic)
            live = list(Fact.objects.select_for_update().filter(domain_id=domain_id, topic=topic).live().order_by("pk"))
            authors = {f.created_by_agent_id or f"user:{f.created_by_user_id}" for f in live}
            if len(live) < 2 or len(authors) < 2:
                continue
            report.topics_checked += 1
            beaten: set[int] = set()
            for a, b in combinations(live, 2):
                if a.pk in beaten or b.pk in beaten or a.embedding is None or b.embedding is None:
                    continue
                if (a.created_by_agent_id, a.created_by_user_id) == (b.created_by_agent_id, b.created_by_user_id):
                    continue
                similarity = cosine(list(a.embedding), list(b.embedding))
                if classify_pair(similarity, a.content, b.content) != PairKind.CONFLICT:
                    continue
                report.conflicts_found += 1
                newer, older = (b, a) if (b.observed_at, b.pk) > (a.observed_at, a.pk) else (a, b)
                winner, loser, rule = decide_winner(newer, older)
                loser.superseded_by, loser.superseded_at = winner, timezone.now()
                loser.supersede_reason = f"lost a harmonised conflict on {rule} to fact {winner.pk}"
                loser.save(update_fields=["superseded_by", "superseded_at", "supersede_reason"])
                conflict = Conflict.objects.create(
                    workspace_id=winner.workspace_id,
                    domain_id=domain_id,
                    topic=topic,
                    winner=winner,
                    loser=loser,
                    rule=rule,
                    similarity=round(similarity, 4),
                    detected_by="harmonize",
                )
                record_event(
                    actor=by,
                    verb="fact.conflict",
                    workspace_id=winner.workspace_id,
                    target=conflict,
                    detail={"winner": winner.pk, "loser": loser.pk, "rule": rule, "by": "harmonize"},
                )
                beaten.add(loser.pk)
                report.resolved += 1
    with transaction.atomic():
        record_event(
            actor=by,
            verb="memory.harmonized",
            workspace_id=agent.workspace_id,
            target=None,
            detail={"domain": domain.label if domain else None, **asdict(report)},
        )
    return report
