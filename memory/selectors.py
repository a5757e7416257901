"""Reads for pages and endpoints. Each starts from `visible_to(agent)` (or a person's
workspaces) and does its select_related / prefetch here, so callers never cause N+1 queries."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from django.db.models import Q, QuerySet

from memory.errors import InvalidInput, NotFound
from memory.models import AuditEvent, Conflict, Fact, FactMention, FactStatus, MemoryDomain, Policy
from memory.querysets import status_then
from memory.services.tenancy import parse_domain_label, unknown_domain

if TYPE_CHECKING:
    from datetime import datetime

    from memory.models import Agent

HISTORY_LIMIT = 200
MENTIONS_LIMIT = 50
_CONFLICT_FACTS = ("domain__repo", "winner", "loser", "existing", "proposed")
# What a conflict shows of its facts is their text: their vectors (mostly in TOAST, parsed into
# 384 floats each) stay unread. A page of 50 conflicts read 200 of them: 60 of its 99 ms.
_CONFLICT_FACTS_UNSHOWN = tuple(
    f"{fact}__{column}"
    for fact in ("winner", "loser", "existing", "proposed")
    for column in ("embedding", "content_embedding", "search_vector")
)


def domain_for_agent(agent: Agent, *, domain: str, repo: str | None = None) -> MemoryDomain:
    """Resolve `architecture`, `repo:<slug>/architecture`, or a name plus `repo`, among the
    domains the agent can see. A `none` domain is reported exactly like a missing one."""
    repo_slug, name = parse_domain_label(domain)
    if repo_slug and repo and repo_slug != repo:
        raise InvalidInput(
            "`domain` and `repo` name different repos.",
            code="invalid_domain",
            fields={"repo": ["Does not match the repo in the domain label."]},
        )
    repo_slug = repo_slug or repo
    qs = MemoryDomain.objects.visible_to(agent).select_related("repo").filter(name=name)
    qs = qs.filter(repo__slug=repo_slug) if repo_slug else qs.filter(repo__isnull=True)
    found = qs.first()
    if found is None:
        raise unknown_domain(f"repo:{repo_slug}/{name}" if repo_slug else name)
    return found


def facts_for_agent(agent: Agent, filters: dict[str, Any]) -> QuerySet[Fact]:
    """Visible facts with optional domain/topic/status/repo/session_key filters; current ones by
    default; newest first (index fact_newest_first). Without the vector and the search vector,
    which a list never shows (reading a page's vectors from TOAST and parsing them was most of
    its time)."""
    qs = (
        Fact.objects.visible_to(agent)
        .select_related("domain__repo")
        .defer("embedding", "content_embedding", "search_vector")
    )
    if filters.get("domain"):
        qs = qs.filter(domain=domain_for_agent(agent, domain=filters["domain"], repo=filters.get("repo")))
    elif filters.get("repo"):
        qs = qs.filter(domain__repo__slug=filters["repo"])
    if filters.get("topic"):
        qs = qs.filter(topic=filters["topic"])
    if filters.get("status"):
        qs = qs.filter(status=filters["status"])
    if filters.get("session_key"):
        qs = qs.filter(session_key=filters["session_key"])
    if filters.get("current", True):
        qs = qs.filter(superseded_by__isnull=True)
    return qs.order_by("-created_at", "-id")


def fact_for_agent(agent: Agent, fact_id: int) -> Fact:
    """One visible fact; another workspace's or a `none` domain's fact is simply not found."""
    fact = Fact.objects.visible_to(agent).select_related("domain__repo").filter(pk=fact_id).first()
    if fact is None:
        raise NotFound(f"No fact {fact_id}.", code="fact_not_found")
    return fact


def fact_history(fact: Fact) -> list[Fact]:
    """The whole supersession chain through `fact`, both ways (predecessors, including facts
    that lost conflicts, and successors), oldest first."""
    seen: dict[int, Fact] = {}
    # Start from a fresh read of `fact` itself: the caller's instance may predate a supersession.
    frontier_back: set[int] = set()
    frontier_fwd: set[int] = {fact.pk}
    while (frontier_back or frontier_fwd) and len(seen) < HISTORY_LIMIT:
        rows = Fact.objects.select_related("domain__repo").filter(
            Q(superseded_by_id__in=frontier_back) | Q(pk__in=frontier_fwd)
        )
        frontier_back, frontier_fwd = set(), set()
        for row in rows:
            if row.pk in seen:
                continue
            seen[row.pk] = row
            frontier_back.add(row.pk)
            if row.superseded_by_id and row.superseded_by_id not in seen:
                frontier_fwd.add(row.superseded_by_id)
    return sorted(seen.values(), key=lambda f: (f.created_at, f.pk))


# --- As of a moment (memory.search.as_of): rows as they were then, never saved --------------------
def fact_as_of(agent: Agent, fact_id: int, as_of: datetime) -> Fact:
    """One visible fact as it was at `as_of` (see facts_as_they_were). NotFound (`fact_not_found`)
    when the agent may not see it today or it was recorded after `as_of`."""
    fact = fact_for_agent(agent, fact_id)
    if fact.created_at > as_of:
        raise NotFound(f"Fact {fact_id} was recorded after as_of.", code="fact_not_found")
    return facts_as_they_were([fact], as_of)[0]


def facts_as_they_were(facts: list[Fact], as_of: datetime) -> list[Fact]:
    """Copies of the facts recorded by `as_of` with their status (querysets.status_then) and
    supersession as of then; confidence and counters stay today's. For display only."""
    recorded = [f for f in facts if f.created_at <= as_of]
    statuses = dict(
        Fact.objects.filter(pk__in=[f.pk for f in recorded]).annotate(then=status_then(as_of)).values_list("pk", "then")
    )
    then = []
    for fact in recorded:
        was = copy.copy(fact)  # Model.__getstate__ copies _state and its cache: the original is untouched
        if was.superseded_at is not None and was.superseded_at > as_of:
            was.superseded_by, was.superseded_at, was.supersede_reason = None, None, ""
        was.status = statuses.get(fact.pk, fact.status)
        then.append(was)
    return then


