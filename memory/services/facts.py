"""Writing facts (SPEC §3): proposals with re-mention and conflict rules, explicit supersession.

A fact is never edited in place when contradicted. Every write is one transaction that locks
what it compares against (an advisory lock on domain+topic, then the live rows) and records
its audit event; embeddings are computed before the transaction, never inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memory.actors import Actor
from memory.audit import record_event, record_events
from memory.embeddings import cosine, embed_text, embed_texts, fact_text
from memory.errors import FactNotLive, InvalidInput
from memory.models import (
    VERACITY_WEIGHT,
    Conflict,
    Episode,
    EpisodeFact,
    Fact,
    FactStatus,
    MemoryDomain,
    MemoryType,
    Observation,
    Veracity,
)
from memory.services.embedding import schedule_embedding
from memory.services.lifecycle import ChallengeReason, challenge_fact
from memory.similarity import PairKind, classify_pair, normalise

TOPIC_MAX = 200


class Outcome:
    CREATED = "created"
    RE_MENTIONED = "re_mentioned"
    CONFLICT_WON = "conflict_won"
    CONFLICT_LOST = "conflict_lost"


@dataclass
class ProposalResult:
    fact: Fact
    outcome: str
    conflict: Conflict | None = None
    similarity: float | None = None
    compared_with: int | None = None


@dataclass
class FactInput:
    """What a proposal carries besides where it goes; lifecycle fields are for promotions."""

    topic: str
    content: str
    memory_type: str
    veracity: str = Veracity.AGENT_INFERRED
    observed_at: datetime | None = None
    valid_until: datetime | None = None
    source_observation_ids: Sequence[int] = ()
    episode_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def validate_fact_input(data: FactInput) -> None:
    """Raise InvalidInput (with per-field messages) for anything the database would refuse."""
    errors: dict[str, list[str]] = {}
    if not data.topic.strip():
        errors["topic"] = ["A topic is required."]
    elif len(data.topic) > TOPIC_MAX:
        errors["topic"] = [f"At most {TOPIC_MAX} characters."]
    if not data.content.strip():
        errors["content"] = ["Content is required."]
    elif len(data.content) > settings.ENGRAM_FACT_MAX_CHARS:
        errors["content"] = [f"At most {settings.ENGRAM_FACT_MAX_CHARS} characters."]
    if data.memory_type not in MemoryType.values:
        errors["memory_type"] = [f"One of {', '.join(MemoryType.values)}."]
    if data.veracity not in Veracity.values:
        errors["veracity"] = [f"One of {', '.join(Veracity.values)}."]
    if data.valid_until is not None and data.valid_until <= (data.observed_at or timezone.now()):
        errors["valid_until"] = ["valid_until must be later than observed_at (or now)."]
    if errors:
        raise InvalidInput("The fact has invalid fields; see `fields`.", fields=errors)


def lock_topic(domain_id: int, topic: str) -> None:
    """Serialise writers of one domain+topic, even before any row exists to lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"fact-topic:{domain_id}:{topic}"])


def embed_live_without_vectors(domain_id: int, topic: str) -> None:
    """Give live same-topic facts a vector before comparing (outside any transaction)."""
    rows = list(
        Fact.objects.live()
        .filter(domain_id=domain_id, topic=topic, embedding__isnull=True)
        .values_list("pk", "topic", "content")[:50]
    )
    if not rows:
        return
    now = timezone.now()
    for (pk, _, _), vector in zip(rows, embed_texts([fact_text(t, c) for _, t, c in rows]), strict=True):
        Fact.objects.filter(pk=pk, embedding__isnull=True).update(embedding=vector, embedded_at=now)


