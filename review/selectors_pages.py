"""Reads for the governance pages: grants matrix, memory browser, fact page, knowledge graph.
Each applies review.access (workspace membership, per-domain review permission) itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.core.paginator import Page
from django.db.models import Count, F, Q, QuerySet, Window
from django.urls import reverse

from memory import decay
from memory.models import AccessGrant, AuditEvent, Conflict, EpisodeFact, Fact, MemoryDomain, Policy, Role, Workspace
from memory.pagination import COUNT_CAP, BoundedPaginator
from memory.selectors import conflicts_of, fact_history, mentions_of
from memory.services.policies import policy_budget, policy_line
from review.access import reviewable_domains
from review.selectors import origin_review_ids

PAGE_SIZE = 50


@dataclass
class GrantCell:
    role: Role
    domain: MemoryDomain
    level: str
    explicit: bool


def grants_matrix(workspace: Workspace) -> tuple[list[Role], list[MemoryDomain], dict[tuple[int, int], GrantCell]]:
    """Roles × domains with each cell's effective level (no row = read, shown as the default)."""
    roles = list(Role.objects.filter(workspace=workspace).order_by("name"))
    domains = list(
        MemoryDomain.objects.filter(workspace=workspace).select_related("repo").order_by("repo__slug", "name")
    )
    rows = {(g.role_id, g.domain_id): g.level for g in AccessGrant.objects.filter(role__workspace=workspace)}
    cells = {
        (r.pk, d.pk): GrantCell(r, d, rows.get((r.pk, d.pk), "read"), (r.pk, d.pk) in rows)
        for r in roles
        for d in domains
    }
    return roles, domains, cells


def grant_cell(workspace: Workspace, role_id: int, domain_id: int) -> GrantCell:
    role = Role.objects.get(workspace=workspace, pk=role_id)
    domain = MemoryDomain.objects.select_related("repo").get(workspace=workspace, pk=domain_id)
    level = AccessGrant.objects.filter(role=role, domain=domain).values_list("level", flat=True).first()
    return GrantCell(role, domain, level or "read", level is not None)


def recent_grant_changes(workspace: Workspace, limit: int = 15) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(workspace=workspace, verb="grant.changed").order_by("-created_at")[:limit]


def _ids(domains: QuerySet[MemoryDomain]) -> list[int]:
    """The domains' ids, for a filter on facts (see browse_facts)."""
    return list(domains.values_list("pk", flat=True))


def browse_facts(user: Any, workspace: Workspace, params: dict[str, str]) -> tuple[QuerySet[Fact], dict[str, Any]]:
    """The memory browser's facts: full-text only (it may rank differently from search_memory),
    filtered by domain, type, veracity, status and repo, within the person's domains. `extra`:
    the domains, and `ranked` when a query orders them by rank (browser_pages pages them so)."""
    domains = reviewable_domains(user, workspace)
    # The ids themselves, not a subquery: a workspace's few domains are rarely analysed (too few
    # changes for autovacuum), so PostgreSQL guessed one domain, fetched every fact of each and
    # sorted them all (at 100k facts: 430 ms); with the ids it reads fact_newest_first in order.
    qs = Fact.objects.filter(workspace=workspace, domain__in=_ids(domains)).select_related("domain__repo")
    if params.get("domain"):
        qs = qs.filter(domain_id=int(params["domain"])) if params["domain"].isdecimal() else qs.none()
    for field in ("memory_type", "veracity", "status"):
        if params.get(field):
            qs = qs.filter(**{field: params[field]})
    if params.get("repo"):
        qs = qs.filter(domain__repo__slug=params["repo"])
    if params.get("current", "1") == "1":
        qs = qs.filter(superseded_by__isnull=True)
    q = (params.get("q") or "").strip()
    if q:
        query = SearchQuery(q, config="english", search_type="websearch")
        qs = (
            qs.filter(search_vector=query).annotate(rank=SearchRank(F("search_vector"), query)).order_by("-rank", "-id")
        )
    else:
        qs = qs.order_by("-created_at", "-id")
    return qs.defer("embedding", "content_embedding", "search_vector"), {"domains": domains, "ranked": bool(q)}


def browser_pages(facts: QuerySet[Fact], *, ranked: bool) -> BoundedPaginator:
    """The paginator of browse_facts' facts: a ranked list read with its count in one pass."""
    return RankedPaginator(facts, PAGE_SIZE) if ranked else BoundedPaginator(facts, PAGE_SIZE)