def conflicts_as_of(conflicts: list[Conflict], as_of: datetime) -> list[Conflict]:
    """The conflicts detected by `as_of`; one decided after it shows as it was then: open. An open
    one shows the pair it asked about then (re-pointed to a successor only later: the earlier
    fact) and its facts as they were, so whether it waited or was closed is that of then."""
    then = []
    for conflict in conflicts:
        if conflict.detected_at > as_of:
            continue
        if conflict.decided_at is not None and conflict.decided_at > as_of:
            conflict = copy.copy(conflict)
            conflict.status, conflict.resolution, conflict.rule = Conflict.Status.OPEN, "", ""
            conflict.winner, conflict.loser, conflict.decided_at = None, None, None
        then.append(conflict)
    opened = [c for c in then if c.status == Conflict.Status.OPEN]
    if not opened:
        return then
    later = AuditEvent.objects.filter(
        target_type="conflict", target_id__in=[c.pk for c in opened], verb="conflict.repointed", created_at__gt=as_of
    ).order_by("-created_at", "-id")
    undo: dict[int, list[dict[str, Any]]] = {}
    for event in later:
        undo.setdefault(event.target_id or 0, []).append(event.detail or {})
    wanted = {d["from"] for moves in undo.values() for d in moves if isinstance(d.get("from"), int)}
    earlier = {
        f.pk: f for f in Fact.objects.filter(pk__in=wanted).defer("embedding", "content_embedding", "search_vector")
    }
    out = []
    for conflict in then:
        if conflict.status == Conflict.Status.OPEN:
            conflict = copy.copy(conflict)
            for move in undo.get(conflict.pk, []):  # newest first: back to the pair of then
                if move.get("side") in ("existing", "proposed") and move.get("from") in earlier:
                    setattr(conflict, move["side"], earlier[move["from"]])
        out.append(conflict)
    sides = {f.pk: f for c in out if c.status == Conflict.Status.OPEN for f in (c.existing, c.proposed)}
    was = {f.pk: f for f in facts_as_they_were(list(sides.values()), as_of)}  # one query for all
    for conflict in out:
        if conflict.status == Conflict.Status.OPEN:
            conflict.existing = was.get(conflict.existing_id, conflict.existing)
            conflict.proposed = was.get(conflict.proposed_id, conflict.proposed)
    return out


