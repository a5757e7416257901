"""Writing facts (SPEC §3): proposals with re-mention and conflict rules, explicit supersession.

What a proposal means against the live facts of its domain nearest to it — restates, contradicts,
separate, or unsure — is decided and applied in memory.services.conflicts, for every write path.

A fact is never edited in place when contradicted. Every write is one transaction that locks
what it compares against (an advisory lock on the domain, then the live rows) and records
its audit event; embeddings are computed before the transaction, never inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory.actors import Actor, require_actor
from memory.audit import record_event
from memory.classifier import Relation
from memory.embeddings import Meaning, embed_meaning, embed_meanings
from memory.errors import (
    FactNotLive,
    InvalidInput,
    NotFound,
    ProtectedFact,
    StateConflict,
    VeracityNotAllowed,
)
from memory.metrics import count_fact_write
from memory.models import (
    VERACITY_WEIGHT,
    Conflict,
    Episode,
    EpisodeFact,
    Fact,
    MemoryDomain,
    MemoryType,
    Observation,
    Veracity,
)
from memory.recalls import await_episode
from memory.services.conflicts import (
    Said,
    apply_conflict,
    apply_replacement,
    apply_same,
    ask,
    choose,
    follow_successor,
    lock_domain,
    read_ahead,
    relations,
)

# The winner rule and the reinforcement formula live with the other relation rules; still
# importable from here.
from memory.services.conflicts import decide_winner as decide_winner
from memory.services.conflicts import reinforce as reinforce
from memory.services.locking import write_planned
from memory.services.nearby import NEIGHBOURS, live_rows, nearest_ids_many, nearest_live
from memory.services.tenancy import require_visible_domain

TOPIC_MAX = 200
SESSION_KEY_MAX = 200


class Outcome:
    CREATED = "created"
    RE_MENTIONED = "re_mentioned"
    CONFLICT_WON = "conflict_won"
    CONFLICT_LOST = "conflict_lost"
    # The classifier could not tell: both facts stay live and a person decides (the conflict is open).
    POSSIBLE_CONFLICT = "possible_conflict"


PROPOSAL_OUTCOMES = [
    Outcome.CREATED,
    Outcome.RE_MENTIONED,
    Outcome.CONFLICT_WON,
    Outcome.CONFLICT_LOST,
    Outcome.POSSIBLE_CONFLICT,
]


@dataclass
class ProposalResult:
    fact: Fact
    outcome: str
    conflict: Conflict | None = None
    similarity: float | None = None
    compared_with: int | None = None
    reason: str = ""  # the classifier's words for the relation acted on ("" for a new fact)

    @property
    def conflict_id(self) -> int | None:
        return self.conflict.pk if self.conflict is not None else None


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
    # The session key it is written under (Fact.session_key): a review's or hot-tier session id, or
    # what the proposing agent names; a re-mention keeps the existing fact's own.
    session_key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    # Set by services only, never from a caller's input: a person's act (approving a promotion
    # candidate) vouches for this text, so it may be human_stated whoever performs the write.
    vouched_by_person: bool = False
    # Set by services only: what a restatement (SAME) of a live fact does. `keep` the live fact's
    # wording (a re-mention), or `replace` it with this text (a person chose so before approving).
    on_restatement: str = "keep"


def may_state(by: Actor, veracity: str) -> bool:
    """Whether `by` may state a fact with `veracity`. human_stated comes from people (review pages,
    approvals, the admin), the system acting for an operator (management commands), or an agent a
    workspace admin marked as relaying people's words (`Agent.relays_human_words`); every other
    agent proposes agent_inferred, tool_generated or imported."""
    if veracity != Veracity.HUMAN_STATED or by.agent is None:
        return True
    return bool(by.agent.relays_human_words)


def check_veracity_authority(by: Actor, veracity: str, *, vouched_by_person: bool = False) -> None:
    """Raise VeracityNotAllowed (403) when `by` may not state `veracity`; nothing is written then."""
    if not vouched_by_person and not may_state(by, veracity):
        raise VeracityNotAllowed(veracity)


def latest_allowed(now: datetime | None = None) -> datetime:
    """The latest date a caller may give (observed_at, started_at): now plus the clock skew."""
    return (now or timezone.now()) + timedelta(seconds=settings.ENGRAM_CLOCK_SKEW_SECONDS)


def future_date_error(value: datetime | None) -> list[str] | None:
    """The field message for a caller's date later than now + the allowed clock skew, else None."""
    if value is None or value <= latest_allowed():
        return None
    return [f"Must not be in the future (at most {settings.ENGRAM_CLOCK_SKEW_SECONDS} s ahead of the server's clock)."]


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
    if len(data.session_key) > SESSION_KEY_MAX:
        errors["session_key"] = [f"At most {SESSION_KEY_MAX} characters."]
    if data.memory_type not in MemoryType.values:
        errors["memory_type"] = [f"One of {', '.join(MemoryType.values)}."]
    if data.veracity not in Veracity.values:
        errors["veracity"] = [f"One of {', '.join(Veracity.values)}."]
    if (future := future_date_error(data.observed_at)) is not None:
        errors["observed_at"] = future
    if data.valid_until is not None and data.valid_until <= (data.observed_at or timezone.now()):
        errors["valid_until"] = ["valid_until must be later than observed_at (or now)."]
    if errors:
        raise InvalidInput("The fact has invalid fields; see `fields`.", fields=errors)


