"""The four voices of recall (SPEC §6), each a ranked list of fact ids.

Every voice starts from `Fact.objects.visible_to(agent).recallable()`: grants, workspace,
supersession, status and expiry are applied in one place (memory.querysets).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection, transaction
from django.db.models import Case, F, FloatField, QuerySet, Value, When
from django.db.models.functions import Cast, Exp, Extract, Now, Power
from pgvector.django import CosineDistance

from memory import decay
from memory.models import EpisodeFact, Fact

if TYPE_CHECKING:
    from agents.models import Agent

MAX_TERMS = 24
EF_SEARCH = 100
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./:+#-]*[A-Za-z0-9+#]|[A-Za-z0-9]")
# Words that carry no topic in a task or question; the english config drops its own stop words.
_FILLER = {
    "what",
    "which",
    "who",
    "whom",
    "how",
    "why",
    "when",
    "where",
    "does",
    "did",
    "do",
    "is",
    "are",
    "was",
    "were",
    "the",
    "a",
    "an",
    "of",
    "to",
    "in",
    "on",
    "for",
    "and",
    "or",
    "with",
    "about",
    "we",
    "our",
    "i",
    "me",
    "my",
    "you",
    "your",
    "it",
    "its",
    "this",
    "that",
    "these",
    "those",
    "be",
    "been",
    "there",
    "any",
    "please",
    "tell",
    "know",
    "should",
    "can",
    "could",
    "would",
    "use",
    "used",
    "using",
    "get",
    "make",
}


@dataclass(frozen=True)
class Scope:
    """Who is asking and where: the base queryset every voice starts from."""

    agent: Agent
    domain_id: int | None = None

    def facts(self) -> QuerySet[Fact]:
        qs = Fact.objects.visible_to(self.agent).recallable()
        return qs.filter(domain_id=self.domain_id) if self.domain_id else qs


def terms(text: str) -> list[str]:
    """The distinct content tokens of a query or task, in order, at most MAX_TERMS."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(text):
        lowered = token.lower()
        if lowered not in _FILLER and lowered not in seen:
            seen[lowered] = None
    return list(seen)[:MAX_TERMS]


def or_query(words: Sequence[str]) -> SearchQuery | None:
    """OR semantics over the terms; each term is parsed like the indexed text, so any input is safe."""
    query: SearchQuery | None = None
    for word in words:
        part = SearchQuery(word, config="english", search_type="plain")
        query = part if query is None else query | part
    return query


def decay_expression() -> Any:
    """exp(-(age/λ)^k) in SQL, with λ and k of each memory type from the (cached) profiles."""
    curves = decay.parameters()
    scale = Case(
        *[When(memory_type=t, then=Value(c.scale_days)) for t, c in curves.items()],
        default=Value(365.0),
        output_field=FloatField(),
    )
    shape = Case(
        *[When(memory_type=t, then=Value(c.shape)) for t, c in curves.items()],
        default=Value(0.8),
        output_field=FloatField(),
    )
    age_days = Cast(Extract(Now() - F("last_mentioned_at"), "epoch"), FloatField()) / Value(86400.0)
    positive_age = Case(When(last_mentioned_at__gt=Now(), then=Value(0.0)), default=age_days, output_field=FloatField())
    return Exp(-Power(positive_age / scale, shape))


def lexical(scope: Scope, text: str, *, limit: int, prefer_repo: str | None = None) -> list[tuple[int, float]]:
    """Full-text matches (GIN index) with OR semantics, ranked by text rank × decay × confidence;
    with `prefer_repo`, that repo's facts come first."""
    query = or_query(terms(text))
    if query is None:
        return []
    qs = (
        scope.facts()
        .filter(search_vector=query)
        .annotate(rank=SearchRank(F("search_vector"), query, normalization=Value(1)))
        .annotate(score=F("rank") * decay_expression() * F("confidence"))
    )
    if prefer_repo:
        qs = qs.annotate(in_repo=Case(When(domain__repo__slug=prefer_repo, then=Value(1)), default=Value(0))).order_by(
            "-in_repo", "-score", "-id"
        )
    else:
        qs = qs.order_by("-score", "-id")
    return [(pk, float(score)) for pk, score in qs.values_list("id", "score")[:limit]]


def semantic(scope: Scope, vector: Sequence[float], *, limit: int) -> list[tuple[int, float]]:
    """Nearest facts by cosine (HNSW index); returns (id, similarity)."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL hnsw.ef_search = {max(EF_SEARCH, limit)}")
        rows = list(
            scope.facts()
            .annotate(distance=CosineDistance("embedding", list(vector)))
            .order_by("distance")
            .values_list("id", "distance")[:limit]
        )
    return [(pk, 1.0 - float(distance)) for pk, distance in rows if distance is not None]


def temporal(scope: Scope, pool: Sequence[int], *, limit: int) -> list[tuple[int, float]]:
    """The most recently active facts among the relevant pool (newest first); with no pool,
    the most recently active facts of the scope."""
    qs = scope.facts()
    qs = qs.filter(pk__in=list(pool)) if pool else qs
    rows = qs.order_by("-last_mentioned_at", "-id").values_list("id", "last_mentioned_at")[:limit]
    return [(pk, when.timestamp()) for pk, when in rows]


def graph(scope: Scope, seeds: Sequence[int], *, limit: int) -> list[tuple[int, float]]:
    """Two hops over episode edges: seed fact → episode it was written in → other facts written
    there. Scored by how many seeds (weighted by seed rank) reach each fact."""
    if not seeds:
        return []
    seed_weight = {pk: 1.0 / (1 + i) for i, pk in enumerate(seeds)}
    links = list(
        EpisodeFact.objects.filter(fact_id__in=list(seeds), relation=EpisodeFact.Relation.WRITTEN).values_list(
            "episode_id", "fact_id"
        )[:500]
    )
    if not links:
        return []
    episode_weight: dict[int, float] = defaultdict(float)
    for episode_id, fact_id in links:
        episode_weight[episode_id] += seed_weight[fact_id]
    neighbours = (
        EpisodeFact.objects.filter(episode_id__in=list(episode_weight), relation=EpisodeFact.Relation.WRITTEN)
        .exclude(fact_id__in=list(seeds))
        .values_list("episode_id", "fact_id")[:2000]
    )
    score: dict[int, float] = defaultdict(float)
    for episode_id, fact_id in neighbours:
        score[fact_id] += episode_weight[episode_id]
    allowed = set(scope.facts().filter(pk__in=list(score)).values_list("id", flat=True))
    ranked = sorted(((pk, s) for pk, s in score.items() if pk in allowed), key=lambda x: (-x[1], x[0]))
    return ranked[:limit]
