"""What a write means (SPEC §3, issue 14): one place decides and applies how a statement relates
to a live fact of its domain (its nearest in meaning, whatever their topic: memory.services.nearby),
for every path that compares facts — propose and ingest
(memory.services.facts), consolidation's merge and harmonize (memory.services.hot), promotion
(through propose) and a person's decision in the review queue.

- SAME → `apply_same`: a re-mention, or a fact merged into the one it restates; either way what
  was said is kept as a FactMention of the fact that stays. A person approving a promotion may
  instead choose the new wording (`apply_replacement`): it supersedes the old, rule `human`.
- CONTRADICTS → `apply_conflict`: the rule (veracity, then the later statement, then confidence) or a person
  picks the winner, the loser is superseded, a Conflict row records it, and a promoted active
  loser is challenged so reviewers see it.
- UNSURE → `open_possible_conflict`: no machine decides; both facts stay live and an open
  Conflict waits in the review queue for a person (`decide_conflict`).
- SEPARATE → nothing to apply: two independent facts.

Whenever a fact is superseded (a proposal that wins a conflict, an explicit supersession by a
person or a relay agent, a merge, a person's decision, a promotion's replacement), its open
possible conflicts follow it (`follow_successor`): the superseded side is re-pointed to the
successor and the conflict stays open, so a contradiction that is still live stays in the review
queue. When the successor is the other fact of the pair, or the pair is asked already (or was
dismissed), the conflict is left on the superseded fact and reads as closed
(memory.selectors.conflict_closure says why, for the API and the review page alike).

Callers hold the transaction and the locks (lock_domain, then the live rows in pk order); these
functions write the rows and their audit events. No model inference happens here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memory import access, pair_model
from memory.actors import Actor, require_actor
from memory.audit import record_event
from memory.classifier import Relation, Verdict, announces_update, classify_many, normalise
from memory.embeddings import cosine
from memory.errors import InsufficientPermission, InvalidInput, StateConflict
from memory.metrics import observe_review_latency
from memory.models import VERACITY_WEIGHT, Conflict, Episode, Fact, FactMention, FactStatus
from memory.services.lifecycle import ChallengeReason, challenge_fact
from memory.services.nearby import NEIGHBOURS, RELATED_COSINE, content_vector

if TYPE_CHECKING:
    from memory.models import Agent

# How many of a fact's mention texts are read to recognise a text a person (or a merge) already
# tied to it; the newest first.
REMEMBERED_MENTIONS = 500


def lock_domain(domain_id: int) -> None:
    """Serialise the writers of one domain, even before any row exists to lock: a proposal reads
    the live facts of its whole domain nearest to it (memory.services.nearby), whatever their
    topic, so two writers of one domain must see each other's facts (issue 34)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [domain_lock_key(domain_id)])


def domain_lock_key(domain_id: int) -> str:
    return f"fact-domain:{domain_id}"


def lock_domains(domain_ids: Iterable[int]) -> None:
    """lock_domain for several domains, in sorted order: two writers touching the same domains in
    opposite orders then wait for each other instead of deadlocking. Re-taking a held lock later
    (propose_fact_locked) is harmless: the session holds it already."""
    for domain_id in sorted(set(domain_ids)):
        lock_domain(domain_id)


def lock_topic(domain_id: int, topic: str) -> None:
    """What a write of one domain+topic locks: its whole domain (lock_domain)."""
    lock_domain(domain_id)


def lock_topics(keys: Iterable[tuple[int, str]]) -> None:
    """lock_topic for several (domain_id, topic) pairs: their domains, in sorted order."""
    lock_domains(domain_id for domain_id, _ in keys)


def decide_winner(new: Fact, old: Fact) -> tuple[Fact, Fact, str]:
    """Higher veracity; then the later statement (observed_at), since of two statements of the same
    thing the later one is what is current — an update, however often the earlier was repeated
    (issue 34); then, for two statements of the same moment, higher confidence, then the proposal."""
    new_weight, old_weight = VERACITY_WEIGHT[new.veracity], VERACITY_WEIGHT[old.veracity]
    if new_weight != old_weight:
        return (new, old, Conflict.Rule.VERACITY) if new_weight > old_weight else (old, new, Conflict.Rule.VERACITY)
    if new.observed_at != old.observed_at:
        return (
            (new, old, Conflict.Rule.UPDATE) if new.observed_at > old.observed_at else (old, new, Conflict.Rule.UPDATE)
        )
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


