"""Meeting decisions (seed 003: "meeting decisions are collected into the `decisions` domain").

A person pastes what a meeting decided — on the review site, or through an agent that relays
people's words (POST decisions/) — and each decision becomes a `decision` fact stated by people
(`human_stated`) in the workspace's `decisions` domain, all linked to one `meeting` episode (its
title, started at the meeting's date). Each goes through the normal write path (re-mention and
conflict rules apply), in one transaction; vectors are computed before it opens.

Choices made here:
- The `decisions` domain is created on first use (with SPEC §2's default grants: `write` for
  every role existing then) rather than by a data migration, so workspaces that never record a
  meeting do not carry an empty domain; it is created in the meeting's transaction and locked
  right after, before any fact is written (memory.services.locking). Only someone who could write there creates it: a
  workspace admin (people), or a relaying agent (it would get `write` by the creation anyway).
- People need `decide` on the domain (memory.access: a workspace admin, or a member holding
  `review_domain` on it); agents need `write` (403 insufficient_memory_permission; a role holding
  `none` gets exactly the answer of one holding `read`) and must relay people's words (403
  veracity_not_allowed): anything else would let an agent's own inference enter memory as a
  person's word.
- A topic given with the meeting applies to every decision; without one, each decision meets
  the closest live decision (cosine ≥ ENGRAM_CONTRADICTION_THRESHOLD) on that fact's topic, so
  a reversed decision supersedes the old one, else it gets a topic from its first clause.
- The date is a calendar day, stored as that day's midnight (current time zone); a day after
  today is refused, as any future date is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone
from pgvector.django import CosineDistance

from memory import access
from memory.actors import Actor, require_actor
from memory.embeddings import Meaning, embed_meanings, embed_texts
from memory.errors import InsufficientPermission, InvalidInput, StateConflict
from memory.models import Episode, Fact, GrantLevel, MemoryDomain, MemoryType, Veracity, Workspace
from memory.services.conflicts import lock_domain
from memory.services.facts import (
    TOPIC_MAX,
    FactInput,
    ProposalResult,
    check_veracity_authority,
    create_episode,
    embed_live_without_vectors_of,
    future_date_error,
    propose_fact_locked,
    read_before_locking,
)
from memory.services.locking import Replan, write_planned
from memory.services.tenancy import create_domain, effective_level

DECISIONS_DOMAIN = "decisions"
MAX_DECISIONS = 50
TITLE_MAX = 300
SOURCE = "meeting_decisions"
ORIGIN = "meeting"
TOPIC_WORDS = 8
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_MARKUP = re.compile(r"^[\s#>*+\-`|]+|[`*]+")
_CLAUSE_END = re.compile(r"[.;:!?—](?:\s|$)|\s[-–]\s")


@dataclass
class MeetingRecord:
    """What recording a meeting did: its episode and, per decision in order, the proposal's result."""

    episode: Episode
    domain: MemoryDomain
    results: list[ProposalResult] = field(default_factory=list)


def split_decisions(text: str) -> list[str]:
    """One decision per paragraph when the text has blank lines between blocks, else one per line;
    list bullets (`-`, `*`, `1.`) are dropped and a paragraph's lines joined with spaces."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    blocks = re.split(r"\n\s*\n", text.strip()) if re.search(r"\S\n\s*\n\s*\S", text) else text.split("\n")
    decisions = []
    for block in blocks:
        lines = [_BULLET.sub("", line).strip() for line in block.split("\n")]
        joined = " ".join(line for line in lines if line)
        if joined:
            decisions.append(joined)
    return decisions


def derived_topic(text: str) -> str:
    """The first clause of a decision, without markdown marks, lower case, at most TOPIC_WORDS words."""
    line = _MARKUP.sub("", text).strip()
    clause = _CLAUSE_END.split(line, maxsplit=1)[0]
    topic = " ".join(clause.split()[:TOPIC_WORDS]).strip(" ,.;:!?\"'()[]").lower()
    return topic[:TOPIC_MAX] or "meeting decision"


def meeting_start(day: date) -> datetime:
    """The meeting's date as the episode's start: that day's midnight in the current time zone."""
    return timezone.make_aware(datetime.combine(day, time.min))


