"""The review queue: everything waiting for a person, in one list, limited to the domains the
person may review (review.access). Remember reviews are scoped by workspace membership."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from memory import access
from memory.models import Agent, Candidate, Conflict, Fact, FactStatus, MemoryDomain, Workspace
from memory.selectors import ASKED_ALONE
from review.access import reviewable_domain_ids, reviews_for
from review.models import RememberReview
from review.selectors_held import count_waiting_candidates, waiting_candidates

KINDS = {
    "remember": "Remember review",
    "candidate": "Candidate needing approval",
    "conflict": "Conflict lost by a human-stated fact",
    "possible": "Possible conflict",
    "challenged": "Challenged fact",
}
# Kinds decided in bulk from the list: approve / deny map to these decisions. Conflicts and
# possible conflicts need a side chosen, remember reviews an item-by-item look: one at a time.
BULK_KINDS = {"candidate": ("approve", "deny"), "challenged": ("revalidate", "deprecate")}
MAX_AGE_DAYS = 36_500
LIST_LIMIT = 200


@dataclass
class QueueEntry:
    kind: str
    key: str  # "<kind>-<pk>", stable id for the page
    title: str
    workspace: Workspace
    domain_label: str
    created_at: datetime
    obj: Any

    @property
    def kind_label(self) -> str:
        """The item's heading: a decided conflict says which rule decided it (one opened from the
        activity need not have a human-stated loser)."""
        if self.kind != "conflict":
            return KINDS[self.kind]
        rule = self.obj.rule
        how = "by a person" if rule == Conflict.Rule.HUMAN else f"on {self.obj.get_rule_display()}"
        lost = ": a human-stated fact lost" if self.obj.loser.veracity == "human_stated" else ""
        return f"Conflict decided {how}{lost}"

    @property
    def agent(self) -> Agent | None:
        """The agent that proposed what waits here: the candidate's submitter, the remember
        review's agent, the author of the fact that won or may contradict, of the challenged fact."""
        obj = self.obj
        if self.kind == "candidate":
            return obj.submitted_by_agent
        if self.kind == "remember":
            return obj.agent
        if self.kind == "conflict":
            return obj.winner.created_by_agent if obj.winner is not None else None
        if self.kind == "possible":
            return obj.proposed.created_by_agent
        return obj.created_by_agent

    @property
    def agent_name(self) -> str:
        """The proposing agent's name ('' when a person or the system proposed it)."""
        agent = self.agent
        if agent is not None:
            return agent.name
        return getattr(self.obj, "submitted_by_label", "") if self.kind == "candidate" else ""