def embed_live_without_vectors(domain_id: int, topic: str) -> None:
    """Give live same-topic facts a vector before comparing (outside any transaction)."""
    embed_live_without_vectors_of([(domain_id, topic)])


def embed_live_without_vectors_of(keys: Iterable[tuple[int, str]]) -> None:
    """embed_live_without_vectors for several (domain id, topic) pairs, in one query: both vectors
    (Meaning) of the live facts without any. One with a stored vector but no content vector (written
    before it existed) is compared by its stored one (memory.services.nearby.content_vector)."""
    wanted = set(keys)
    if not wanted:
        return
    rows = list(
        Fact.objects.live()
        .of_topics(wanted)
        .filter(embedding__isnull=True)
        .values_list("pk", "topic", "content")[: 50 * len(wanted)]
    )
    if not rows:
        return
    now = timezone.now()
    for (pk, _, _), meaning in zip(rows, embed_meanings([(t, c) for _, t, c in rows]), strict=True):
        Fact.objects.filter(pk=pk, embedding__isnull=True).update(
            embedding=meaning.stored, content_embedding=meaning.content, embedded_at=now
        )


def propose_fact(
    *, domain: MemoryDomain, data: FactInput, by: Actor, embedding: Meaning | None = None
) -> ProposalResult:
    """Write a fact through conflict detection against the live facts of its domain nearest to it
    in meaning, whatever their topic (memory.services.nearby).

    Restates a live fact → re-mention (no new row; the text is kept as a mention of it);
    contradicts one → conflict, decided by the rule; cannot tell → a new live fact and an open
    possible conflict for a person (`possible_conflict`); separate → a new independent fact.
    Several live facts: a restatement beats a contradiction, which beats an unsure pair; among
    equals the closest (memory.services.conflicts.choose).

    Raises VeracityNotAllowed when `by` may not state the veracity, InvalidInput for bad fields,
    sources or episodes (`unknown_domain` for a domain an agent may not see: a `none` domain reads
    as a missing one); writes nothing then."""
    _check_proposal(domain=domain, data=data, by=by)
    vector = embedding if embedding is not None else embed_meaning(data.topic, data.content)

    def plan(_hint: None) -> Meaning:
        embed_live_without_vectors(domain.pk, data.topic)
        read_before_locking([((domain.pk, data.topic), data.content, vector)])
        return vector

    return write_planned(
        plan,
        lambda planned: _propose_locked(domain=domain, data=data, by=by, vector=planned),
        domains=lambda _: [domain.pk],
        changed=StateConflict("The domain kept changing while the fact was written; try again.", code="domain_busy"),
    )