# --- Deciding the relation ----------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """How a statement relates to one live fact, and their cosine."""

    fact: Fact
    verdict: Verdict
    similarity: float

    @property
    def kind(self) -> Relation:
        return self.verdict.kind


# SAME beats everything (nothing said is duplicated); then a contradiction (decided by the rule);
# then an unsure pair (a person decides). Among equals, the closest fact.
_PRECEDENCE = {Relation.SAME: 0, Relation.CONTRADICTS: 1, Relation.UNSURE: 2}


def compare(content: str, vector: list[float], live: Iterable[Fact]) -> list[Match]:
    """The classifier's verdict of `content` against each live fact (no query): the rules, then
    the second reading of the pair model (memory.classifier.classify_many). `vector` is the content
    vector (Meaning.content); a fact is compared by its own (memory.services.nearby.content_vector).
    A pair less than RELATED_COSINE close is separate without reading."""
    facts = list(live)
    similarities, read = _to_read(content, vector, facts)
    verdicts = [_UNRELATED] * len(facts)
    # the NEIGHBOURS nearest only, whatever was given (a batch's earlier items too): a bounded cost
    pairs = [(facts[i].content, content, similarities[i]) for i in read]
    for i, verdict in zip(read, classify_many(pairs, nearest=NEIGHBOURS, model=pair_model.active()), strict=True):
        verdicts[i] = verdict
    return [Match(f, v, s) for f, v, s in zip(facts, verdicts, similarities, strict=True)]


def _to_read(content: str, vector: list[float], facts: list[Fact]) -> tuple[list[float], list[int]]:
    """Each fact's cosine to `content` (by text for a fact without a vector) and which of them are
    close enough to read (RELATED_COSINE)."""
    similarities = []
    for fact in facts:
        other = content_vector(fact)
        if other is not None:
            similarities.append(cosine(vector, other))
        else:
            similarities.append(1.0 if normalise(fact.content) == normalise(content) else 0.0)
    return similarities, [i for i, s in enumerate(similarities) if s >= RELATED_COSINE]


def read_ahead(statements: Iterable[tuple[str, list[float], list[Fact]]]) -> None:
    """`compare` for many (content, content vector, live facts) at once, for what it leaves behind:
    the pair model's answers, cached (memory.pair_model.probabilities), read in one batch for all
    the statements instead of one small batch each. The write path calls it before taking its locks
    (memory.services.facts.read_before_locking)."""
    pairs: list[tuple[str, str, float]] = []
    for content, vector, facts in statements:
        similarities, read = _to_read(content, vector, facts)
        pairs.extend((facts[i].content, content, similarities[i]) for i in read)
    if pairs:
        classify_many(pairs, nearest=NEIGHBOURS, model=pair_model.active())


_UNRELATED = Verdict(Relation.SEPARATE, "separate: unrelated (far apart in meaning)")


def choose(matches: Iterable[Match]) -> Match | None:
    """The one relation a write acts on: the closest SAME, else the closest CONTRADICTS, else the
    closest UNSURE; None when the statement is separate from every live fact."""
    ranked = [m for m in matches if m.kind in _PRECEDENCE]
    return min(ranked, key=lambda m: (_PRECEDENCE[m.kind], -m.similarity), default=None)


def remembered(content: str, matches: list[Match]) -> list[Match]:
    """A person's (or a merge's) earlier word about this very text outranks the classifier: a text
    kept as one of a fact's mentions restates that fact; a text a person called `both true` beside
    a fact is separate from it. Queries only when some verdict is CONTRADICTS or UNSURE."""
    doubtful = {m.fact.pk for m in matches if m.kind in (Relation.CONTRADICTS, Relation.UNSURE) and m.fact.pk}
    if not doubtful:
        return matches
    key = normalise(content)
    mentions = (
        FactMention.objects.filter(fact_id__in=doubtful)
        .order_by("-created_at", "-id")
        .values_list("fact_id", "text")[:REMEMBERED_MENTIONS]
    )
    same = {fact_id for fact_id, text in mentions if normalise(text) == key}
    dismissed = Conflict.objects.filter(status=Conflict.Status.DISMISSED).filter(
        Q(existing_id__in=doubtful) | Q(proposed_id__in=doubtful)
    )
    separate: set[int] = set()
    for existing_id, proposed_id, existing_text, proposed_text in dismissed.values_list(
        "existing_id", "proposed_id", "existing__content", "proposed__content"
    ):
        if existing_id in doubtful and normalise(proposed_text) == key:
            separate.add(existing_id)
        if proposed_id in doubtful and normalise(existing_text) == key:
            separate.add(proposed_id)
    if not (same or separate):
        return matches
    out = []
    for m in matches:
        if m.fact.pk in same:
            m = Match(
                m.fact, Verdict(Relation.SAME, "same meaning: already kept as a mention of this fact"), m.similarity
            )
        elif m.fact.pk in separate:
            m = Match(m.fact, Verdict(Relation.SEPARATE, "separate: a person decided both are true"), m.similarity)
        out.append(m)
    return out