def queue(
    user: Any,
    params: dict[str, str],
    *,
    limit: int | None = None,
    pk: int | None = None,
    ahead_of: int | None = None,
) -> tuple[list[QueueEntry], dict[str, int]]:
    """Entries filtered by workspace, domain, kind, agent and age, newest (default) or oldest
    first, at most `limit` of each kind (LIST_LIMIT; 0: none, the counts only), and the count of
    each kind over every item the other filters leave, listed or not: the kind filter narrows
    the list, not the counts (issue 37). With `pk`, only the item of that primary key, of the
    filtered kind alone (entry_for): an item past the list is as much the person's as a listed
    one. With `ahead_of` (and `limit=0`), the filtered kind's count is of the items that come before
    that one in the page's order (items_ahead). A bounded number of queries whatever the queue's length."""
    limit = LIST_LIMIT if limit is None else limit
    domain_ids = reviewable_domain_ids(user)
    visible = access.workspaces(user, "view")
    if params.get("workspace"):
        visible = visible.filter(slug=params["workspace"])
    # Read once: every kind's query then names the ids instead of planning the membership subquery
    # again (issue 38: PostgreSQL's planning was most of each query's time).
    workspaces = list(visible.values_list("pk", flat=True))
    if params.get("domain"):  # by label (`architecture`, `repo:web/context`), among the person's own
        domain_ids = {
            d.pk for d in access.domains(user, "decide").select_related("repo") if d.label == params["domain"]
        }
    since = None
    if params.get("age", "").isdecimal():  # a century at most: further back is before year 1
        since = timezone.now() - timedelta(days=min(int(params["age"]), MAX_AGE_DAYS))
    listed = [params["kind"]] if params.get("kind") in KINDS else list(KINDS)
    kinds = listed if pk is not None or ahead_of is not None else list(KINDS)
    oldest = params.get("order") == "oldest"
    agent = params.get("agent") or None
    entries: list[QueueEntry] = []
    counts = dict.fromkeys(KINDS, 0)

    def cap(kind: str) -> int:
        """How many of this kind to list: a kind the filter leaves out is counted only."""
        return limit if kind in listed else 0

    def take(kind: str, items: QuerySet[Any], moment: str, by_agent: Q) -> list[Any]:
        """The first `cap` items in the page's order (counted, all of them, when there are more)."""
        if since:
            items = items.filter(**{f"{moment}__lt": since})
        if agent:
            items = items.filter(by_agent)
        if pk is not None:
            items = items.filter(pk=pk)
        if ahead_of is not None:
            items = _ahead_of(items, moment, ahead_of, oldest=oldest)
        ordered = items.order_by(*((moment, "id") if oldest else (f"-{moment}", "-id")))
        most = cap(kind)
        first = list(ordered[:most]) if most else []
        counts[kind] = len(first) if len(first) < most else items.count()
        return first

    if "remember" in kinds and not params.get("domain"):
        reviews = (
            reviews_for(user, RememberReview.objects.all())
            .filter(status="pending", workspace__in=workspaces)
            .select_related("workspace", "agent", "repo")
        )
        entries += [
            QueueEntry(
                "remember",
                f"remember-{r.pk}",
                f"{r.agent.name if r.agent else 'agent'}: session {r.session_id}",
                r.workspace,
                r.repo.slug if r.repo else "",
                r.created_at,
                r,
            )
            for r in take("remember", reviews, "created_at", Q(agent__name=agent))
        ]
    if "candidate" in kinds:
        # Every candidate waiting on a person or a replay, approved-but-held ones too (issue 18).
        most = cap("candidate")
        candidates = (
            waiting_candidates(workspaces, domain_ids, since=since, limit=most, oldest=oldest, agent=agent, pk=pk)
            if most
            else []
        )
        counts["candidate"] = len(candidates)
        if len(candidates) >= most:  # more may wait: count them (their gates are read in Python)
            counts["candidate"] = count_waiting_candidates(
                workspaces, domain_ids, most=QUEUE_SIZE_MAX_CANDIDATES, since=since, agent=agent, pk=pk
            )
        entries += [
            QueueEntry(
                "candidate", f"candidate-{c.pk}", c.proposed_memory[:120], c.workspace, c.domain.label, c.created_at, c
            )
            for c in candidates
        ]
    if "conflict" in kinds:
        # A loser implies a winner (conflict_winner_is_of_the_pair); the pair's vectors are never shown.
        conflicts = (
            Conflict.objects.filter(
                workspace__in=workspaces,
                domain_id__in=domain_ids,
                reviewed_at__isnull=True,
                loser__veracity="human_stated",
                winner__isnull=False,
            )
            .select_related("workspace", "domain__repo", "winner__created_by_agent", "loser")
            .defer(
                *(
                    f"{side}__{field}"
                    for side in ("winner", "loser")
                    for field in ("embedding", "content_embedding", "search_vector")
                )
            )
        )
        entries += [
            QueueEntry(
                "conflict", f"conflict-{c.pk}", c.winner.content[:120], c.workspace, c.domain.label, c.detected_at, c
            )
            for c in take("conflict", conflicts, "detected_at", Q(winner__created_by_agent__name=agent))
        ]
    if "possible" in kinds:
        entries += [
            QueueEntry(
                "possible", f"possible-{c.pk}", c.proposed.content[:120], c.workspace, c.domain.label, c.detected_at, c
            )
            for c in take(
                "possible",
                possible_conflicts(workspaces, domain_ids),
                "detected_at",
                Q(proposed__created_by_agent__name=agent),
            )
        ]
    if "challenged" in kinds:
        facts = (
            Fact.objects.filter(
                workspace__in=workspaces, domain_id__in=domain_ids, status="challenged", superseded_by__isnull=True
            )
            .select_related("workspace", "domain__repo", "created_by_agent")
            .defer("embedding", "content_embedding", "search_vector")
        )
        entries += [
            QueueEntry(
                "challenged", f"challenged-{f.pk}", f.content[:120], f.workspace, f.domain.label, f.status_changed_at, f
            )
            for f in take("challenged", facts, "status_changed_at", Q(created_by_agent__name=agent))
        ]
    entries.sort(key=lambda e: e.created_at, reverse=not oldest)
    return entries, counts


def _ahead_of(items: QuerySet[Any], moment: str, pk: int, *, oldest: bool) -> QuerySet[Any]:
    """The items that come before item `pk` in the list's order (newest first: a later moment, or
    the same and a greater id). All of them when `pk` is not among `items`; none when it has no
    moment (its place is unknown, so that it is looked for)."""
    row = items.filter(pk=pk).values_list(moment).first()
    if row is None:
        return items
    if row[0] is None:
        return items.none()
    before = "lt" if oldest else "gt"
    return items.filter(Q(**{f"{moment}__{before}": row[0]}) | Q(**{moment: row[0], f"id__{before}": pk}))