def read_before_locking(items: Sequence[tuple[tuple[int, str], str, Meaning]], *, beyond: int = 0) -> None:
    """Compare each (domain+topic, text, vectors) with the live facts of its domain nearest to it
    (`beyond` more than the write compares: a batch's earlier item that decides a conflict takes a
    fact out of the live set, and the next nearest moves in), and with the earlier items of the
    same domain, before any lock is taken: the pair model's answers stay cached, so the locked step
    that decides again finds them instead of running the model under the locks. What changed
    meanwhile is still compared under the locks. Nothing to do when the pair model is off (the
    rules alone are fast)."""
    from memory import pair_model

    if not items or not pair_model.enabled():
        return
    nearest = nearest_ids_many(
        [(domain_id, meaning.content) for (domain_id, _), _, meaning in items], limit=NEIGHBOURS + beyond
    )
    rows = {f.pk: f for f in live_rows({pk for ids in nearest for pk in ids})}
    earlier: dict[int, list[Fact]] = {}
    statements = []
    for ((domain_id, _), content, meaning), ids in zip(items, nearest, strict=True):
        mine = earlier.setdefault(domain_id, [])
        statements.append((content, meaning.content, [*(rows[pk] for pk in ids if pk in rows), *mine]))
        mine.append(Fact(content=content, embedding=meaning.stored, content_embedding=meaning.content))
    read_ahead(statements)


def propose_fact_locked(*, domain: MemoryDomain, data: FactInput, by: Actor, vector: Meaning) -> ProposalResult:
    """propose_fact for a service that holds its own transaction (a promotion, a review's
    approval): the same checks and rules, with the vector computed by the caller before its
    transaction opened, so no model inference runs under the locks. Live facts still without a
    vector compare by their normalised text. Raises as propose_fact."""
    _check_proposal(domain=domain, data=data, by=by)
    return _propose_locked(domain=domain, data=data, by=by, vector=vector)


def _check_proposal(*, domain: MemoryDomain, data: FactInput, by: Actor) -> None:
    require_actor(by)
    if by.agent is not None:
        require_visible_domain(by.agent, domain)
    check_veracity_authority(by, data.veracity, vouched_by_person=data.vouched_by_person)
    validate_fact_input(data)
    # Before any lock: an episode a recall just opened may still be on its way (await_episode).
    _check_episode(domain.workspace_id, data.episode_id, by)


@transaction.atomic
def _propose_locked(
    *, domain: MemoryDomain, data: FactInput, by: Actor, vector: Meaning, replacing: Fact | None = None
) -> ProposalResult:
    """Under the domain's lock, compare with its live facts nearest in meaning and act on the
    chosen relation. With `replacing` (a supersession, already locked by the caller), that fact is
    left out of the comparison: the text is meant to replace it, and is read against the others."""
    lock_domain(domain.pk)
    observations = _check_sources(domain.workspace_id, data.source_observation_ids, by)
    episode = _check_episode(domain.workspace_id, data.episode_id, by)
    now = timezone.now()
    live = nearest_live(domain.pk, vector.content, lock=True)
    if replacing is not None:
        live = [f for f in live if f.pk != replacing.pk]
    matches = relations(data.content, vector.content, live, topic=data.topic)
    match = choose(matches)

    if match is not None and match.kind == Relation.SAME and data.on_restatement != "replace":
        said = Said(data.content, data.veracity, data.observed_at or now, by.agent, by.user, episode)
        apply_same(fact=match.fact, said=said, by=by, similarity=match.similarity, reason=match.verdict.reason, now=now)
        _link(match.fact, observations, episode)
        count_fact_write(Outcome.RE_MENTIONED)
        return ProposalResult(
            match.fact,
            Outcome.RE_MENTIONED,
            similarity=match.similarity,
            compared_with=match.fact.pk,
            reason=match.verdict.reason,
        )

    new = _new_fact(domain, data, by, vector, now)
    new.save()
    _link(new, observations, episode)
    if replacing is None and (match is None or match.kind != Relation.CONTRADICTS):
        record_event(
            actor=by,
            verb="fact.created",
            workspace_id=domain.workspace_id,
            target=new,
            detail={"domain": domain.label, "topic": data.topic},
        )
    if match is None:
        count_fact_write(Outcome.CREATED)
        return ProposalResult(new, Outcome.CREATED)
    if match.kind == Relation.SAME:  # on_restatement == "replace": a person's choice
        conflict = apply_replacement(
            new=new, old=match.fact, by=by, similarity=match.similarity, reason=match.verdict.reason, now=now
        )
        outcome = Outcome.CONFLICT_WON
    elif match.kind == Relation.UNSURE:
        conflict = ask(proposed=new, chosen=match, matches=matches, by=by, now=now)
        outcome = Outcome.POSSIBLE_CONFLICT
    else:
        conflict = apply_conflict(
            new=new, old=match.fact, by=by, similarity=match.similarity, reason=match.verdict.reason, now=now
        )
        outcome = Outcome.CONFLICT_WON if conflict.winner_id == new.pk else Outcome.CONFLICT_LOST
    count_fact_write(outcome)
    return ProposalResult(
        new,
        outcome,
        conflict=conflict,
        similarity=match.similarity,
        compared_with=match.fact.pk,
        reason=match.verdict.reason,
    )