# --- Whether an open conflict waits for a person ---------------------------------------------------
# The API's status of a conflict stored `open` whose pair is no longer live (see conflict_status).
CONFLICT_CLOSED = "closed"
LIVE_STATUSES = (FactStatus.ACTIVE, FactStatus.CHALLENGED)


def _live(side: str) -> Q:
    return Q(**{f"{side}__superseded_by__isnull": True, f"{side}__status__in": LIVE_STATUSES})


# A possible conflict that waits for a person: open, both facts live (not superseded, not retired).
# The review queue's possible conflicts (review.selectors_queue.possible_conflicts) are these, and
# so is the API's `GET conflicts/?status=open`.
WAITING = Q(status=Conflict.Status.OPEN) & _live("existing") & _live("proposed")


def asked_alone(workspaces: Any) -> Q:
    """One question per disagreement (issue 34): a waiting pair joined to a question
    (Conflict.question) that still waits is settled with it, so only the question is asked; once
    that question no longer waits (its facts changed), the pair is asked on its own. The questions
    that still wait are read once, as a set (every question of the workspaces' open pairs that is
    WAITING): looked up pair by pair, a queue with thousands of pairs joined to a few questions ran
    the lookup once per pair on every page (issue 38: 14.0 → 3.2 ms at 100k facts). Not as NOT
    EXISTS: PostgreSQL turned that into an anti-join over every waiting pair, which on stale
    statistics it nested over whole tables (17 s at 3,000 facts in a test)."""
    questions = Conflict.objects.filter(
        status=Conflict.Status.OPEN, workspace__in=workspaces, question__isnull=False
    ).values("question_id")
    waiting = Conflict.objects.filter(WAITING, pk__in=questions).order_by().values("pk")
    # a pair without a question is kept: Django's exclude never excludes a NULL question_id
    return ~Q(question_id__in=waiting)


# Stored open, but a fact of the pair was superseded with no live successor to follow, or retired.
CLOSED = Q(status=Conflict.Status.OPEN) & ~(_live("existing") & _live("proposed"))


def conflict_closure(conflict: Conflict) -> str:
    """Why a possible conflict left open no longer waits for a person, in one sentence; "" when it
    waits, or was decided or dismissed. Its open conflicts follow a superseded fact to its live
    successor (memory.services.conflicts.follow_successor), so what is left is: a fact superseded
    by the other fact of the pair, or by one whose pair with it is asked about or dismissed
    elsewhere, and a fact deprecated or archived. The API (`closed_reason`) and the review page
    both say this."""
    if conflict.status != Conflict.Status.OPEN:
        return ""
    pair = ((conflict.existing, conflict.proposed), (conflict.proposed, conflict.existing))
    said = []
    for side, other in pair:
        if side.superseded_by_id is not None:
            by = (
                f"fact #{other.pk}, the other fact of the pair"
                if side.superseded_by_id == other.pk
                else f"fact #{side.superseded_by_id}"
            )
            said.append(f"fact #{side.pk} was superseded by {by}")
        elif side.status not in LIVE_STATUSES:
            said.append(f"fact #{side.pk} was {side.status}")
    return "; ".join(said)


def conflict_status(conflict: Conflict) -> str:
    """The status a conflict is answered with: its own, except `closed` for one left open whose
    pair is no longer live (conflict_closure says why); `open` always means it waits for a person."""
    return CONFLICT_CLOSED if conflict_closure(conflict) else conflict.status