def items_ahead(user: Any, params: dict[str, str], kind: str, pk: int) -> int | None:
    """How many items of `kind` come before item `pk` in the list's order under `params` (its
    place in its kind: at LIST_LIMIT or more it is not listed), all of them when it is not in that
    list. None for candidates, whose waiting is read in Python (their place is found by reading
    the list)."""
    if kind not in KINDS or kind == "candidate":
        return None
    return queue(user, {**params, "kind": kind}, limit=0, ahead_of=pk)[1][kind]


def queue_counts(user: Any) -> dict[str, int]:
    """How many items of each kind wait for this person (the dashboard's badges): queue()'s counts,
    without the list. Candidates are counted up to QUEUE_SIZE_MAX_CANDIDATES, as the metrics' gauge."""
    return queue(user, {}, limit=0)[1]


def possible_conflicts(workspaces: Any, domain_ids: set[int] | None) -> QuerySet[Conflict]:
    """Possible conflicts (the classifier was unsure) in these domains (None: all of the
    workspaces'), both facts still live: a pair whose fact was superseded or retired meanwhile has
    nothing left to decide."""
    scope = Q(workspace__in=workspaces) & (Q() if domain_ids is None else Q(domain_id__in=domain_ids))
    # Both facts live, tested on the joins select_related reads them through (two IN subqueries
    # doubled PostgreSQL's planning time, issue 38).
    live = {
        f"{side}__{test}": value
        for side in ("existing", "proposed")
        for test, value in (("superseded_by__isnull", True), ("status__in", [FactStatus.ACTIVE, FactStatus.CHALLENGED]))
    }
    return (
        Conflict.objects.filter(scope, status=Conflict.Status.OPEN)
        .filter(**live)
        .filter(ASKED_ALONE)
        .select_related("workspace", "domain__repo", "existing", "proposed__created_by_agent")
        .defer(
            *(
                f"{side}__{field}"
                for side in ("existing", "proposed")
                for field in ("embedding", "content_embedding", "search_vector")
            )
        )
    )


# Candidates read at most by the metrics' gauge per scrape; beyond, the gauge shows this many.
QUEUE_SIZE_MAX_CANDIDATES = 10_000


def queue_sizes() -> dict[str, int]:
    """How many items of each kind wait for a person, across every workspace and domain — what
    queue() lists to the people who may decide them, uncapped. For the metrics' gauge, so cheap:
    a COUNT per kind, and the open candidates with their replays read once to apply their gates."""
    workspaces = Workspace.objects.all()
    return {
        "remember": RememberReview.objects.filter(status="pending").count(),
        "candidate": count_waiting_candidates(workspaces, None, most=QUEUE_SIZE_MAX_CANDIDATES),
        # The same filters as queue()'s conflicts and challenged facts.
        "conflict": Conflict.objects.filter(
            reviewed_at__isnull=True, loser__veracity="human_stated", winner__isnull=False
        ).count(),
        "possible": possible_conflicts(workspaces, None).count(),
        "challenged": Fact.objects.filter(status="challenged", superseded_by__isnull=True).count(),
    }


def decided_possible_conflict(user: Any, pk: int) -> Conflict | None:
    """A possible conflict already decided, in a domain the person may review (else None): a
    second decision on it is answered as such, not as a missing item."""
    return (
        access.restrict(Conflict.objects.filter(pk=pk, decided_by__isnull=False), user, "decide")
        .exclude(status=Conflict.Status.OPEN)
        .first()
    )


def live_rivals(candidate_or_fact: Candidate | Fact) -> list[Fact]:
    """The live facts on the same domain and topic: what a promotion would supersede or contradict."""
    qs = Fact.objects.filter(domain_id=candidate_or_fact.domain_id, topic=candidate_or_fact.topic).live()
    if isinstance(candidate_or_fact, Fact):
        qs = qs.exclude(pk=candidate_or_fact.pk)
    return list(
        qs.filter(~Q(status="archived"))
        .defer("embedding", "content_embedding", "search_vector")
        .order_by("-created_at")[:5]
    )


def entry_for(user: Any, kind: str, pk: int) -> QueueEntry | None:
    """One entry, if it is in the person's queue, listed or not (else None: answered as not found)."""
    entries, _ = queue(user, {"kind": kind}, pk=pk)
    return entries[0] if entries else None


def filter_choices(user: Any) -> tuple[list[MemoryDomain], list[str]]:
    """The domains (by label) and agent names a person may filter the queue by: only domains they
    may decide and agents of their own workspaces, so the choices reveal nothing else."""
    domains = sorted(access.domains(user, "decide").select_related("repo"), key=lambda d: d.label)
    unique = list({d.label: d for d in domains}.values())
    agents = access.restrict(Agent.objects.all(), user, "view").order_by("name").values_list("name", flat=True)
    return unique, list(dict.fromkeys(agents))