def decide_winner(new: Fact, old: Fact) -> tuple[Fact, Fact, str]:
    """Higher veracity, then higher confidence, then newer (observed_at; the proposal on a tie)."""
    new_weight, old_weight = VERACITY_WEIGHT[new.veracity], VERACITY_WEIGHT[old.veracity]
    if new_weight != old_weight:
        return (new, old, Conflict.Rule.VERACITY) if new_weight > old_weight else (old, new, Conflict.Rule.VERACITY)
    if abs(new.confidence - old.confidence) > 1e-9:
        return (
            (new, old, Conflict.Rule.CONFIDENCE)
            if new.confidence > old.confidence
            else (old, new, Conflict.Rule.CONFIDENCE)
        )
    return (old, new, Conflict.Rule.RECENCY) if old.observed_at > new.observed_at else (new, old, Conflict.Rule.RECENCY)


def reinforce(confidence: float, veracity: str) -> float:
    """c ← c + (1 − c) · r · w (SPEC §3)."""
    rate = settings.ENGRAM_REINFORCEMENT_RATE
    return min(1.0, confidence + (1.0 - confidence) * rate * VERACITY_WEIGHT[veracity])


def propose_fact(
    *, domain: MemoryDomain, data: FactInput, by: Actor, embedding: list[float] | None = None
) -> ProposalResult:
    """Write a fact through conflict detection against the live facts of its domain and topic.

    Same meaning → re-mention (no new row); close but different → conflict, decided by the
    rule; far apart → a new independent fact. Raises InvalidInput for bad fields, sources or
    episodes; writes nothing then."""
    validate_fact_input(data)
    vector = embedding if embedding is not None else embed_text(fact_text(data.topic, data.content))
    embed_live_without_vectors(domain.pk, data.topic)
    return _propose_locked(domain=domain, data=data, by=by, vector=vector)


@transaction.atomic
def _propose_locked(*, domain: MemoryDomain, data: FactInput, by: Actor, vector: list[float]) -> ProposalResult:
    lock_topic(domain.pk, data.topic)
    observations = _check_sources(domain.workspace_id, data.source_observation_ids, by)
    episode = _check_episode(domain.workspace_id, data.episode_id)
    now = timezone.now()
    live = list(Fact.objects.select_for_update().filter(domain=domain, topic=data.topic).live().order_by("pk"))
    best_same, best_conflict = _closest(vector, data.content, live)

    if best_same is not None:
        similarity, fact = best_same
        _re_mention(fact, data, by, now)
        _link(fact, observations, episode)
        return ProposalResult(fact, Outcome.RE_MENTIONED, similarity=similarity, compared_with=fact.pk)

    new = _new_fact(domain, data, by, vector, now)
    if best_conflict is None:
        new.save()
        _link(new, observations, episode)
        record_event(
            actor=by,
            verb="fact.created",
            workspace_id=domain.workspace_id,
            target=new,
            detail={"domain": domain.label, "topic": data.topic},
        )
        return ProposalResult(new, Outcome.CREATED)

    similarity, old = best_conflict
    winner, loser, rule = decide_winner(new, old)
    if loser is new:
        new.superseded_at = now
        new.supersede_reason = f"lost a conflict on {rule} to fact {old.pk}"
        new.superseded_by = old
    new.save()
    if loser is old:
        old.superseded_by, old.superseded_at = new, now
        old.supersede_reason = f"lost a conflict on {rule} to fact {new.pk}"
        old.save(update_fields=["superseded_by", "superseded_at", "supersede_reason"])
    _link(new, observations, episode)
    conflict = Conflict.objects.create(
        workspace_id=domain.workspace_id,
        domain=domain,
        topic=data.topic,
        winner=winner,
        loser=loser,
        rule=rule,
        similarity=round(similarity, 4),
        detected_at=now,
    )
    record_event(
        actor=by,
        verb="fact.conflict",
        workspace_id=domain.workspace_id,
        target=conflict,
        detail={"winner": winner.pk, "loser": loser.pk, "rule": rule, "similarity": conflict.similarity},
    )
    if loser.origin_candidate_id is not None and loser.status == FactStatus.ACTIVE:
        # A promoted rule that loses a conflict goes to reviewers, not quietly into history (SPEC §7).
        challenge_fact(fact=loser, by=by, reason=ChallengeReason.CONFLICT, detail=f"lost conflict {conflict.pk}")
        loser.refresh_from_db(fields=["status", "status_changed_at"])
    outcome = Outcome.CONFLICT_WON if winner is new else Outcome.CONFLICT_LOST
    return ProposalResult(new, outcome, conflict=conflict, similarity=similarity, compared_with=old.pk)