def _new_fact(domain: MemoryDomain, data: FactInput, by: Actor, vector: Meaning, now: datetime) -> Fact:
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
        # Decay and the recency voice measure age from when it was said, not from when Engram
        # heard it: imported history is as old as its statements (issue 35).
        last_mentioned_at=min(data.observed_at or now, now),
        status_changed_at=now,
        embedding=vector.stored,
        content_embedding=vector.content,
        embedded_at=now,
        created_by_agent=by.agent,
        created_by_user=by.user,
        session_key=data.session_key.strip(),
        **data.extra,
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


def _check_episode(workspace_id: int, episode_id: int | None, by: Actor) -> Episode | None:
    """An agent links facts only to episodes it opened, or to the episode of one of its own memory
    runs; another agent's episode answers exactly as a missing one (no existence leak)."""
    if episode_id is None:
        return None
    qs = Episode.objects.filter(pk=episode_id, workspace_id=workspace_id)
    if by.agent is not None:
        qs = qs.filter(Q(agent_id=by.agent.pk) | Q(memory_runs__agent_id=by.agent.pk))
    episode = qs.first()
    if episode is None and await_episode(episode_id):  # opened by a recall, its row not written yet
        episode = qs.first()
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


def _check_may_replace(by: Actor, fact: Fact) -> None:
    """An agent may not replace, by explicit supersession, what a person stated or approved: a
    human_stated fact (unless it relays people's words) or a promoted rule. It proposes instead,
    and the conflict rules (veracity first) or a reviewer decide."""
    if by.agent is None:
        return
    if fact.veracity == Veracity.HUMAN_STATED and not by.agent.relays_human_words:
        raise ProtectedFact(fact.pk, "a person stated it")
    if fact.origin_candidate_id is not None:
        raise ProtectedFact(fact.pk, "it was promoted through the review gate")


def supersede_fact(*, fact: Fact, by: Actor, content: str, reason: str = "", veracity: str | None = None) -> Fact:
    """Replace `fact` with a new version; the old row's content is never edited.

    The new text is read against the domain's other live facts as a proposal would be (its vector
    and the pair model's readings computed before any lock): restating a third live fact, `fact`
    is superseded by that fact, which gains the mention; contradicting one, the rule decides (or a
    person is asked) and `fact` is superseded by the new version either way; otherwise by the new
    version. Its open possible conflicts follow it to its successor and stay open
    (follow_successor). Locks: the domain (which every writer of its facts and conflicts takes
    first), then `fact`, then the live facts compared (pk order), then those conflicts.

    Raises FactNotLive if it was already superseded or retired, InvalidInput for bad content,
    NotFound (`fact_not_found`) when an agent may not see the fact, exactly as for a missing one.
    Answers the live fact that now holds the text."""

    def plan(_hint: None) -> tuple[FactInput, Meaning]:
        return plan_supersession(fact=fact, by=by, content=content, reason=reason, veracity=veracity)

    return write_planned(
        plan,
        lambda planned: supersede_fact_locked(fact=fact, by=by, data=planned[0], reason=reason, vector=planned[1]),
        domains=lambda _: [fact.domain_id],
        changed=StateConflict("The domain kept changing while the fact was replaced; try again.", code="domain_busy"),
    )


