"""The review queue: everything waiting for a person, in one list, limited to the domains the
person may review (review.access). Remember reviews are scoped by workspace membership."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db.models import Count, Q, QuerySet, Window
from django.utils import timezone

from memory import access
from memory.models import Agent, Candidate, Conflict, Fact, FactStatus, MemoryDomain, Workspace
from memory.selectors import WAITING, asked_alone
from review.access import reviewable_domain_ids, reviews_for
from review.models import RememberReview
from review.selectors_held import count_waiting_candidates, epoch, waiting_candidate_keys, waiting_candidates

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


class ListKey(NamedTuple):
    """An entry's place in the list, read without the entry: its kind, primary key and moment
    (as epoch seconds: selectors_held.epoch)."""

    kind: str
    pk: int
    moment: float

    @property
    def key(self) -> str:
        return f"{self.kind}-{self.pk}"


class Queue:
    """The queue under one person's filters (workspace, domain, kind, agent, age) and order,
    newest (default) or oldest first: every kind's items as the list merges them, and the count of
    each kind over every item the other filters leave, listed or not (the kind filter narrows the
    list, not the counts: issue 37). Reads the person's scope once; each read below costs a bounded
    number of queries whatever the queue's length."""

    def __init__(self, user: Any, params: dict[str, str]) -> None:
        self.user, self.params = user, params
        self.domain_ids = reviewable_domain_ids(user)
        visible = access.workspaces(user, "view")
        if params.get("workspace"):
            visible = visible.filter(slug=params["workspace"])
        # Read once: every kind's query then names the ids instead of planning the membership subquery
        # again (issue 38: PostgreSQL's planning was most of each query's time).
        self.workspaces = list(visible.values_list("pk", flat=True))
        if params.get("domain"):  # by label (`architecture`, `repo:web/context`), among the person's own
            self.domain_ids = {
                d.pk for d in access.domains(user, "decide").select_related("repo") if d.label == params["domain"]
            }
        self.since = None
        if params.get("age", "").isdecimal():  # a century at most: further back is before year 1
            self.since = timezone.now() - timedelta(days=min(int(params["age"]), MAX_AGE_DAYS))
        self.listed = [params["kind"]] if params.get("kind") in KINDS else list(KINDS)
        self.oldest = params.get("order") == "oldest"
        self.agent = params.get("agent") or None

    def read(self, *, limit: int | None = None, pk: int | None = None) -> tuple[list[QueueEntry], dict[str, int]]:
        """The entries, at most `limit` of each listed kind (LIST_LIMIT; 0: none, the counts only),
        in the list's order, and the counts. With `pk`, only the item of that primary key, of the
        filtered kind alone (entry_for): an item past the list is as much the person's as a listed one."""
        limit = LIST_LIMIT if limit is None else limit
        kinds = self.listed if pk is not None else list(KINDS)
        entries: list[QueueEntry] = []
        counts = dict.fromkeys(KINDS, 0)
        for kind in kinds:
            most = limit if kind in self.listed else 0
            if kind == "candidate":
                found = self._candidates(limit=most, pk=pk) if most else []
                counts[kind] = len(found) if len(found) < most else self._count_candidates()
                entries += [self._entry(kind, c) for c in found]
            elif pk is not None and (items := self._items(kind, one=True)) is not None:
                first = (_asked_alone_one if kind == "possible" else list)(items.filter(pk=pk)) if most else []
                counts[kind] = len(first)
                entries += [self._entry(kind, item) for item in first]
            elif (items := self._items(kind)) is not None:
                first = list(self._ordered(kind, items)[:most]) if most else []
                counts[kind] = len(first) if len(first) < most else items.count()
                entries += [self._entry(kind, item) for item in first]
        return self._in_list_order(entries, lambda e: e.created_at), counts

    def keys(self, *, limit: int) -> tuple[list[ListKey], dict[str, int]]:
        """read()'s entries as keys (at most `limit` of each listed kind, in the list's order) and
        its counts: no item is read in full (issue 38: 100 items with their related rows were most
        of an item page's time), and a kind's first items are counted in the same statement."""
        keys: list[ListKey] = []
        counts = dict.fromkeys(KINDS, 0)
        for kind in KINDS:
            most = limit if kind in self.listed else 0
            if kind == "candidate":
                if not most:
                    counts[kind] = self._count_candidates()
                    continue
                found, counts[kind] = waiting_candidate_keys(
                    self.workspaces,
                    self.domain_ids,
                    limit=most,
                    most=QUEUE_SIZE_MAX_CANDIDATES,
                    since=self.since,
                    oldest=self.oldest,
                    agent=self.agent,
                )
                keys += [ListKey(kind, pk, moment) for moment, pk in found]
            elif (items := self._items(kind)) is not None:
                if not most:
                    counts[kind] = items.count()
                    continue
                # COUNT(*) OVER (): every waiting item is counted in the scan that finds the first.
                counted = self._ordered(kind, items).annotate(waiting=Window(Count("*")), at=epoch(_MOMENTS[kind]))
                rows = list(counted.values_list("at", "pk", "waiting")[:most])
                counts[kind] = rows[0][2] if rows else 0
                keys += [ListKey(kind, pk, moment) for moment, pk, _ in rows]
        return self._in_list_order(keys, lambda k: k.moment), counts

    def entries(self, keys: list[ListKey]) -> list[QueueEntry]:
        """The entries of `keys` (keys() of the same queue), read in full, in the same order: by
        primary key, the filters having chosen them (an item deleted meanwhile is left out)."""
        wanted: dict[str, list[int]] = {}
        for key in keys:
            wanted.setdefault(key.kind, []).append(key.pk)
        found: dict[str, QueueEntry] = {}
        for kind, pks in wanted.items():
            if kind == "candidate":
                items: Any = self._candidates(limit=len(pks), pks=pks)
            else:
                items = _shown(kind).filter(pk__in=pks).order_by()
            found.update((entry.key, entry) for entry in (self._entry(kind, item) for item in items))
        return [found[key.key] for key in keys if key.key in found]

    def _in_list_order(self, rows: list[Any], moment: Callable[[Any], datetime]) -> list[Any]:
        """Every kind's rows (each kind's in its order, the kinds in KINDS order) merged by moment: a
        stable sort, so that a tie keeps each kind's order and the kinds' order."""
        return sorted(rows, key=moment, reverse=not self.oldest)

    def _ordered(self, kind: str, items: QuerySet[Any]) -> QuerySet[Any]:
        moment = _MOMENTS[kind]
        return items.order_by(*((moment, "id") if self.oldest else (f"-{moment}", "-id")))

    def _candidates(self, *, limit: int, pk: int | None = None, pks: list[int] | None = None) -> list[Candidate]:
        return waiting_candidates(
            self.workspaces,
            self.domain_ids,
            since=self.since,
            limit=limit,
            oldest=self.oldest,
            agent=self.agent,
            pk=pk,
            pks=pks,
        )

    def _count_candidates(self) -> int:
        """The waiting candidates, counted up to QUEUE_SIZE_MAX_CANDIDATES (their gates are read in Python)."""
        return count_waiting_candidates(
            self.workspaces, self.domain_ids, most=QUEUE_SIZE_MAX_CANDIDATES, since=self.since, agent=self.agent
        )

    def _items(self, kind: str, *, one: bool = False) -> QuerySet[Any] | None:
        """The waiting items of a kind other than candidates under the filters, unordered, with what
        their entries show; None for remember reviews when a domain is chosen (they have none).
        `one`: the caller asks for one item, and applies possible conflicts' asked-alone rule itself
        (_asked_alone_one)."""
        items: QuerySet[Any]
        if kind == "remember":
            if self.params.get("domain"):
                return None
            items = reviews_for(self.user, _shown(kind)).filter(status="pending", workspace__in=self.workspaces)
            by_agent = Q(agent__name=self.agent)
        elif kind == "conflict":
            items = _shown(kind).filter(
                workspace__in=self.workspaces,
                domain_id__in=self.domain_ids,
                reviewed_at__isnull=True,
                loser__veracity="human_stated",
                winner__isnull=False,
            )
            by_agent = Q(winner__created_by_agent__name=self.agent)
        elif kind == "possible":
            items = possible_conflicts(self.workspaces, self.domain_ids, asked=not one)
            by_agent = Q(proposed__created_by_agent__name=self.agent)
        else:
            items = _shown(kind).filter(
                workspace__in=self.workspaces,
                domain_id__in=self.domain_ids,
                status="challenged",
                superseded_by__isnull=True,
            )
            by_agent = Q(created_by_agent__name=self.agent)
        if self.since:
            items = items.filter(**{f"{_MOMENTS[kind]}__lt": self.since})
        return items.filter(by_agent) if self.agent else items

    @staticmethod
    def _entry(kind: str, obj: Any) -> QueueEntry:
        if kind == "remember":
            title = f"{obj.agent.name if obj.agent else 'agent'}: session {obj.session_id}"
            return QueueEntry(
                kind, f"{kind}-{obj.pk}", title, obj.workspace, obj.repo.slug if obj.repo else "", obj.created_at, obj
            )
        if kind == "candidate":
            title = obj.proposed_memory
        elif kind == "conflict":
            title = obj.winner.content
        elif kind == "possible":
            title = obj.proposed.content
        else:
            title = obj.content
        moment = getattr(obj, _MOMENTS[kind])
        return QueueEntry(kind, f"{kind}-{obj.pk}", title[:120], obj.workspace, obj.domain.label, moment, obj)