def relate(content: str, vector: list[float], live: Iterable[Fact], *, topic: str | None = None) -> Match | None:
    """The relation a proposal is written with (see `choose`), earlier decisions applied. Given
    the proposal's `topic`, a contradiction of a fact filed under another topic is acted on only
    when the proposal announces an update ("now", "switched to", "moved"): otherwise a person is
    asked (`across_topics`), since agents tag topics loosely and the two may be different cases."""
    return choose(relations(content, vector, live, topic=topic))


def relations(content: str, vector: list[float], live: Iterable[Fact], *, topic: str | None = None) -> list[Match]:
    """Every match `relate` chooses from."""
    return across_topics(content, topic, remembered(content, compare(content, vector, live)))


def across_topics(content: str, topic: str | None, matches: list[Match]) -> list[Match]:
    """`topic_rule` for each match of a proposal under `topic` (None: no topic rule)."""
    if topic is None:
        return matches
    return [Match(m.fact, topic_rule(m.verdict, m.fact.topic, topic, content), m.similarity) for m in matches]


def topic_rule(verdict: Verdict, old_topic: str, new_topic: str, new_content: str) -> Verdict:
    """A contradiction of a fact filed under another topic is acted on only when the newer text
    announces an update; otherwise a person decides (UNSURE)."""
    if verdict.kind != Relation.CONTRADICTS or old_topic == new_topic or announces_update(new_content):
        return verdict
    detail = verdict.reason.split(": ", 1)[-1]
    return Verdict(Relation.UNSURE, f"unsure: {detail}, filed under `{old_topic}`")


def settled_pairs(fact_ids: Iterable[int]) -> set[frozenset[int]]:
    """Pairs among `fact_ids` a person is already asked about (open) or dismissed (both true):
    harmonize and merge leave them alone."""
    ids = list(fact_ids)
    rows = Conflict.objects.filter(
        status__in=[Conflict.Status.OPEN, Conflict.Status.DISMISSED], existing_id__in=ids, proposed_id__in=ids
    ).values_list("existing_id", "proposed_id")
    return {frozenset(pair) for pair in rows}


# --- Applying it ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Said:
    """Who said what, and when it was true: a proposal's words, or an absorbed fact's."""

    text: str
    veracity: str
    observed_at: datetime
    agent: Agent | None = None
    user: Any = None
    episode: Episode | None = None

    @classmethod
    def of_fact(cls, fact: Fact) -> Said:
        return cls(fact.content, fact.veracity, fact.observed_at, fact.created_by_agent, fact.created_by_user)