Match = tuple[float, Fact]


def _closest(vector: list[float], content: str, live: Iterable[Fact]) -> tuple[Match | None, Match | None]:
    """The most similar restatement and the most similar contradiction among live facts."""
    best_same: Match | None = None
    best_conflict: Match | None = None
    for fact in live:
        if fact.embedding is not None:
            similarity = cosine(vector, list(fact.embedding))
        else:
            similarity = 1.0 if normalise(fact.content) == normalise(content) else 0.0
        kind = classify_pair(similarity, content, fact.content)
        if kind == PairKind.SAME and (best_same is None or similarity > best_same[0]):
            best_same = (similarity, fact)
        elif kind == PairKind.CONFLICT and (best_conflict is None or similarity > best_conflict[0]):
            best_conflict = (similarity, fact)
    return best_same, best_conflict


def _new_fact(domain: MemoryDomain, data: FactInput, by: Actor, vector: list[float], now: datetime) -> Fact:
    return Fact(
        workspace_id=domain.workspace_id,
        domain=domain,
        topic=data.topic,
        content=data.content,
        memory_type=data.memory_type,
        veracity=data.veracity,
        confidence=VERACITY_WEIGHT[data.veracity],
        observed_at=data.observed_at or now,
        valid_until=data.valid_until,
        created_at=now,
        last_mentioned_at=now,
        status_changed_at=now,
        embedding=vector,
        embedded_at=now,
        created_by_agent=by.agent,
        created_by_user=by.user,
        **data.extra,
    )


def _re_mention(fact: Fact, data: FactInput, by: Actor, now: datetime) -> None:
    before = fact.confidence
    fact.confidence = reinforce(fact.confidence, data.veracity)
    fact.mention_count += 1
    fact.last_mentioned_at = now  # decay age restarts
    fields = ["confidence", "mention_count", "last_mentioned_at"]
    if VERACITY_WEIGHT[data.veracity] > VERACITY_WEIGHT[fact.veracity]:
        fact.veracity = data.veracity  # a stronger source now vouches for it
        fields.append("veracity")
    fact.save(update_fields=fields)
    record_event(
        actor=by,
        verb="fact.re_mentioned",
        workspace_id=fact.workspace_id,
        target=fact,
        detail={
            "confidence_before": round(before, 4),
            "confidence": round(fact.confidence, 4),
            "mention_count": fact.mention_count,
        },
    )


def _check_sources(workspace_id: int, ids: Iterable[int], by: Actor) -> list[Observation]:
    """Observations cited as sources must be the proposing agent's own (they are private)."""
    wanted = sorted(set(ids))
    if not wanted:
        return []
    qs = Observation.objects.filter(pk__in=wanted, workspace_id=workspace_id)
    if by.agent is not None:
        qs = qs.filter(agent=by.agent)
    found = list(qs)
    if len(found) != len(wanted):
        missing = sorted(set(wanted) - {o.pk for o in found})
        raise InvalidInput(
            "Unknown source observations.",
            code="unknown_observation",
            fields={"source_observation_ids": [f"Unknown observation ids: {missing}."]},
        )
    return found


def _check_episode(workspace_id: int, episode_id: int | None) -> Episode | None:
    if episode_id is None:
        return None
    episode = Episode.objects.filter(pk=episode_id, workspace_id=workspace_id).first()
    if episode is None:
        raise InvalidInput(
            "Unknown episode.", code="unknown_episode", fields={"episode_id": [f"No episode {episode_id}."]}
        )
    return episode