def validate_meeting(*, title: str, day: date | None, decisions: Sequence[str], topic: str) -> dict[str, list[str]]:
    """Field errors of a meeting's input (empty when it may be recorded). Decision errors are keyed
    `decisions` (the count) and `decisions.<n>` (line n, from 1)."""
    errors: dict[str, list[str]] = {}
    if not title.strip():
        errors["title"] = ["A meeting title is required."]
    elif len(title) > TITLE_MAX:
        errors["title"] = [f"At most {TITLE_MAX} characters."]
    if day is None:
        errors["date"] = ["The meeting's date is required."]
    elif (future := future_date_error(meeting_start(day))) is not None:
        errors["date"] = [f"The meeting's date must not be in the future. {future[0]}"]
    if len(topic) > TOPIC_MAX:
        errors["topic"] = [f"At most {TOPIC_MAX} characters."]
    if not decisions:
        errors["decisions"] = ["At least one decision."]
    elif len(decisions) > MAX_DECISIONS:
        errors["decisions"] = [f"At most {MAX_DECISIONS} decisions per meeting; got {len(decisions)}."]
    limit = int(settings.ENGRAM_FACT_MAX_CHARS)
    for number, text in enumerate(decisions[:MAX_DECISIONS], start=1):
        if not text.strip():
            errors[f"decisions.{number}"] = ["A decision cannot be empty."]
        elif len(text) > limit:
            errors[f"decisions.{number}"] = [f"At most {limit} characters (this one has {len(text)})."]
    return errors


def decisions_domain(workspace: Workspace) -> MemoryDomain | None:
    return MemoryDomain.objects.filter(workspace=workspace, repo__isnull=True, name=DECISIONS_DOMAIN).first()


def check_may_record(*, workspace: Workspace, by: Actor) -> MemoryDomain | None:
    """Raise unless `by` may record decisions in `workspace` (see the module docstring); answers the
    existing `decisions` domain, or None when it will be created on first use."""
    by = require_actor(by)
    domain = decisions_domain(workspace)
    agent = by.agent
    if agent is not None:
        check_veracity_authority(by, Veracity.HUMAN_STATED)
        # `none` answers as `read` does: the domain's name is well known, its content stays hidden.
        if domain is not None and effective_level(role_id=agent.role_id, domain_id=domain.pk) != GrantLevel.WRITE:
            raise InsufficientPermission(
                f"Role {agent.role.name!r} needs `write` on domain {domain.label!r} to record meeting decisions.",
                fields={"domain": [f"No write access to {domain.label!r}."]},
            )
        return domain
    if by.is_system:  # the system, acting for an operator
        return domain
    allowed = (
        access.may_decide_domain(by.user, domain)
        if domain is not None
        else access.is_workspace_admin(by.user, workspace)
    )
    if not allowed:
        raise InsufficientPermission(
            f"You need to decide in the {DECISIONS_DOMAIN!r} domain of {workspace.slug!r} to record meeting "
            "decisions"
            + ("." if domain is not None else "; it does not exist yet, so a workspace admin records the first."),
            fields={"domain": [f"No write access to {DECISIONS_DOMAIN!r}."]},
        )
    return domain


def _topics_by_meaning(
    domain: MemoryDomain | None, decisions: Sequence[str], meanings: Sequence[list[float]]
) -> list[str]:
    """Each decision's topic when the meeting gives none (see the module docstring), from its text
    vector in `meanings`: that of the closest live decision of `domain`, or one derived from the
    decision's first clause."""
    return [_topic_of(domain, text, meaning) for text, meaning in zip(decisions, meanings, strict=True)]


def _topic_of(domain: MemoryDomain | None, text: str, meaning: list[float]) -> str:
    """The topic of the closest live decision of `domain` when close enough, else one derived from
    `text` (one query, no inference)."""
    nearest = None
    if domain is not None:
        nearest = (
            Fact.objects.live()
            .filter(domain=domain, embedding__isnull=False)
            .annotate(distance=CosineDistance("embedding", meaning))
            .order_by("distance", "pk")
            .values_list("topic", "distance")
            .first()
        )
    if nearest is not None and 1 - nearest[1] >= settings.ENGRAM_CONTRADICTION_THRESHOLD:
        return nearest[0]
    return derived_topic(text)


@dataclass(frozen=True)
class _Plan:
    """A meeting planned outside any transaction (memory.services.locking): the `decisions` domain
    as found (None: the write creates it), each decision's text vector when its topic was chosen by
    meaning (None: the meeting gave one), topic, and the vectors it is stored with; the live facts
    it meets were embedded and their pairs with the decisions read (cached)."""

    domain_id: int | None
    meanings: list[list[float]] | None
    topics: list[str]
    vectors: list[Meaning]