class RankedPaginator(BoundedPaginator):
    """BoundedPaginator for facts ordered by a full-text rank. PostgreSQL ranks every match to sort
    them anyway, so one statement reads the page's ids with the count of all matches (COUNT(*)
    OVER ()), and a second the page's facts by id: the matches are read once, not again to be
    counted. The same pages and count as BoundedPaginator."""

    def get_page(self, number: Any) -> Page:
        self.reach(number)
        try:
            wanted = int(number)
        except (TypeError, ValueError):
            wanted = 1  # as Paginator.get_page: what is not a number asks for the first page
        rows = []
        if wanted >= 1:
            bottom = (wanted - 1) * self.per_page
            counted = self.object_list.annotate(matches=Window(Count("*")))  # type: ignore[attr-defined]
            rows = list(counted.values_list("pk", "matches")[bottom : bottom + self.per_page])
        if not rows:  # no match, or past the last page: counted, then the page Paginator chooses
            return super().get_page(number)
        self.__dict__["count"] = min(rows[0][1], self.cap + 1)  # as BoundedPaginator.count
        facts = self.object_list.order_by().in_bulk([pk for pk, _ in rows])  # type: ignore[attr-defined]
        # A fact superseded between the two statements leaves the page as it would the next read.
        return Page([facts[pk] for pk, _ in rows if pk in facts], wanted, self)


def with_decay(facts: list[Fact]) -> list[Fact]:
    """Annotate each fact with its decay weight now (for the browser's column)."""
    for fact in facts:
        fact.decay_now = decay.weight_at(fact.memory_type, fact.last_mentioned_at)  # type: ignore[attr-defined]
    return facts


def fact_page(user: Any, workspace: Workspace, fact_id: int) -> dict[str, Any]:
    domains = reviewable_domains(user, workspace)
    fact = (
        Fact.objects.filter(workspace=workspace, domain__in=domains, pk=fact_id)
        .select_related("domain__repo", "created_by_agent", "created_by_user")
        .defer("embedding", "content_embedding")
        .first()
    )
    if fact is None:
        from django.http import Http404

        raise Http404("No such fact.")
    history = fact_history(fact)
    ids = [f.pk for f in history]
    episodes = EpisodeFact.objects.filter(fact=fact).select_related("episode").order_by("-episode__started_at")[:30]
    points = decay.curve_points(fact.memory_type, days=max(30, int(decay.age_days(fact.last_mentioned_at) * 2) + 30))
    mentions, mentions_total = mentions_of(fact)
    return {
        "fact": fact,
        "origin_review_id": origin_review_ids([fact]).get(fact.pk),
        "history": history,
        "mentions": mentions,
        "mentions_total": mentions_total,
        "conflicts": list(conflicts_of(ids)),
        "sources": list(fact.source_observations.all()),
        "episodes": list(episodes),
        "curve": decay_svg(points, decay.age_days(fact.last_mentioned_at)),
        "decay_now": decay.weight_at(fact.memory_type, fact.last_mentioned_at),
    }


def decay_svg(
    points: list[tuple[float, float]], now_days: float, width: int = 360, height: int = 120
) -> dict[str, Any]:
    """Coordinates for a small inline SVG of the decay curve with "now" marked, and a y-axis of
    the weight (0–1) with its ticks; the left margin holds the tick labels."""
    max_days = points[-1][0] or 1.0
    left = 44

    def xy(d: float, w: float) -> tuple[float, float]:
        return round(left + (width - left - 10) * d / max_days, 1), round(10 + (height - 30) * (1 - w), 1)

    path = " ".join(f"{'M' if i == 0 else 'L'}{x},{y}" for i, (x, y) in enumerate(xy(d, w) for d, w in points))
    now_weight = next((w for d, w in points if d >= now_days), points[-1][1])
    nx, ny = xy(min(now_days, max_days), now_weight)
    return {
        "width": width,
        "height": height,
        "path": path,
        "now_x": nx,
        "now_y": ny,
        "max_days": int(max_days),
        "baseline": height - 20,
        "left": left,
        "top": 10,
        "mid_y": round((10 + height - 20) / 2),
        "y_ticks": [{"label": f"{w:.1f}", "y": xy(0, w)[1]} for w in (0.0, 0.5, 1.0)],
    }


def policies_page(user: Any, workspace: Workspace) -> dict[str, Any]:
    domains = reviewable_domains(user, workspace)
    policies = list(
        Policy.objects.filter(workspace=workspace, domain__in=domains)
        .select_related("domain__repo", "required_role")
        .order_by("-active", "domain__name", "created_at")
    )
    for policy in policies:
        policy.line = policy_line(policy)  # type: ignore[attr-defined]
    return {"policies": policies, "budget": policy_budget(workspace)}


