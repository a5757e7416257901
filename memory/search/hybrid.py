"""search_memory (SPEC §6): keyword, semantic, and the four-voice hybrid.

hybrid: lexical (GIN full text), semantic (HNSW), recency (the most recently active of the
relevant facts) and graph (two hops over episode edges from the strongest lexical and
semantic seeds) are fused by weighted reciprocal rank, with weights chosen by the query's
intent (memory.search.intent); each candidate is scaled by decay × confidence and boosted
when it belongs to the caller's repo; MMR over the embeddings then keeps restatements of
one fact from crowding out different facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings

from memory import decay
from memory.embeddings import embed_text
from memory.models import Fact
from memory.recalls import open_episode, record_recall
from memory.search import voices
from memory.search.intent import WEIGHTS, classify

if TYPE_CHECKING:
    from agents.models import Agent

MODES = ("keyword", "semantic", "hybrid")
VOICES = ("lexical", "semantic", "recency", "graph")
CANDIDATES = 50
RRF_K = 20  # small k: with ≤50 candidates per voice, the head of each list should count
SEEDS_PER_VOICE = 3
RELEVANCE_FLOOR = 0.25  # semantic similarity a fact needs to be in the recency voice's pool
MMR_LAMBDA = 0.75


@dataclass
class Hit:
    fact: Fact
    score: float
    voices: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(VOICES))


@dataclass
class SearchResult:
    mode: str
    intent: str
    hits: list[Hit]
    episode_id: int | None


def _ranks(ranked: Sequence[tuple[int, float]]) -> dict[int, int]:
    return {pk: i + 1 for i, (pk, _) in enumerate(ranked)}


def _repo_boost(fact: Fact, repo: str | None) -> float:
    """Repo-scoped facts of the caller's repo rank first: a boost, not a filter (SPEC §6)."""
    if repo and fact.domain.repo is not None and fact.domain.repo.slug == repo:
        return float(settings.ENGRAM_REPO_BOOST)
    return 1.0


def _adjust(fact: Fact, score: float, repo: str | None) -> float:
    """Scale by decay × confidence (softened by a floor so relevance still leads), boost the repo."""
    floor = settings.ENGRAM_DECAY_FLOOR
    weight = decay.weight_at(fact.memory_type, fact.last_mentioned_at) * fact.confidence
    return score * (floor + (1.0 - floor) * weight) * _repo_boost(fact, repo)


def _mmr(hits: list[Hit], limit: int) -> list[Hit]:
    """Maximal marginal relevance over the fact embeddings."""
    if len(hits) <= 1:
        return hits[:limit]
    top = max(h.score for h in hits) or 1.0
    zero = np.zeros(384, dtype=np.float32)
    vectors = [np.asarray(h.fact.embedding, dtype=np.float32) if h.fact.embedding is not None else zero for h in hits]
    chosen: list[int] = []
    remaining = list(range(len(hits)))
    while remaining and len(chosen) < limit:
        best, best_value = remaining[0], -1e9
        for i in remaining:
            redundancy = max((float(vectors[i] @ vectors[j]) for j in chosen), default=0.0)
            value = MMR_LAMBDA * hits[i].score / top - (1 - MMR_LAMBDA) * redundancy
            if value > best_value:
                best, best_value = i, value
        chosen.append(best)
        remaining.remove(best)
    return [hits[i] for i in chosen]


def _load(ids: Sequence[int]) -> dict[int, Fact]:
    facts = Fact.objects.select_related("domain__repo").filter(pk__in=list(ids))
    return {f.pk: f for f in facts}


def search_memory(
    *,
    agent: Agent,
    query: str,
    mode: str = "hybrid",
    repo: str | None = None,
    domain_id: int | None = None,
    limit: int = 10,
    record: bool = True,
) -> SearchResult:
    """Search the agent's visible, recallable facts. Returned facts count as recalled."""
    scope = voices.Scope(agent=agent, domain_id=domain_id)
    intent = classify(query)
    lists: dict[str, list[tuple[int, float]]] = {}
    lists["lexical"] = voices.lexical(
        scope, query, limit=CANDIDATES if mode != "keyword" else max(limit * 3, CANDIDATES)
    )
    if mode != "keyword":
        vector = embed_text(query)
        lists["semantic"] = voices.semantic(scope, vector, limit=CANDIDATES)
    if mode == "hybrid":
        pool = [pk for pk, sim in lists["semantic"] if sim >= RELEVANCE_FLOOR] + [pk for pk, _ in lists["lexical"]]
        lists["recency"] = voices.temporal(scope, list(dict.fromkeys(pool)), limit=CANDIDATES)
        seeds = [pk for pk, _ in lists["lexical"][:SEEDS_PER_VOICE]] + [
            pk for pk, _ in lists["semantic"][:SEEDS_PER_VOICE]
        ]
        lists["graph"] = voices.graph(scope, list(dict.fromkeys(seeds)), limit=CANDIDATES)

    ranks = {name: _ranks(ranked) for name, ranked in lists.items()}
    if mode == "keyword":
        fused = {pk: score for pk, score in lists["lexical"]}
        weights = {"lexical": 1.0}
    else:
        weights = WEIGHTS[intent] if mode == "hybrid" else {"lexical": 1.0, "semantic": 1.0}
        fused = {}
        for name, rank_of in ranks.items():
            for pk, rank in rank_of.items():
                fused[pk] = fused.get(pk, 0.0) + weights[name] / (RRF_K + rank)

    ordered = sorted(fused, key=lambda pk: -fused[pk])[: max(limit * 4, CANDIDATES)]
    facts = _load(ordered)
    hits: list[Hit] = []
    for pk in ordered:
        fact = facts.get(pk)
        if fact is None:
            continue
        # The lexical score already carries decay × confidence (voices.lexical).
        score = fused[pk] * _repo_boost(fact, repo) if mode == "keyword" else _adjust(fact, fused[pk], repo)
        hits.append(Hit(fact=fact, score=score, voices={v: ranks.get(v, {}).get(pk) for v in VOICES}))
    hits.sort(key=lambda h: -h.score)
    hits = _mmr(hits, limit) if mode == "hybrid" else hits[:limit]

    episode_id = None
    if record and hits:
        episode_id = open_episode(agent=agent, kind="search", title=query)
        record_recall(episode_id, [h.fact.pk for h in hits])
    return SearchResult(mode=mode, intent=intent.value, hits=hits, episode_id=episode_id)