def record_meeting_decisions(
    *, workspace: Workspace, by: Actor, title: str, day: date | None, decisions: Sequence[str], topic: str = ""
) -> MeetingRecord:
    """Store each decision as a human_stated `decision` fact in the workspace's `decisions` domain,
    linked to one new `meeting` episode, in one transaction: all are written or none (the domain
    too, when this meeting creates it). Planned, locked and re-checked as every write of facts
    (memory.services.locking).

    Raises InvalidInput (fields: title, date, topic, decisions, decisions.<n>) for bad input,
    VeracityNotAllowed for an agent that does not relay people's words, InsufficientPermission
    without write on the domain (an agent whose role holds `read` or `none` there, a person who may
    not decide there), StateConflict `domain_busy` when the domain kept changing meanwhile."""
    decisions = [d.strip() for d in decisions]
    topic = topic.strip()
    if errors := validate_meeting(title=title, day=day, decisions=decisions, topic=topic):
        raise InvalidInput("The meeting has invalid fields; see `fields`.", fields=errors)
    assert day is not None
    check_may_record(workspace=workspace, by=by)  # refused before any inference

    def plan(_hint: None) -> _Plan:
        return _plan_meeting(workspace, decisions, topic)

    def write(planned: _Plan) -> MeetingRecord:
        return _record_locked(
            workspace=workspace, by=by, title=title.strip(), day=day, decisions=decisions, planned=planned
        )

    return write_planned(
        plan,
        write,
        domains=lambda planned: [] if planned.domain_id is None else [planned.domain_id],
        changed=StateConflict(
            f"The {DECISIONS_DOMAIN!r} domain kept changing while the meeting was recorded; try again.",
            code="domain_busy",
        ),
    )


def _plan_meeting(workspace: Workspace, decisions: Sequence[str], topic: str) -> _Plan:
    """Outside any transaction: each decision's topic and vectors, vectors for the live facts of
    those topics, and the pair model's readings of each decision against its nearest live facts and
    the meeting's earlier decisions."""
    domain = decisions_domain(workspace)
    meanings = None if topic else embed_texts(list(decisions))
    topics = [topic] * len(decisions) if meanings is None else _topics_by_meaning(domain, decisions, meanings)
    vectors = embed_meanings(list(zip(topics, decisions, strict=True)))
    if domain is not None:
        embed_live_without_vectors_of((domain.pk, t) for t in topics)
    # A domain not created yet holds no facts (no row has id 0): the decisions meet each other only.
    domain_id = domain.pk if domain is not None else 0
    read_before_locking([((domain_id, t), d, v) for t, d, v in zip(topics, decisions, vectors, strict=True)])
    return _Plan(domain.pk if domain is not None else None, meanings, topics, vectors)


def _record_locked(
    *, workspace: Workspace, by: Actor, title: str, day: date, decisions: Sequence[str], planned: _Plan
) -> MeetingRecord:
    """record_meeting_decisions' writing step, in write_planned's transaction: the domain locked
    (created first when the plan found none), the permission and each topic chosen by meaning
    checked again under the lock, then the episode and the decisions."""
    domain = _locked_domain(workspace, by, planned.domain_id)
    check_may_record(workspace=workspace, by=by)  # again, now the domain exists (and under the lock)
    if _topics_moved(domain, decisions, planned):
        raise Replan()  # a decision written since is the closest to one of these: other topics, other vectors
    started = meeting_start(day)
    episode = create_episode(workspace_id=workspace.pk, by=by, kind="meeting", title=title, started_at=started)
    record = MeetingRecord(episode=episode, domain=domain)
    for text, topic, vector in zip(decisions, planned.topics, planned.vectors, strict=True):
        record.results.append(
            propose_fact_locked(
                domain=domain,
                data=FactInput(
                    topic=topic,
                    content=text,
                    memory_type=MemoryType.DECISION,
                    veracity=Veracity.HUMAN_STATED,
                    observed_at=started,
                    episode_id=episode.pk,
                    extra={"source": SOURCE, "origin": ORIGIN},
                ),
                by=by,
                vector=vector,
            )
        )
    return record


def _topics_moved(domain: MemoryDomain, decisions: Sequence[str], planned: _Plan) -> bool:
    """Under the lock: whether a topic the plan chose by meaning in an existing domain is no longer
    the one chosen now (a domain the write creates holds nothing that could move them)."""
    if planned.meanings is None or planned.domain_id is None:
        return False
    return _topics_by_meaning(domain, decisions, planned.meanings) != planned.topics


def _locked_domain(workspace: Workspace, by: Actor, planned_id: int | None) -> MemoryDomain:
    """The `decisions` domain the plan found, whose lock write_planned holds; when the plan found
    none, created now and then locked (no other writer can know it yet). Raises Replan when that
    changed since the plan: a concurrent meeting created the domain first."""
    domain = decisions_domain(workspace)
    if planned_id is not None:
        if domain is None or domain.pk != planned_id:
            raise Replan()
        return domain
    if domain is not None:
        raise Replan()
    try:
        domain = create_domain(
            workspace=workspace, name=DECISIONS_DOMAIN, description="Decisions people took in meetings.", by=by
        )
    except IntegrityError:  # created by a meeting not committed when this one looked (its savepoint undone)
        raise Replan() from None
    lock_domain(domain.pk)
    return domain