GRAPH_FACT_LIMIT = 200  # the graph draws at most this many facts; the page says when there are more
GRAPH_EPISODE_LINKS = 400
GRAPH_LABEL_WORDS = 6
GRAPH_LABEL_CHARS = 40


def graph_label(text: str) -> str:
    """A fact's label on the graph: its first words, cut at a word, marked with … when cut."""
    words = text.split()
    label = " ".join(words[:GRAPH_LABEL_WORDS])
    if len(label) > GRAPH_LABEL_CHARS:
        label = label[:GRAPH_LABEL_CHARS].rsplit(" ", 1)[0] or label[:GRAPH_LABEL_CHARS]
    return label if label == " ".join(words) else f"{label}…"


def graph_data(
    user: Any, workspace: Workspace, *, domain_id: int | None = None, q: str = "", limit: int = GRAPH_FACT_LIMIT
) -> dict[str, Any]:
    """Nodes and edges for Cytoscape: each domain a parent node holding its facts, episodes beside
    them; supersession, conflict and episode edges. At most `limit` facts, the most recently
    mentioned; `facts` says how many were drawn of how many match (`capped`: more than COUNT_CAP)."""
    domains = reviewable_domains(user, workspace)
    facts_qs = (
        Fact.objects.filter(workspace=workspace, domain__in=_ids(domains))
        .select_related("domain__repo")
        .defer("embedding", "content_embedding", "search_vector")
    )
    if domain_id:
        facts_qs = facts_qs.filter(domain_id=domain_id)
    if q.strip():
        facts_qs = facts_qs.filter(search_vector=SearchQuery(q, config="english", search_type="websearch"))
    facts = list(facts_qs.order_by("-last_mentioned_at")[:limit])  # fact_recently_mentioned
    total = bounded_count(facts_qs) if len(facts) == limit else len(facts)
    ids = {f.pk for f in facts}
    in_graph = {f.domain_id: f.domain for f in facts}
    nodes: list[dict[str, Any]] = [
        {"data": {"id": f"d{d.pk}", "label": d.label, "kind": "domain"}}
        for d in sorted(in_graph.values(), key=lambda d: d.label)
    ]
    nodes += [
        {
            "data": {
                "id": f"f{f.pk}",
                "parent": f"d{f.domain_id}",
                "label": graph_label(f.content),
                "kind": "fact",
                "status": f.status,
                "superseded": f.superseded_by_id is not None,
                "url": reverse("review:fact", args=[workspace.slug, f.pk]),
                "domain": f.domain.label,
            }
        }
        for f in facts
    ]
    edges: list[dict[str, Any]] = []
    for f in facts:
        if f.superseded_by_id in ids:
            edges.append(
                {
                    "data": {
                        "id": f"s{f.pk}",
                        "source": f"f{f.pk}",
                        "target": f"f{f.superseded_by_id}",
                        "kind": "supersedes",
                    }
                }
            )
    for c in Conflict.objects.filter(Q(winner_id__in=ids) & Q(loser_id__in=ids)):  # decided with a winner
        edges.append(
            {"data": {"id": f"c{c.pk}", "source": f"f{c.loser_id}", "target": f"f{c.winner_id}", "kind": "conflict"}}
        )
    links = list(
        EpisodeFact.objects.filter(fact_id__in=ids, relation="written").select_related("episode")[:GRAPH_EPISODE_LINKS]
    )
    seen_episodes: set[int] = set()
    for link in links:
        if link.episode_id not in seen_episodes:
            seen_episodes.add(link.episode_id)
            nodes.append(
                {
                    "data": {
                        "id": f"e{link.episode_id}",
                        "label": f"{link.episode.kind}: {link.episode.title[:32]}",
                        "kind": "episode",
                    }
                }
            )
        edges.append(
            {
                "data": {
                    "id": f"l{link.pk}",
                    "source": f"e{link.episode_id}",
                    "target": f"f{link.fact_id}",
                    "kind": "episode",
                }
            }
        )
    facts_count = {"shown": len(facts), "total": min(total, COUNT_CAP), "capped": total > COUNT_CAP}
    return {"nodes": nodes, "edges": edges, "facts": facts_count}


def bounded_count(facts: QuerySet[Fact]) -> int:
    """How many rows `facts` holds, counted no further than one past COUNT_CAP (the graph says
    "10,000+" beyond): a count of 100k facts would cost more than the graph it annotates."""
    return facts.order_by().values("pk")[: COUNT_CAP + 1].count()