def apply_same(
    *,
    fact: Fact,
    said: Said,
    by: Actor,
    similarity: float | None,
    reason: str,
    absorbed: Fact | None = None,
    via: str = FactMention.Via.PROPOSAL,
    now: datetime | None = None,
) -> FactMention:
    """`said` restates `fact`: its words become a mention of `fact`, which gains a mention and
    confidence (and the stronger veracity). With `absorbed` (a merge, or a person's `same`), that
    live fact is superseded by `fact`, its mentions move with it, and its count adds up."""
    now = now or timezone.now()
    before = fact.confidence
    fact.confidence = reinforce(fact.confidence, said.veracity)
    fact.mention_count += absorbed.mention_count if absorbed is not None else 1
    # A mention counts from when it was said (an imported old restatement does not freshen it).
    said_at = min(said.observed_at, now) if absorbed is None else absorbed.last_mentioned_at
    fact.last_mentioned_at = max(fact.last_mentioned_at, said_at)
    fields = ["confidence", "mention_count", "last_mentioned_at"]
    if VERACITY_WEIGHT[said.veracity] > VERACITY_WEIGHT[fact.veracity]:
        fact.veracity = said.veracity  # a stronger source now vouches for it
        fields.append("veracity")
    fact.save(update_fields=fields)
    mention = FactMention.objects.create(
        fact=fact,
        text=said.text,
        veracity=said.veracity,
        via=via,
        agent=said.agent,
        user=said.user,
        episode=said.episode,
        merged_fact=absorbed,
        observed_at=said.observed_at,
        similarity=round(similarity, 4) if similarity is not None else None,
        reason=reason[:500],
        created_at=now,
    )
    detail: dict[str, Any] = {
        "text": said.text,
        "mention": mention.pk,
        "similarity": mention.similarity,
        "reason": mention.reason,
        "confidence_before": round(before, 4),
        "confidence": round(fact.confidence, 4),
        "mention_count": fact.mention_count,
    }
    if absorbed is None:
        record_event(actor=by, verb="fact.re_mentioned", workspace_id=fact.workspace_id, target=fact, detail=detail)
        return mention
    FactMention.objects.filter(fact=absorbed).update(fact=fact)
    absorbed.superseded_by, absorbed.superseded_at = fact, now
    absorbed.supersede_reason = f"restates fact {fact.pk}: {reason}"[:500]
    absorbed.save(update_fields=["superseded_by", "superseded_at", "supersede_reason"])
    record_event(
        actor=by,
        verb="fact.merged",
        workspace_id=fact.workspace_id,
        target=absorbed,
        detail={"into": fact.pk, **detail},
    )
    follow_successor(old=absorbed, successor=fact, by=by)
    return mention


def apply_conflict(
    *,
    new: Fact,
    old: Fact,
    by: Actor,
    similarity: float,
    reason: str,
    detected_by: str = "write",
    now: datetime | None = None,
) -> Conflict:
    """`new` contradicts the live `old` (both saved): the rule picks the winner, the loser is
    superseded by it, a decided Conflict row records the pair, and a promoted active loser is
    challenged (a promoted rule does not go quietly into history: reviewers see it, SPEC §7)."""
    now = now or timezone.now()
    winner, loser, rule = decide_winner(new, old)
    _supersede(winner, loser, f"lost a conflict on {rule} to fact {winner.pk} ({reason})", now, by)
    conflict = _record_decided(
        new=new,
        old=old,
        winner=winner,
        rule=rule,
        resolution=Conflict.Resolution.MACHINE,
        reason=reason,
        similarity=similarity,
        detected_by=detected_by,
        by=by,
        now=now,
    )
    if loser.origin_candidate_id is not None and loser.status == FactStatus.ACTIVE:
        challenge_fact(fact=loser, by=by, reason=ChallengeReason.CONFLICT, detail=f"lost conflict {conflict.pk}")
        loser.refresh_from_db(fields=["status", "status_changed_at"])
    return conflict


def _record_decided(
    *,
    new: Fact,
    old: Fact,
    winner: Fact,
    rule: str,
    resolution: str,
    reason: str,
    similarity: float,
    detected_by: str,
    by: Actor,
    now: datetime,
    **decision: Any,
) -> Conflict:
    """The decided Conflict row for a pair one of whose facts has just superseded the other, and
    its `fact.conflict` audit event (`decision`: who decided it and how, for a person's choice)."""
    loser = old if winner.pk == new.pk else new
    conflict = Conflict.objects.create(
        workspace_id=new.workspace_id,
        domain_id=new.domain_id,
        topic=new.topic,
        existing=old,
        proposed=new,
        winner=winner,
        loser=loser,
        rule=rule,
        status=Conflict.Status.DECIDED,
        resolution=resolution,
        reason=reason[:500],
        similarity=round(similarity, 4),
        detected_by=detected_by,
        detected_at=now,
        decided_at=now,
        **decision,
    )
    record_event(
        actor=by,
        verb="fact.conflict",
        workspace_id=new.workspace_id,
        target=conflict,
        detail={
            "winner": winner.pk,
            "loser": loser.pk,
            "rule": rule,
            "similarity": conflict.similarity,
            "reason": conflict.reason,
            "by": detected_by,
        },
    )
    return conflict