def plan_supersession(
    *, fact: Fact, by: Actor, content: str, reason: str, veracity: str | None = None
) -> tuple[FactInput, Meaning]:
    """Outside any transaction: a supersession's checks, its input, its vector, and the pair
    model's readings of its neighbours (cached for the locked step)."""
    data = _supersession(fact=fact, by=by, content=content, reason=reason, veracity=veracity)
    vector = embed_meaning(data.topic, data.content)
    embed_live_without_vectors(fact.domain_id, data.topic)
    read_before_locking([((fact.domain_id, data.topic), data.content, vector)])
    return data, vector


def _supersession(*, fact: Fact, by: Actor, content: str, reason: str, veracity: str | None) -> FactInput:
    """The checks a supersession passes before anything is read under a lock, and its input."""
    by = require_actor(by)
    if by.agent is not None and not Fact.objects.visible_to(by.agent).filter(pk=fact.pk).exists():
        raise NotFound(f"No fact {fact.pk}.", code="fact_not_found")
    veracity = veracity or (Veracity.HUMAN_STATED if by.user is not None else Veracity.AGENT_INFERRED)
    check_veracity_authority(by, veracity)
    if len(reason) > 500:
        raise InvalidInput("The reason is too long.", fields={"reason": ["At most 500 characters."]})
    data = FactInput(
        topic=fact.topic,
        content=content,
        memory_type=fact.memory_type,
        veracity=veracity,
        extra={
            "human_edited": by.user is not None,
            "origin": "human" if by.user is not None else "agent",
            "source": "supersede",
            "valid_for": fact.valid_for,
            "not_valid_for": fact.not_valid_for,
            "verification": fact.verification,
        },
    )
    validate_fact_input(data)
    return data


@transaction.atomic
def supersede_fact_locked(*, fact: Fact, by: Actor, data: FactInput, reason: str, vector: Meaning) -> Fact:
    """supersede_fact's writing step, for a caller that planned it (plan_supersession) before its
    transaction opened: no model inference runs here."""
    lock_domain(fact.domain_id)  # a fact's domain never changes
    fact = Fact.objects.select_for_update().select_related("domain").get(pk=fact.pk)
    if not fact.is_live:
        raise FactNotLive(fact.pk)
    _check_may_replace(by, fact)
    now = timezone.now()
    if fact.valid_until and fact.valid_until > now:
        data.valid_until = fact.valid_until
    result = _propose_locked(domain=fact.domain, data=data, by=by, vector=vector, replacing=fact)
    successor = result.fact
    if result.outcome == Outcome.CONFLICT_LOST and result.conflict is not None and result.conflict.winner is not None:
        successor = result.conflict.winner  # the new version lost to a third fact: that one stands
    fact.superseded_by, fact.superseded_at, fact.supersede_reason = successor, now, reason
    fact.save(update_fields=["superseded_by", "superseded_at", "supersede_reason"])
    detail: dict[str, Any] = {"successor": successor.pk, "reason": reason}
    if result.outcome != Outcome.CREATED:
        detail.update(outcome=result.outcome, compared_with=result.compared_with)
    record_event(actor=by, verb="fact.superseded", workspace_id=fact.workspace_id, target=fact, detail=detail)
    follow_successor(old=fact, successor=successor, by=by)
    return successor


@transaction.atomic
def create_episode(
    *, workspace_id: int, by: Actor, kind: str, title: str = "", started_at: datetime | None = None
) -> Episode:
    """An episode (dispatch, session, run…): facts written or recalled in it link to it. Raises
    InvalidInput for a missing kind or a start later than now + the allowed clock skew."""
    errors: dict[str, list[str]] = {}
    if not kind.strip() or len(kind) > 30:
        errors["kind"] = ["1–30 characters."]
    if (future := future_date_error(started_at)) is not None:
        errors["started_at"] = future
    if errors:
        raise InvalidInput("The episode has invalid fields; see `fields`.", fields=errors)
    episode = Episode.objects.create(
        workspace_id=workspace_id,
        agent=by.agent,
        kind=kind.strip(),
        title=title[:300],
        started_at=started_at or timezone.now(),
    )
    record_event(actor=by, verb="episode.created", workspace_id=workspace_id, target=episode, detail={"kind": kind})
    return episode
