"""The hot tier (SPEC §4): session entries (`remember`), their consolidation into facts through
the normal write path, near-duplicate merging, and harmonisation of diverging facts.

consolidate and harmonize run as Celery tasks (inline in embedded mode) when an agent or an
admin asks, never on a timer; each reports what it did in its return value and an audit event.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from memory import pair_model
from memory.actors import Actor
from memory.audit import record_event
from memory.classifier import PairProbabilities, Relation, classify_many
from memory.embeddings import cosine
from memory.errors import InvalidInput, StateConflict
from memory.models import VERACITY_WEIGHT, Fact, FactMention, HotMemory, MemoryDomain
from memory.services.conflicts import (
    Said,
    apply_conflict,
    apply_same,
    open_possible_conflict,
    settled_pairs,
    topic_rule,
)
from memory.services.facts import (
    FactInput,
    Outcome,
    embed_live_without_vectors_of,
    propose_fact,
)
from memory.services.locking import Replan, write_planned
from memory.services.nearby import NEIGHBOURS, RELATED_COSINE, content_vector
from memory.services.tenancy import create_domain, require_visible_domain, unknown_domain

if TYPE_CHECKING:
    from memory.models import Agent

DEFAULT_DOMAIN = "knowledge"
DEFAULT_TOPIC = "session-notes"
HOT_MAX_CHARS = 4000


@dataclass
class ConsolidationReport:
    promoted: int = 0
    re_mentioned: int = 0
    conflicts: int = 0
    # Entries the classifier could not tell from a live fact: both kept, a person decides.
    possible_conflicts: int = 0
    merged: int = 0
    entries: int = 0
    # Entries left unconsolidated because their domain is not one the agent may see: each reads
    # {id, code, detail} exactly like the API's answer for a missing domain, and says nothing
    # about what the domain holds.
    refused: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class HarmonizationReport:
    topics_checked: int = 0
    conflicts_found: int = 0
    resolved: int = 0
    # Pairs the classifier could not decide: opened as possible conflicts for a person.
    possible_conflicts: int = 0

    def add(self, other: HarmonizationReport) -> None:
        """Count in what `other` (one domain's pass, once committed) found and did."""
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


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
    rules apply), then merge near-duplicate live facts on the topics touched.

    An entry whose domain (given, or the default `knowledge`) the agent may not see is never
    compared with that domain's facts: it is listed in `refused` as an unknown domain and stays
    unconsolidated, so it goes through once an admin lifts the `none` grant."""
    by = Actor.of_agent(agent)
    report = ConsolidationReport()
    entries = HotMemory.objects.filter(agent=agent, consolidated_at__isnull=True).select_related("domain__repo")
    if session_id:
        entries = entries.filter(session_id=session_id)
    touched: set[tuple[int, str]] = set()
    fallback: MemoryDomain | None = None
    visible = _visible_domain_ids(agent)
    for entry in entries.order_by("created_at", "pk"):
        domain = entry.domain
        if domain is None:
            if fallback is None:
                fallback = _default_domain(agent)
                # Created just now it grants `write` to every role; an existing one may be `none`.
                visible = _visible_domain_ids(agent)
            domain = fallback
        if domain.pk not in visible:
            report.refused.append(_refusal(entry, unknown_domain(domain.label)))
            continue
        topic = entry.topic or DEFAULT_TOPIC
        try:
            result = propose_fact(
                domain=domain,
                by=by,
                data=FactInput(
                    topic=topic,
                    content=entry.content,
                    memory_type="observation",
                    session_key=entry.session_id,
                    extra={"origin": "hot_tier", "source": f"consolidate:{entry.session_id}"[:60]},
                ),
            )
        except InvalidInput as refusal:  # a `none` grant set since the domains were read
            if refusal.code != "unknown_domain":
                raise
            visible.discard(domain.pk)
            report.refused.append(_refusal(entry, refusal))
            continue
        HotMemory.objects.filter(pk=entry.pk, consolidated_at__isnull=True).update(
            consolidated_at=timezone.now(), consolidated_fact=result.fact
        )
        report.entries += 1
        if result.outcome == Outcome.RE_MENTIONED:
            report.re_mentioned += 1
        else:
            report.promoted += 1
        if result.outcome == Outcome.POSSIBLE_CONFLICT:
            report.possible_conflicts += 1
        elif result.conflict is not None:
            report.conflicts += 1
        touched.add((domain.pk, topic))
    for domain_id in sorted({domain_id for domain_id, _ in touched}):
        report.merged += merge_near_duplicates(domain_id=domain_id, by=by)
    with transaction.atomic():
        record_event(
            actor=by,
            verb="memory.consolidated",
            workspace_id=agent.workspace_id,
            target=None,
            detail={"session_id": session_id, **asdict(report)},
        )
    return report


def _visible_domain_ids(agent: Agent) -> set[int]:
    return set(MemoryDomain.objects.visible_to(agent).values_list("pk", flat=True))


def _refusal(entry: HotMemory, error: InvalidInput) -> dict[str, Any]:
    return {"id": entry.pk, "code": error.code, "detail": error.detail}


def _default_domain(agent: Agent) -> MemoryDomain:
    from memory.models import Workspace

    workspace = Workspace.objects.get(pk=agent.workspace_id)
    return create_domain(workspace=workspace, name=DEFAULT_DOMAIN, by=Actor.system("consolidate"))


def _older_newer(a: Fact, b: Fact) -> tuple[Fact, Fact]:
    return (a, b) if (b.observed_at, b.pk) > (a.observed_at, a.pk) else (b, a)


def merge_near_duplicates(*, domain_id: int, by: Actor, topic: str | None = None) -> int:
    """Merge live facts of one domain that say the same thing (the classifier's SAME), each read
    against its nearest live facts of the domain by meaning whatever their topic (`neighbour_pairs`,
    as a proposal is read: issue 34), or of one `topic` only: the stronger one (veracity,
    confidence, mentions, age) absorbs the other — its text kept as a mention, its mentions and
    count added — and the other is superseded by it. A pair a person called both true, or is asked
    about, is left alone. Planned, locked and re-checked as every write of facts
    (memory.services.locking): the facts are embedded and their pairs read by the pair model before
    the domain's lock is taken. Raises StateConflict `domain_busy` when the domain kept changing."""
    model = pair_model.active()

    def plan(_hint: None) -> frozenset[int]:
        before = _plan_domain(domain_id, topic)
        if model is not None:
            settled = settled_pairs(f.pk for f in before)
            pairs = [(a, b, s) for a, b, s in neighbour_pairs(before) if frozenset((a.pk, b.pk)) not in settled]
            classify_many([(a.content, b.content, s) for a, b, s in pairs], model=model)
        return frozenset(f.pk for f in before)

    return write_planned(
        plan,
        lambda planned: _merge_locked(domain_id=domain_id, topic=topic, by=by, planned=planned, model=model),
        domains=lambda _: [domain_id],
        changed=StateConflict(
            "The domain kept changing while its near-duplicates were merged; try again.", code="domain_busy"
        ),
    )


def _merge_locked(
    *, domain_id: int, topic: str | None, by: Actor, planned: frozenset[int], model: PairProbabilities | None
) -> int:
    """merge_near_duplicates' writing step, under the domain's lock (write_planned): every pair's
    verdict is read before anything is written, so the pairs of a fact written since the plan are
    read by the pair model outside the transaction, all at once (NeedsInference), and the step
    runs again."""
    live = _live_of(domain_id, topic, lock=True)
    _require_planned(live, planned)
    settled = settled_pairs(f.pk for f in live) if len(live) > 1 else set()
    pairs = [(a, b, s) for a, b, s in neighbour_pairs(live) if frozenset((a.pk, b.pk)) not in settled]
    verdicts = classify_many([(a.content, b.content, s) for a, b, s in pairs], model=model)
    merged = 0
    gone: set[int] = set()
    for (a, b, similarity), verdict in zip(pairs, verdicts, strict=True):  # a is the older (pk order)
        if a.pk in gone or b.pk in gone or frozenset((a.pk, b.pk)) in settled:
            continue
        if verdict.kind != Relation.SAME:
            continue
        keep, drop = sorted((a, b), key=lambda f: (-VERACITY_WEIGHT[f.veracity], -f.confidence, -f.mention_count, f.pk))
        apply_same(
            fact=keep,
            said=Said.of_fact(drop),
            by=by,
            similarity=similarity,
            reason=f"merged near-duplicate: {verdict.reason}",
            absorbed=drop,
            via=FactMention.Via.MERGE,
        )
        gone.add(drop.pk)
        merged += 1
        # The dropped fact's open conflicts now ask about `keep`: those pairs are left alone too.
        settled = settled_pairs(f.pk for f in live)
    return merged


def _plan_domain(domain_id: int, topic: str | None) -> list[Fact]:
    """Outside any transaction: vectors for the live facts of a domain (or of one of its topics)
    that have none, then those live facts, in pk order."""
    topics = [topic] if topic is not None else _live_of_topics(domain_id)
    embed_live_without_vectors_of((domain_id, t) for t in topics)
    return _live_of(domain_id, topic)


def _live_of_topics(domain_id: int) -> list[str]:
    return list(Fact.objects.filter(domain_id=domain_id).live().order_by().values_list("topic", flat=True).distinct())


def _require_planned(live: list[Fact], planned: frozenset[int]) -> None:
    """Under the lock: raise Replan when a live fact the plan did not read has no vector. Only a
    plan embeds (no inference under the lock), and a fact without a vector would be left out."""
    if any(f.pk not in planned and content_vector(f) is None for f in live):
        raise Replan()


def _live_of(domain_id: int, topic: str | None, *, lock: bool = False) -> list[Fact]:
    """The live facts of a domain (or of one of its topics), in pk order; locked with `lock`."""
    qs = Fact.objects.filter(domain_id=domain_id).live().order_by("pk")
    if topic is not None:
        qs = qs.filter(topic=topic)
    return list(qs.select_for_update() if lock else qs)


def _cosine(a: Fact, b: Fact) -> float:
    """Two facts' cosine by what their contents mean (memory.services.nearby.content_vector)."""
    va, vb = content_vector(a), content_vector(b)
    return 0.0 if va is None or vb is None else cosine(va, vb)


def neighbour_pairs(facts: list[Fact]) -> list[tuple[Fact, Fact, float]]:
    """Each live fact with its NEIGHBOURS nearest others by content meaning, at least
    RELATED_COSINE close (as the write path reads a proposal, memory.services.nearby), whatever
    their topic: the distinct pairs (pk order) and their cosine. Facts with no vector are left out."""
    import numpy as np

    facts = [f for f in facts if content_vector(f) is not None]
    if len(facts) < 2:
        return []
    vectors = np.asarray([content_vector(f) for f in facts], dtype=np.float32)
    pairs: dict[tuple[int, int], float] = {}
    for start in range(0, len(facts), 512):
        block = vectors[start : start + 512] @ vectors.T
        for row, sims in enumerate(block):
            i = start + row
            sims[i] = -1.0
            for j in np.argsort(-sims)[:NEIGHBOURS]:
                if sims[j] < RELATED_COSINE:
                    break
                pairs[(min(i, int(j)), max(i, int(j)))] = float(sims[j])
    return [(facts[i], facts[j], s) for (i, j), s in sorted(pairs.items())]


def _harmonize_pairs(live: list[Fact], settled: set[frozenset[int]]) -> list[tuple[Fact, Fact, float]]:
    """(older, newer, cosine) for the neighbour pairs of `live` written by different authors and
    not already asked or dismissed."""
    out = []
    for a, b, similarity in neighbour_pairs(live):
        if (a.created_by_agent_id, a.created_by_user_id) == (b.created_by_agent_id, b.created_by_user_id):
            continue
        if frozenset((a.pk, b.pk)) in settled:
            continue
        older, newer = _older_newer(a, b)
        out.append((older, newer, similarity))
    return out


def harmonize(*, agent: Agent, domain: MemoryDomain | None = None) -> HarmonizationReport:
    """Find live facts of one domain, written by different agents, that contradict each other —
    each fact read against its nearest live facts of the domain by meaning, whatever their topic,
    as a proposal is (issue 34) — and resolve each pair with the conflict rule (recorded as a
    Conflict row); a pair the classifier cannot decide, or a contradiction across topics that does
    not announce an update, is opened as a possible conflict for a person (once: an open or
    dismissed pair is not asked again). Only domains visible to the agent are touched: a given
    `none` domain raises `unknown_domain`. `topics_checked` counts the topics of the domains read.
    Each domain is planned, locked and re-checked as every write of facts (memory.services.locking),
    in its own transaction; raises StateConflict `domain_busy` when one kept changing."""
    by = Actor.of_agent(agent)
    report = HarmonizationReport()
    if domain is not None:
        require_visible_domain(agent, domain)
    visible = Fact.objects.visible_to(agent).live()
    if domain is not None:
        visible = visible.filter(domain=domain)
    domain_ids = list(visible.values_list("domain_id", flat=True).order_by("domain_id").distinct())
    model = pair_model.active()
    for domain_id in domain_ids:
        report.add(_harmonize_domain(domain_id=domain_id, by=by, model=model))
    with transaction.atomic():
        record_event(
            actor=by,
            verb="memory.harmonized",
            workspace_id=agent.workspace_id,
            target=None,
            detail={"domain": domain.label if domain else None, **asdict(report)},
        )
    return report


def _harmonize_domain(*, domain_id: int, by: Actor, model: PairProbabilities | None) -> HarmonizationReport:
    """harmonize for one domain, through write_planned: what it found and did, once committed."""

    def plan(_hint: None) -> frozenset[int]:
        before = _plan_domain(domain_id, None)
        if model is not None:  # the pair model's answers cached before the lock: the locked step asks again
            planned = _harmonize_pairs(before, settled_pairs(f.pk for f in before))
            classify_many([(o.content, n.content, s) for o, n, s in planned], model=model)
        return frozenset(f.pk for f in before)

    return write_planned(
        plan,
        lambda planned: _harmonize_locked(domain_id=domain_id, by=by, planned=planned, model=model),
        domains=lambda _: [domain_id],
        changed=StateConflict("The domain kept changing while it was harmonised; try again.", code="domain_busy"),
    )


def _harmonize_locked(
    *, domain_id: int, by: Actor, planned: frozenset[int], model: PairProbabilities | None
) -> HarmonizationReport:
    """harmonize's writing step for one domain, under its lock (write_planned): as _merge_locked,
    every verdict is read before anything is written."""
    found = HarmonizationReport()
    live = _live_of(domain_id, None, lock=True)
    _require_planned(live, planned)
    found.topics_checked = len({f.topic for f in live})
    authors = {f.created_by_agent_id or f"user:{f.created_by_user_id}" for f in live}
    if len(live) < 2 or len(authors) < 2:
        return found
    beaten: set[int] = set()
    settled = settled_pairs(f.pk for f in live)
    pairs = _harmonize_pairs(live, settled)
    verdicts = classify_many([(o.content, n.content, s) for o, n, s in pairs], model=model)
    for (older, newer, similarity), verdict in zip(pairs, verdicts, strict=True):
        if older.pk in beaten or newer.pk in beaten:
            continue
        if frozenset((older.pk, newer.pk)) in settled:  # asked since, in this pass
            continue
        verdict = topic_rule(verdict, older.topic, newer.topic, newer.content)
        if verdict.kind == Relation.UNSURE:
            open_possible_conflict(
                existing=older,
                proposed=newer,
                by=by,
                similarity=similarity,
                reason=verdict.reason,
                detected_by="harmonize",
            )
            settled.add(frozenset((older.pk, newer.pk)))
            found.possible_conflicts += 1
            continue
        if verdict.kind != Relation.CONTRADICTS:
            continue
        found.conflicts_found += 1
        conflict = apply_conflict(
            new=newer, old=older, by=by, similarity=similarity, reason=verdict.reason, detected_by="harmonize"
        )
        beaten.add(older.pk if conflict.winner_id == newer.pk else newer.pk)
        found.resolved += 1
        settled = settled_pairs(f.pk for f in live)  # the loser's open conflicts moved to the winner
    return found