def apply_replacement(
    *,
    new: Fact,
    old: Fact,
    by: Actor,
    similarity: float,
    reason: str,
    now: datetime | None = None,
) -> Conflict:
    """A person chose, before approving, to replace the live `old` with `new` although `new` only
    restates it (a SAME the write would have kept as a re-mention): `new` supersedes `old` by the
    rule `human`, and a decided, already reviewed Conflict row records the pair. No challenge: a
    reviewer has just decided it. Raises InvalidInput unless `by` is a person."""
    if not require_actor(by).is_user:
        raise InvalidInput("Only a person replaces a fact's wording this way.", code="human_review_required")
    now = now or timezone.now()
    why = f"a person replaced its wording with fact {new.pk}"
    _supersede(new, old, f"{why} ({reason})" if reason else why, now, by)
    return _record_decided(
        new=new,
        old=old,
        winner=new,
        rule=Conflict.Rule.HUMAN,
        resolution=Conflict.Resolution.CONTRADICTS,
        reason=f"restatement, new wording chosen by a person: {reason}",
        similarity=similarity,
        detected_by="review",
        by=by,
        now=now,
        # A person's decision is also a review: it does not wait in the queue of conflicts lost by people.
        decided_by=by.user,
        decision_note="replace the wording",
        reviewed_at=now,
        reviewed_by=by.user,
    )


def open_possible_conflict(
    *,
    existing: Fact,
    proposed: Fact,
    by: Actor,
    similarity: float,
    reason: str,
    detected_by: str = "write",
    now: datetime | None = None,
    question: Conflict | None = None,
) -> Conflict:
    """The classifier cannot tell whether `proposed` contradicts `existing`: both stay live and an
    open Conflict (no winner, no rule) waits in the review queue for a person — joined to
    `question` when given (asked together with it, see `ask`)."""
    conflict = Conflict.objects.create(
        question=question,
        workspace_id=existing.workspace_id,
        domain_id=existing.domain_id,
        topic=existing.topic,
        existing=existing,
        proposed=proposed,
        rule="",
        status=Conflict.Status.OPEN,
        resolution="",
        reason=reason[:500],
        similarity=round(similarity, 4),
        detected_by=detected_by,
        detected_at=now or timezone.now(),
    )
    record_event(
        actor=by,
        verb="conflict.opened",
        workspace_id=existing.workspace_id,
        target=conflict,
        detail={
            "existing": existing.pk,
            "proposed": proposed.pk,
            "similarity": conflict.similarity,
            "reason": conflict.reason,
            "by": detected_by,
            "question": question.pk if question is not None else None,
        },
    )
    return conflict


def open_question_about(fact: Fact) -> Conflict | None:
    """The open question (an open possible conflict not joined to another) `fact` is already one
    side of, both its facts still live; the oldest."""
    return (
        Conflict.objects.filter(status=Conflict.Status.OPEN, question__isnull=True)
        .filter(Q(existing=fact) | Q(proposed=fact))
        .filter(existing__superseded_by__isnull=True, proposed__superseded_by__isnull=True)
        .order_by("pk")
        .first()
    )


def ask(*, proposed: Fact, chosen: Match, matches: Iterable[Match], by: Actor, now: datetime | None = None) -> Conflict:
    """One question per disagreement (issue 34): a proposal unsure against `chosen` (and perhaps
    against other live facts among `matches`) opens a possible conflict for each such pair, all
    asked as one question — the open question `chosen`'s fact already waits in when there is one
    (several proposals against one fact), else a new one headed by the closest pair. Answers the
    proposal's pair with `chosen`."""
    head = open_question_about(chosen.fact)
    others = [m for m in matches if m.kind == Relation.UNSURE and m.fact.pk != chosen.fact.pk]
    first: Conflict | None = None
    for m in [chosen, *others]:
        opened = open_possible_conflict(
            existing=m.fact,
            proposed=proposed,
            by=by,
            similarity=m.similarity,
            reason=m.verdict.reason,
            now=now,
            question=head or first,
        )
        first = first or opened
    assert first is not None
    return first


def _supersede(winner: Fact, loser: Fact, reason: str, now: datetime, by: Actor) -> None:
    loser.superseded_by, loser.superseded_at, loser.supersede_reason = winner, now, reason[:500]
    loser.save(update_fields=["superseded_by", "superseded_at", "supersede_reason"])
    follow_successor(old=loser, successor=winner, by=by)