def challenge_as_of(fact: Fact, as_of: datetime) -> AuditEvent | None:
    """Why `fact` (as of then) was challenged then: its latest `fact.challenged` event by `as_of`."""
    if fact.status != FactStatus.CHALLENGED:
        return None
    return (
        AuditEvent.objects.filter(target_type="fact", target_id=fact.pk, verb="fact.challenged", created_at__lte=as_of)
        .order_by("-created_at", "-id")
        .first()
    )


def conflicts_of(fact_ids: list[int]) -> QuerySet[Conflict]:
    """Every conflict involving these facts: decided, open (possible) or dismissed."""
    return (
        Conflict.objects.filter(Q(existing_id__in=fact_ids) | Q(proposed_id__in=fact_ids))
        .select_related(*_CONFLICT_FACTS)
        .defer(*_CONFLICT_FACTS_UNSHOWN)
    )


def mentions_of(
    fact: Fact, *, limit: int = MENTIONS_LIMIT, as_of: datetime | None = None
) -> tuple[list[FactMention], int]:
    """What was said each time the fact was stated again (newest first, at most `limit`) and how
    many such records there are; with `as_of`, only those recorded by then."""
    qs = FactMention.objects.filter(fact=fact).select_related("agent")
    if as_of is not None:
        qs = qs.filter(created_at__lte=as_of)
    return list(qs.order_by("-created_at", "-id")[:limit]), qs.count()


def latest_challenges(facts: list[Fact], *, current_only: bool = True) -> dict[int, AuditEvent]:
    """Why each challenged fact among `facts` was challenged: its latest `fact.challenged` audit
    event (detail: reason, detail), keyed by fact id. One query for any number of facts (DISTINCT
    ON the target). With `current_only` facts not challenged now are not looked up (an earlier
    challenge since revalidated does not count); the review queue shows decided items too."""
    ids = [f.pk for f in facts if f.status == FactStatus.CHALLENGED or not current_only]
    if not ids:
        return {}
    events = (
        AuditEvent.objects.filter(target_type="fact", target_id__in=ids, verb="fact.challenged")
        .order_by("target_id", "-created_at", "-id")
        .distinct("target_id")
    )
    return {e.target_id: e for e in events if e.target_id is not None}


def challenge_body(event: AuditEvent | None) -> dict[str, Any] | None:
    """The API's `challenge`: {reason, detail, at, by} from a `fact.challenged` event, or None."""
    if event is None:
        return None
    detail = event.detail or {}
    return {
        "reason": str(detail.get("reason", "")),
        "detail": str(detail.get("detail", "")),
        "at": event.created_at,
        "by": event.actor_label,
    }


def conflicts_for_agent(agent: Agent, filters: dict[str, Any]) -> QuerySet[Conflict]:
    """Conflicts in the agent's workspace outside its `none` domains."""
    visible = MemoryDomain.objects.visible_to(agent)
    qs = (
        Conflict.objects.filter(workspace_id=agent.workspace_id, domain__in=visible)
        .select_related(*_CONFLICT_FACTS)
        .defer(*_CONFLICT_FACTS_UNSHOWN)
    )
    if filters.get("status") == Conflict.Status.OPEN:
        qs = qs.filter(WAITING)  # the review queue's: both facts live
    elif filters.get("status") == CONFLICT_CLOSED:
        qs = qs.filter(CLOSED)
    elif filters.get("status"):
        qs = qs.filter(status=filters["status"])
    if filters.get("domain"):
        qs = qs.filter(domain=domain_for_agent(agent, domain=filters["domain"], repo=filters.get("repo")))
    if filters.get("topic"):
        qs = qs.filter(topic=filters["topic"])
    return qs.order_by("-detected_at", "-id")


def policies_for_agent(agent: Agent, *, active_only: bool = False) -> QuerySet[Policy]:
    qs = Policy.objects.visible_to(agent).select_related("domain__repo", "required_role")
    return qs.active() if active_only else qs