def _link(fact: Fact, observations: list[Observation], episode: Episode | None) -> None:
    if observations:
        fact.source_observations.add(*observations)
    if episode is not None:
        EpisodeFact.objects.get_or_create(episode=episode, fact=fact, relation=EpisodeFact.Relation.WRITTEN)


@transaction.atomic
def supersede_fact(*, fact: Fact, by: Actor, content: str, reason: str = "", veracity: str | None = None) -> Fact:
    """Replace `fact` with a new version; the old row's content is never edited.

    Raises FactNotLive if it was already superseded or retired, InvalidInput for bad content."""
    fact = Fact.objects.select_for_update().get(pk=fact.pk)
    if not fact.is_live:
        raise FactNotLive(fact.pk)
    veracity = veracity or (Veracity.HUMAN_STATED if by.user is not None else Veracity.AGENT_INFERRED)
    validate_fact_input(FactInput(topic=fact.topic, content=content, memory_type=fact.memory_type, veracity=veracity))
    if len(reason) > 500:
        raise InvalidInput("The reason is too long.", fields={"reason": ["At most 500 characters."]})
    now = timezone.now()
    new = Fact.objects.create(
        workspace_id=fact.workspace_id,
        domain_id=fact.domain_id,
        topic=fact.topic,
        content=content,
        memory_type=fact.memory_type,
        veracity=veracity,
        confidence=VERACITY_WEIGHT[veracity],
        observed_at=now,
        valid_until=fact.valid_until if fact.valid_until and fact.valid_until > now else None,
        created_at=now,
        last_mentioned_at=now,
        status_changed_at=now,
        human_edited=by.user is not None,
        origin="human" if by.user is not None else "agent",
        source="supersede",
        valid_for=fact.valid_for,
        not_valid_for=fact.not_valid_for,
        verification=fact.verification,
        created_by_agent=by.agent,
        created_by_user=by.user,
    )
    fact.superseded_by, fact.superseded_at, fact.supersede_reason = new, now, reason
    fact.save(update_fields=["superseded_by", "superseded_at", "supersede_reason"])
    record_event(
        actor=by,
        verb="fact.superseded",
        workspace_id=fact.workspace_id,
        target=fact,
        detail={"successor": new.pk, "reason": reason},
    )
    schedule_embedding(new.pk)
    return new


@transaction.atomic
def create_episode(
    *, workspace_id: int, by: Actor, kind: str, title: str = "", started_at: datetime | None = None
) -> Episode:
    """An episode (dispatch, session, run…): facts written or recalled in it link to it."""
    if not kind.strip() or len(kind) > 30:
        raise InvalidInput("Episode kind is required (at most 30 characters).", fields={"kind": ["1–30 characters."]})
    episode = Episode.objects.create(
        workspace_id=workspace_id,
        agent=by.agent,
        kind=kind.strip(),
        title=title[:300],
        started_at=started_at or timezone.now(),
    )
    record_event(actor=by, verb="episode.created", workspace_id=workspace_id, target=episode, detail={"kind": kind})
    return episode


@dataclass
class IngestItem:
    domain: MemoryDomain
    data: FactInput