def follow_successor(*, old: Fact, successor: Fact, by: Actor) -> list[Conflict]:
    """`old` has just been superseded by `successor` (in the caller's transaction, under the lock
    of their domain+topic, which every writer of a topic's open conflicts holds): each open
    possible conflict `old` is a side of is re-pointed to `successor` and stays open, with a
    `conflict.repointed` audit event, so a live contradiction stays in the review queue rather
    than being orphaned beside the new fact. Left as they are (and so closed: see
    memory.selectors.conflict_closure) are a conflict whose other fact *is* the successor (the
    pair is settled by this supersession), one whose successor is not live, and one whose new pair
    is already asked about or was dismissed as both true (settled_pairs). The conflicts are locked
    in pk order. Answers the conflicts re-pointed."""
    opened = list(
        Conflict.objects.select_for_update(of=("self",))
        .filter(Q(existing_id=old.pk) | Q(proposed_id=old.pk), status=Conflict.Status.OPEN)
        .order_by("pk")
    )
    moved: list[Conflict] = []
    for conflict in opened:
        side = "existing" if conflict.existing_id == old.pk else "proposed"
        other_id = conflict.proposed_id if side == "existing" else conflict.existing_id
        if successor.pk == other_id or not successor.is_live:
            continue
        if frozenset((successor.pk, other_id)) in settled_pairs([successor.pk, other_id]):
            continue
        setattr(conflict, f"{side}_id", successor.pk)
        note = f"fact {old.pk} was superseded by fact {successor.pk}, which stands in its place"
        conflict.reason = (f"{conflict.reason} ({note})" if conflict.reason else note)[:500]
        conflict.save(update_fields=[side, "reason"])
        record_event(
            actor=by,
            verb="conflict.repointed",
            workspace_id=conflict.workspace_id,
            target=conflict,
            detail={"side": side, "from": old.pk, "to": successor.pk, "other": other_id},
        )
        moved.append(conflict)
    return moved


# --- A person's decision -------------------------------------------------------------------------

DECISIONS = (Conflict.Resolution.SAME, Conflict.Resolution.CONTRADICTS, Conflict.Resolution.BOTH_TRUE)
NOTE_MAX = 500