# The moment that places an item of each kind in the list.
_MOMENTS = {
    "remember": "created_at",
    "candidate": "created_at",
    "conflict": "detected_at",
    "possible": "detected_at",
    "challenged": "status_changed_at",
}


def _shown(kind: str) -> QuerySet[Any]:
    """The items of a kind other than candidates with what their entries and pages show (their
    related rows), unfiltered."""
    if kind == "remember":
        return RememberReview.objects.select_related("workspace", "agent", "repo")
    if kind == "conflict":
        # A loser implies a winner (conflict_winner_is_of_the_pair); the pair's vectors are never shown.
        return Conflict.objects.select_related("workspace", "domain__repo", "winner__created_by_agent", "loser").defer(
            *_vectors("winner", "loser")
        )
    if kind == "possible":
        return Conflict.objects.select_related(
            "workspace", "domain__repo", "existing", "proposed__created_by_agent"
        ).defer(*_vectors("existing", "proposed"))
    return Fact.objects.select_related("workspace", "domain__repo", "created_by_agent").defer(
        "embedding", "content_embedding", "search_vector"
    )


def _vectors(*sides: str) -> list[str]:
    """The vector fields of the facts on these sides of a conflict: never shown, so never read."""
    return [f"{side}__{field}" for side in sides for field in ("embedding", "content_embedding", "search_vector")]