def ingest_facts(
    *, items: Sequence[IngestItem], by: Actor, batch_size: int = 64, progress: Any = None
) -> dict[str, int]:
    """The batch path for importers: the same rules as propose_fact (re-mention, conflicts,
    locks, audit) with the same outcomes, in one transaction per batch. Embeddings are computed
    on a second thread (the bulk encoder) while the previous batch is written, so inference and
    database work overlap. Returns outcome counts."""
    import threading
    from queue import Queue

    for item in items:
        validate_fact_input(item.data)
    batches = [items[i : i + batch_size] for i in range(0, len(items), batch_size)]
    ready: Queue[tuple[Sequence[IngestItem], list[list[float]]] | BaseException | None] = Queue(maxsize=8)

    def embedder() -> None:
        # Several batches embedded together sort into similar lengths and pad less; small model
        # batches (32) beat large ones on CPU (measured: 64 → 124/s, 32 over 256 texts → 152/s).
        try:
            for first in range(0, len(batches), 4):
                group = batches[first : first + 4]
                texts = [fact_text(i.data.topic, i.data.content) for batch in group for i in batch]
                vectors = embed_texts(texts, batch_size=32, bulk=True)
                for batch in group:
                    ready.put((batch, vectors[: len(batch)]))
                    vectors = vectors[len(batch) :]
            ready.put(None)
        except BaseException as error:  # surfaced on the writing thread
            ready.put(error)

    thread = threading.Thread(target=embedder, name="engram-ingest-embedder", daemon=True)
    thread.start()
    counts: dict[str, int] = {}
    while (next_batch := ready.get()) is not None:
        if isinstance(next_batch, BaseException):
            raise next_batch
        batch, vectors = next_batch
        for outcome in _ingest_batch(batch, vectors, by):
            counts[outcome] = counts.get(outcome, 0) + 1
        if progress is not None:
            progress(len(batch))
    thread.join()
    # New rows wait in the GIN index's pending list, which every full-text search scans
    # linearly until a vacuum merges it: after an import, merge it now (measured at 10k facts:
    # keyword p50 22 ms straight after the import, 17 ms once merged).
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('fact_search_gin'::regclass)")
    return counts


@transaction.atomic
def _ingest_batch(batch: Sequence[IngestItem], vectors: list[list[float]], by: Actor) -> list[str]:
    """One batch in one transaction: every domain+topic of the batch locked in a stable order
    (one query), their live facts locked and read (one query), then each item compared in order
    against them and against the batch's own earlier items. New facts without a match — the
    common case of an import — are inserted together with their audit events (two queries); an
    item that restates or contradicts something takes propose_fact's own path, row by row."""
    keys = sorted({(item.domain.pk, item.data.topic) for item in batch})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest(%s::text[]) WITH ORDINALITY AS t(k, n) "
            "ORDER BY n",
            [[f"fact-topic:{domain_id}:{topic}" for domain_id, topic in keys]],
        )
    live: dict[tuple[int, str], list[Fact]] = {key: [] for key in keys}
    if keys:
        which = Q()
        for domain_id, topic in keys:
            which |= Q(domain_id=domain_id, topic=topic)
        for fact in Fact.objects.select_for_update().live().filter(which).order_by("pk"):
            live[(fact.domain_id, fact.topic)].append(fact)

    pending: list[Fact] = []

    def flush() -> None:
        if not pending:
            return
        Fact.objects.bulk_create(pending)
        record_events(
            actor=by,
            verb="fact.created",
            target_type="fact",
            events=[
                (fact.workspace_id, fact.pk, {"domain": fact.domain.label, "topic": fact.topic}) for fact in pending
            ],
        )
        pending.clear()

    outcomes = []
    now = timezone.now()
    for item, vector in zip(batch, vectors, strict=True):
        key = (item.domain.pk, item.data.topic)
        plain = not item.data.source_observation_ids and item.data.episode_id is None
        if plain and _closest(vector, item.data.content, live[key]) == (None, None):
            fact = _new_fact(item.domain, item.data, by, vector, now)
            pending.append(fact)
            live[key].append(fact)
            outcomes.append(Outcome.CREATED)
            continue
        flush()  # what it is compared with must exist in the database
        outcomes.append(_propose_locked(domain=item.domain, data=item.data, by=by, vector=vector).outcome)
        live[key] = list(Fact.objects.filter(domain_id=key[0], topic=key[1]).live().order_by("pk"))
    flush()
    return outcomes