@transaction.atomic
def decide_conflict(
    *, conflict: Conflict, by: Actor, resolution: str, winner_id: int | None = None, note: str = ""
) -> Conflict:
    """A person decides an open possible conflict: `same` (the newer fact becomes a re-mention of
    the older: its text kept as a mention, the newer superseded by the older), `contradicts`
    (`winner_id`, one of the pair, supersedes the other; rule `human`) or `both_true` (dismissed:
    both stay live, the pair is not asked again). Raises InvalidInput (`human_review_required`
    for anyone but a person, or a bad resolution or winner), InsufficientPermission for a person
    who may not decide the domain (memory.access), StateConflict `conflict_decided` once decided
    and `conflict_facts_changed` when either fact is no longer live."""
    if not require_actor(by).is_user:
        raise InvalidInput("Only a person decides a possible conflict.", code="human_review_required")
    if not access.may_decide_domain(by.user, conflict.domain_id):
        raise InsufficientPermission("You may not decide this conflict's domain.")
    if resolution not in DECISIONS:
        raise InvalidInput(
            f"A decision is one of {', '.join(DECISIONS)}.", fields={"resolution": ["Unknown decision."]}
        )
    if len(note) > NOTE_MAX:
        raise InvalidInput("The note is too long.", fields={"note": [f"At most {NOTE_MAX} characters."]})
    lock_topic(conflict.domain_id, conflict.topic)  # the write path's order: topic, conflict, facts
    conflict = Conflict.objects.select_for_update().get(pk=conflict.pk)
    if conflict.status != Conflict.Status.OPEN:
        raise StateConflict(
            f"Conflict {conflict.pk} was already decided ({conflict.get_resolution_display()}).",
            code="conflict_decided",
        )
    pair = {
        f.pk: f
        for f in Fact.objects.select_for_update()
        .filter(pk__in=[conflict.existing_id, conflict.proposed_id])
        .order_by("pk")
    }
    existing, proposed = pair[conflict.existing_id], pair[conflict.proposed_id]
    # the pairs asked with it, as they stand now (settled after it, `_settle_joined`)
    joined = list(
        conflict.joined.filter(status=Conflict.Status.OPEN)
        .order_by("pk")
        .values_list("pk", "existing_id", "proposed_id")
    )
    if not (existing.is_live and proposed.is_live):
        raise StateConflict(
            "One of the two facts was superseded or retired since; decide on its live successor.",
            code="conflict_facts_changed",
        )
    now = timezone.now()
    why = f"a person decided (possible conflict {conflict.pk})" + (f": {note}" if note else "")
    detail: dict[str, Any] = {"resolution": resolution, "note": note}
    if resolution == Conflict.Resolution.SAME:
        older, newer = sorted((existing, proposed), key=lambda f: (f.created_at, f.pk))
        mention = apply_same(
            fact=older,
            said=Said.of_fact(newer),
            by=by,
            similarity=conflict.similarity,
            reason=f"the same, {why}",
            absorbed=newer,
            via=FactMention.Via.REVIEW,
            now=now,
        )
        detail.update(kept=older.pk, merged=newer.pk, mention=mention.pk)
    elif resolution == Conflict.Resolution.CONTRADICTS:
        if winner_id not in pair:
            raise InvalidInput(
                "Pick the winner: one of the two facts.",
                fields={"winner": [f"One of {conflict.existing_id}, {conflict.proposed_id}."]},
            )
        winner = pair[winner_id]
        loser = proposed if winner is existing else existing
        # No challenge for a promoted loser here: a reviewer has just decided it.
        _supersede(winner, loser, f"contradicted by fact {winner.pk}, {why}", now, by)
        conflict.winner, conflict.loser = winner, loser
        detail.update(winner=winner.pk, loser=loser.pk)
    conflict.status = (
        Conflict.Status.DISMISSED if resolution == Conflict.Resolution.BOTH_TRUE else Conflict.Status.DECIDED
    )
    conflict.resolution, conflict.rule = resolution, Conflict.Rule.HUMAN
    conflict.decided_at, conflict.decided_by, conflict.decision_note = now, by.user, note
    # A person's decision is also a review: it does not wait in the queue of conflicts lost by people.
    conflict.reviewed_at, conflict.reviewed_by = now, by.user
    observe_review_latency("possible", conflict.detected_at, now)
    conflict.save(
        update_fields=[
            "status",
            "resolution",
            "rule",
            "winner",
            "loser",
            "decided_at",
            "decided_by",
            "decision_note",
            "reviewed_at",
            "reviewed_by",
        ]
    )
    record_event(actor=by, verb="conflict.decided", workspace_id=conflict.workspace_id, target=conflict, detail=detail)
    _settle_joined(conflict, joined, by=by, note=note)
    return conflict


def _settle_joined(head: Conflict, joined: list[tuple[int, int, int]], *, by: Actor, note: str) -> None:
    """After a person decided `head`, the pairs asked with it (`joined`: id, existing, proposed as
    they were shown) that the decision covers are decided the same way: `both_true` dismisses each,
    `contradicts` lets the winner supersede the other side of each pair it is in. A pair the
    decision does not cover — `same`, a pair without the winner, or one whose facts changed since
    (superseded, or re-pointed to a successor) — becomes a question of its own."""
    why = f"decided with possible conflict {head.pk}" + (f": {note}" if note else "")
    for pk, existing_id, proposed_id in joined:
        row = Conflict.objects.select_for_update().get(pk=pk)
        if row.status != Conflict.Status.OPEN:
            continue
        unchanged = (row.existing_id, row.proposed_id) == (existing_id, proposed_id)
        live = Fact.objects.filter(pk__in=[existing_id, proposed_id]).live().count() == 2
        if unchanged and live and head.resolution == Conflict.Resolution.BOTH_TRUE:
            decide_conflict(conflict=row, by=by, resolution=Conflict.Resolution.BOTH_TRUE, note=why[:NOTE_MAX])
        elif (
            unchanged
            and live
            and head.resolution == Conflict.Resolution.CONTRADICTS
            and head.winner_id
            in (
                existing_id,
                proposed_id,
            )
        ):
            decide_conflict(
                conflict=row,
                by=by,
                resolution=Conflict.Resolution.CONTRADICTS,
                winner_id=head.winner_id,
                note=why[:NOTE_MAX],
            )
        else:
            row.question = None
            row.save(update_fields=["question"])