def queue(
    user: Any, params: dict[str, str], *, limit: int | None = None, pk: int | None = None
) -> tuple[list[QueueEntry], dict[str, int]]:
    """Queue(user, params).read(): the entries (at most `limit` of each kind) and the counts."""
    return Queue(user, params).read(limit=limit, pk=pk)


def queue_counts(user: Any) -> dict[str, int]:
    """How many items of each kind wait for this person (the dashboard's badges): queue()'s counts,
    without the list. Candidates are counted up to QUEUE_SIZE_MAX_CANDIDATES, as the metrics' gauge."""
    return queue(user, {}, limit=0)[1]


def possible_conflicts(workspaces: Any, domain_ids: set[int] | None, *, asked: bool = True) -> QuerySet[Conflict]:
    """Possible conflicts (the classifier was unsure) in these domains (None: all of the
    workspaces'), both facts still live: a pair whose fact was superseded or retired meanwhile has
    nothing left to decide. With `asked=False`, also those joined to a question that still waits
    (memory.selectors.asked_alone): for _asked_alone_one, which tests one pair's question itself."""
    scope = Q(workspace__in=workspaces) & (Q() if domain_ids is None else Q(domain_id__in=domain_ids))
    # Both facts live, tested on the joins select_related reads them through (two IN subqueries
    # doubled PostgreSQL's planning time, issue 38).
    live = {
        f"{side}__{test}": value
        for side in ("existing", "proposed")
        for test, value in (("superseded_by__isnull", True), ("status__in", [FactStatus.ACTIVE, FactStatus.CHALLENGED]))
    }
    waiting = _shown("possible").filter(scope, status=Conflict.Status.OPEN).filter(**live)
    return waiting.filter(asked_alone(workspaces)) if asked else waiting


def _asked_alone_one(pairs: QuerySet[Conflict]) -> list[Conflict]:
    """The pairs (one, by primary key, of possible_conflicts(asked=False)) that are asked on their
    own: asked_alone's rule for one pair, by its question's primary key. The set asked_alone reads
    (every waiting question of the workspaces) cost 2 ms for a single pair; a pair listed here is
    open and in the workspaces, so its question waits when that question is WAITING itself."""
    found = list(pairs)
    questions = {pair.question_id for pair in found if pair.question_id is not None}
    if questions:
        waiting = set(Conflict.objects.filter(WAITING, pk__in=questions).values_list("pk", flat=True))
        found = [pair for pair in found if pair.question_id not in waiting]
    return found


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
