"""search_memory (SPEC §6): keyword, semantic, and the four-voice hybrid.

hybrid: lexical (GIN full text), semantic (HNSW), recency (the most recently active of the
relevant facts) and graph (two hops over episode edges from the strongest lexical and
semantic seeds) are fused by a weighted sum of their min–max normalised scores (weights chosen
by the query's intent, memory.search.intent; reciprocal-rank fusion is kept as an option and
measured lower by `make eval`); recency adds only in proportion to a fact's direct (lexical +
semantic) evidence (GATES); each candidate is scaled by decay × confidence and boosted
when it belongs to the caller's repo; MMR over the embeddings then keeps restatements of
one fact from crowding out different facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings

from memory import decay
from memory.embeddings import embed_ahead
from memory.models import VERACITY_WEIGHT, Fact, MemoryDomain
from memory.recalls import EPISODE_ID_SQL, open_episode, record_recall
from memory.search import rank_rows, voices
from memory.search.as_of import mentioned_then
from memory.search.intent import WEIGHTS, classify

if TYPE_CHECKING:
    from memory.models import Agent

MODES = ("keyword", "semantic", "hybrid")
VOICES = ("lexical", "semantic", "recency", "graph")
CANDIDATES = 50
FUSION = "score"
RRF_K = 20
RECENCY_HALF_RANK = 5.0
SEEDS = 3
RELEVANCE_FLOOR = 0.25  # semantic similarity a fact needs to be in the recency voice's pool
MMR_LAMBDA = 0.5
MMR_SIMILAR = 0.8
# Current first (issue 35): of two candidates the write path found to be statements of the same
# thing it could not settle (an open question between them) that both answer the query (the later
# scores at least CURRENT_WITHIN of the earlier), the later statement ranks first unless the earlier
# carries more authority (validated or edited by a person, then veracity). A pair it settled has
# only one live fact. (Reading "the same thing" from the candidates' cosine, as the write path's
# retrieval does, reordered unrelated turns of one chat: their cosines overlap, CA 0.49 median
# for an update pair against 0.36 for others, 0.53 at the 90th percentile.)
CURRENT_WITHIN = 0.5
# Confidence orders near-equals in semantic and hybrid (a tool's output, confidence 0.5, is not
# half as relevant as a person's statement): a candidate is scaled by FLOOR + (1 − FLOOR) × its
# confidence. Before issue 39 it shared decay's 0.8 floor; kept apart when decay's became per type:
# on `make eval`'s tuning set, hybrid nDCG@10 0.785 with confidence applied fully, 0.796 with 0.8.
CONFIDENCE_FLOOR = 0.8
# How the lexical voice's scores are put on a 0–1 scale in hybrid: "minmax" over its own
# candidates (its best match is 1.0 however weak), or "coverage": the share of the query's term
# weight (IDF) a fact matches, so a fact sharing one common word with the query stays low.
LEXICAL_SCALE = "minmax"
# Agreement gates of the indirect voices: a candidate's recency or graph contribution is scaled by
# (1 - gate) + gate × (its direct lexical + semantic evidence relative to the best candidate's), so
# with gate 1 a fact with no direct evidence gains nothing from being recent. Recency is gated
# fully: being recent only lifts a fact the query is about. Graph is not gated: a neighbour is
# found *because* the query does not name it (gating it lost recall on connected queries).
# Chosen in round 3 of issue 19 by bench/tune_fusion.py (tuning set + G–J).
GATES = {"recency": 1.0, "graph": 0.0}


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
    as_of: datetime | None = None
    valid_at: datetime | None = None


def _ranks(ranked: Sequence[tuple[int, float]]) -> dict[int, int]:
    return {pk: i + 1 for i, (pk, _) in enumerate(ranked)}


@dataclass
class Candidate:
    """What ranking needs of a fact, read without building the model (30 model instances with
    their domain and repo cost more than the searches that found them)."""

    pk: int
    memory_type: str
    last_mentioned_at: datetime
    confidence: float
    repo_slug: str | None
    score: float = 0.0
    observed_at: datetime | None = None
    authority: tuple[int, float] = (0, 0.0)  # _authority
    recall_count: int = 0


def _candidates(found: voices.Loaded, as_of: datetime | None = None) -> dict[int, Candidate]:
    """What ranking needs of each loaded fact (read from its row: the Fact itself is made only
    for the hits). With `as_of`, each candidate's last mention is the last one recorded by then."""
    candidates = {
        pk: Candidate(
            pk,
            found.value(pk, "memory_type"),
            found.value(pk, "last_mentioned_at"),
            found.value(pk, "confidence"),
            found.repo_slug(pk),
            observed_at=found.value(pk, "observed_at"),
            authority=_authority(found, pk),
            recall_count=found.value(pk, "recall_count"),
        )
        for pk in found.rows
    }
    if as_of is not None:
        then = mentioned_then(
            [(pk, found.value(pk, "last_mentioned_at"), found.value(pk, "created_at")) for pk in found.rows], as_of
        )
        for pk, candidate in candidates.items():
            candidate.last_mentioned_at = then[pk]
    return candidates


def _ranked_candidates(
    rows: dict[int, rank_rows.RankRow], ids: Sequence[int], repo: str | None, as_of: datetime | None = None
) -> dict[int, Candidate]:
    """The candidates `ids` from what the voices brought of them (rank_rows; a fact with no row
    is gone and left out); `repo_slug` is set only for the caller's repo (all _repo_boost reads)."""
    in_repo = set(MemoryDomain.objects.filter(repo__slug=repo).values_list("pk", flat=True)) if repo else set()
    moment = rank_rows.moment
    candidates = {
        pk: Candidate(
            pk,
            row.memory_type,
            moment(row.last_mentioned),
            row.confidence,
            repo if row.domain_id in in_repo else None,
            observed_at=moment(row.observed) if row.observed is not None else None,
            authority=(int(bool(row.vouched)), VERACITY_WEIGHT.get(row.veracity, 0.0)),
            recall_count=row.recall_count,
        )
        for pk in ids
        if (row := rows.get(pk)) is not None
    }
    if as_of is not None:
        then = mentioned_then(
            [(pk, c.last_mentioned_at, moment(rows[pk].created)) for pk, c in candidates.items()], as_of
        )
        for pk, candidate in candidates.items():
            candidate.last_mentioned_at = then[pk]
    return candidates


def _recency(scope: voices.Scope, pool: list[int], rows: dict[int, rank_rows.RankRow]) -> list[tuple[int, float]]:
    """The recency voice over the pool: voices.temporal, read from the rows the pool's voices
    brought (the same order: last mention, newest first, then id) when the scope is now's."""
    if not scope.current or any(pk not in rows for pk in pool):
        return voices.temporal(scope, pool, limit=CANDIDATES)
    newest = sorted(pool, key=lambda pk: (rows[pk].last_mentioned, pk), reverse=True)[:CANDIDATES]
    return [(pk, rows[pk].last_mentioned) for pk in newest]


def _authority(found: voices.Loaded, pk: int) -> tuple[int, float]:
    """What makes a statement outweigh a later one: a person validated or edited it, then its
    veracity's weight."""
    vouched = bool(found.value(pk, "validated_by")) or bool(found.value(pk, "human_edited"))
    return (int(vouched), VERACITY_WEIGHT.get(found.value(pk, "veracity"), 0.0))


def _repo_boost(candidate: Candidate, repo: str | None) -> float:
    """Repo-scoped facts of the caller's repo rank first: a boost, not a filter (SPEC §6)."""
    if repo and candidate.repo_slug == repo:
        return float(settings.ENGRAM_REPO_BOOST)
    return 1.0


def _adjust(candidate: Candidate, score: float, repo: str | None, as_of: datetime | None = None) -> float:
    """Scale by decay (at `as_of`, default now; applied fully unless the type keeps a floor, and
    slower for a fact agents keep recalling: memory.decay) × confidence (softened by
    CONFIDENCE_FLOOR), boost the repo."""
    factor = decay.factor_at(candidate.memory_type, candidate.last_mentioned_at, as_of, candidate.recall_count)
    trust = CONFIDENCE_FLOOR + (1.0 - CONFIDENCE_FLOOR) * candidate.confidence
    return score * factor * trust * _repo_boost(candidate, repo)


def _similarities(ids: Sequence[int]) -> dict[tuple[int, int], float]:
    """Cosine similarity of the pairs (a < b) of candidates that are near-restatements of each
    other (above MMR_SIMILAR), computed by pgvector in the database (no vectors travel to
    Python). A pair below MMR_SIMILAR makes no difference to _mmr, so it is not sent. Each vector
    is read once: most rows keep theirs in the TOAST table (a fact's row with its 1.5 kB vector
    passes 2 kB), and comparing the stored columns pair by pair fetched each one there again for
    every pair (30 candidates: 435 pairs, ~2,200 buffers, 3–7 ms); the cast makes the pool hold
    the vectors themselves (~1.4 ms)."""
    if len(ids) < 2:
        return {}
    with voices.reader().cursor() as cursor:
        cursor.execute(
            "WITH pool AS MATERIALIZED (SELECT id, embedding::real[]::vector AS embedding FROM memory_fact"
            " WHERE id = ANY(%s) AND embedding IS NOT NULL) SELECT a.id, b.id, 1 - (a.embedding <=> b.embedding)"
            " FROM pool a JOIN pool b ON a.id < b.id WHERE 1 - (a.embedding <=> b.embedding) > %s",
            [list(ids), MMR_SIMILAR],
        )
        return {(a, b): float(sim) for a, b, sim in cursor.fetchall()}


def _pairs(
    ids: Sequence[int], as_of: datetime | None = None
) -> tuple[dict[tuple[int, int], float], list[tuple[int, int]]]:
    """What MMR and current first read of the pool, in one round trip: _similarities' pairs, and
    the pairs the write path could not settle and asked a person about (an open Conflict: the
    newcomer may update or contradict the live fact), as (existing, proposed); with `as_of`, those
    asked by then and not yet decided then."""
    if len(ids) < 2:
        return {}, []
    if as_of is None:
        when_sql, when_params = "status = 'open'", []
    else:
        when_sql = "detected_at <= %s AND (decided_at IS NULL OR decided_at > %s)"
        when_params = [as_of, as_of]
    with voices.reader().cursor() as cursor:
        cursor.execute(
            "WITH pool AS MATERIALIZED (SELECT id, embedding::real[]::vector AS embedding FROM memory_fact"  # noqa: S608 -- constant fragments; values are bound params
            " WHERE id = ANY(%s) AND embedding IS NOT NULL) SELECT a.id, b.id, 1 - (a.embedding <=> b.embedding)"
            " FROM pool a JOIN pool b ON a.id < b.id WHERE 1 - (a.embedding <=> b.embedding) > %s"
            f" UNION ALL SELECT existing_id, proposed_id, NULL FROM memory_conflict WHERE {when_sql}"
            " AND existing_id = ANY(%s) AND proposed_id = ANY(%s)",
            [list(ids), MMR_SIMILAR, *when_params, list(ids), list(ids)],
        )
        near: dict[tuple[int, int], float] = {}
        asked: list[tuple[int, int]] = []
        for a, b, similarity in cursor.fetchall():
            if similarity is None:
                asked.append((a, b))
            else:
                near[(a, b)] = float(similarity)
        return near, asked


def _current_first(ranked: list[Candidate], same: Sequence[tuple[int, int]]) -> None:
    """Lift each later statement of the same thing (`same`: pairs of ids) just above the earlier
    one it would rank below, when it answers the query too (scores ≥ CURRENT_WITHIN of it) and the
    earlier has no more authority; `ranked` is re-sorted. Earlier statements are handled first,
    so a chain of updates ends with the latest on top."""
    if not same:
        return
    by_pk = {c.pk: c for c in ranked}
    pairs = []
    for a, b in same:
        first, second = by_pk.get(a), by_pk.get(b)
        if first is None or second is None or first.observed_at is None or second.observed_at is None:
            continue
        if first.observed_at == second.observed_at:
            continue
        earlier, later = (first, second) if first.observed_at < second.observed_at else (second, first)
        pairs.append((earlier, later))
    pairs.sort(key=lambda p: (p[0].observed_at, p[1].observed_at))
    for earlier, later in pairs:
        if later.authority < earlier.authority:
            continue
        if later.score < earlier.score and later.score >= CURRENT_WITHIN * earlier.score:
            later.score = earlier.score * (1 + 1e-9) + 1e-12
    ranked.sort(key=lambda c: -c.score)


def pool_size(limit: int) -> int:
    """How many of the ranked candidates MMR (and current first) choose from."""
    return max(limit * 3, limit + 5)


def _mmr(
    ranked: list[Candidate], limit: int, similarities: dict[tuple[int, int], float] | None = None
) -> list[Candidate]:
    """Maximal marginal relevance: each next pick trades relevance against being a restatement
    of one already picked (similarity above MMR_SIMILAR). A candidate's redundancy is kept as the
    most it has with any pick so far, updated after each pick (the same choice as recomputing it
    against every pick, in one pass per pick)."""
    if len(ranked) <= 1:
        return ranked[:limit]
    pool = ranked[: pool_size(limit)]
    sims = _similarities([c.pk for c in pool]) if similarities is None else similarities
    top = max(c.score for c in pool) or 1.0
    relevance = [MMR_LAMBDA * c.score / top for c in pool]
    redundancy = [0.0] * len(pool)
    chosen: list[int] = []
    remaining = list(range(len(pool)))
    while remaining and len(chosen) < limit:
        best, best_value = remaining[0], -1e9
        for i in remaining:
            value = relevance[i] - (1 - MMR_LAMBDA) * redundancy[i]
            if value > best_value:
                best, best_value = i, value
        chosen.append(best)
        remaining.remove(best)
        picked = pool[best].pk
        for i in remaining:
            a = pool[i].pk
            similarity = sims.get((min(a, picked), max(a, picked)), 0.0)
            # Only near-restatements are redundant: facts on one subject that say different
            # things (similarity ~0.6-0.75) are what a diverse answer should keep.
            redundancy[i] = max(redundancy[i], max(0.0, (similarity - MMR_SIMILAR) / (1.0 - MMR_SIMILAR)))
    return [pool[i] for i in chosen]


def _normalised(name: str, ranked: list[tuple[int, float]]) -> dict[int, float]:
    """Each voice's scores on one 0–1 scale: min–max over the voice's own candidates (semantic
    similarity, lexical and graph scores); recency, whose score is a timestamp, by rank."""
    if not ranked:
        return {}
    if name == "recency":
        return {pk: 1.0 / (1.0 + i / RECENCY_HALF_RANK) for i, (pk, _) in enumerate(ranked)}
    if name == "graph":  # already 0–1: the strength inherited from the seed
        return dict(ranked)
    high = max(score for _, score in ranked)
    # The floor is the weakest candidate, but never above half the best: with only a few
    # candidates, a close second must not be flattened to zero.
    low = min(min(score for _, score in ranked), high / 2)
    spread = high - low
    return {pk: (score - low) / spread if spread > 0 else 1.0 for pk, score in ranked}


def fuse(
    lists: dict[str, list[tuple[int, float]]], weights: dict[str, float], *, lexical_total: float | None = None
) -> dict[int, float]:
    """Weighted fusion: FUSION "score" sums normalised voice scores (CombSUM), "rrf" sums
    weighted reciprocal ranks. With `lexical_total` (the query's summed term weight) the lexical
    voice is scaled by coverage instead of min–max (LEXICAL_SCALE)."""
    fused: dict[int, float] = {}
    for name, ranked in lists.items():
        weight = weights.get(name, 0.0)
        if FUSION == "rrf":
            contributions = {pk: 1.0 / (RRF_K + i + 1) for i, (pk, _) in enumerate(ranked)}
        elif name == "lexical" and lexical_total:
            # the score is matched IDF + ts_rank ≤ 1 (decay × confidence come after fusion: _adjust)
            contributions = {pk: min(1.0, score / (lexical_total + 1.0)) for pk, score in ranked}
        else:
            contributions = _normalised(name, ranked)
        for pk, value in contributions.items():
            fused[pk] = fused.get(pk, 0.0) + weight * value
    return fused


def _hybrid_fusion(
    lists: dict[str, list[tuple[int, float]]], direct: dict[int, float], weights: dict[str, float]
) -> dict[int, float]:
    """The direct evidence (lexical + semantic, already fused) plus the indirect voices, each
    contribution gated by the candidate's agreement with the direct evidence (GATES)."""
    fused = dict(direct)
    top = max(direct.values(), default=0.0) or 1.0
    for name in ("recency", "graph"):
        gate = GATES.get(name, 0.0)
        weight = weights.get(name, 0.0)
        if FUSION == "rrf":
            contributions = {pk: 1.0 / (RRF_K + i + 1) for i, (pk, _) in enumerate(lists.get(name, []))}
        else:
            contributions = _normalised(name, lists.get(name, []))
        for pk, value in contributions.items():
            agreement = max(0.0, direct.get(pk, 0.0)) / top
            fused[pk] = fused.get(pk, 0.0) + weight * value * ((1.0 - gate) + gate * agreement)
    return fused


def search_memory(
    *,
    agent: Agent,
    query: str,
    mode: str = "hybrid",
    repo: str | None = None,
    domain_id: int | None = None,
    limit: int = 10,
    record: bool = True,
    session_key: str | None = None,
    as_of: datetime | None = None,
    valid_at: datetime | None = None,
) -> SearchResult:
    """Search the agent's visible, recallable facts (with `session_key`, only those written under
    that session key, in every voice); with `as_of` / `valid_at`, those believed then and true then
    (memory.search.as_of), decay measured at as_of. Returned facts count as recalled (today)."""
    scope = voices.Scope(
        agent=agent, domain_id=domain_id, session_key=session_key or None, as_of=as_of, valid_at=valid_at
    )
    intent = classify(query)
    # Keyword scores already carry decay, so without a repo to boost the first `limit` are the
    # answer, and with one the boost (a bounded factor) reorders only the head. Other modes rank
    # every fused candidate (from its rank_rows): decay applies fully (memory.decay), so a fresh
    # fact far down the fused order may outrank every old one above it.
    head = (max(limit * 3, 20) if repo else limit) if mode == "keyword" else None
    # The episode id is reserved by the query that loads the hits (when there are hits).
    reserve = EPISODE_ID_SQL if record else ""
    lists: dict[str, list[tuple[int, float]]] = {}
    rows: dict[int, rank_rows.RankRow] = {}  # what ranking reads of each candidate (semantic, hybrid)
    lexical_limit = CANDIDATES if mode != "keyword" else max(limit * 3, CANDIDATES)
    if mode == "keyword":
        # One query ranks and loads the head (the lexical order is the fused order here).
        found = voices.lexical_hits(scope, query, limit=lexical_limit, load=head, extra=reserve)
        lists["lexical"] = found.ranked
    else:
        # The query's embedding is computed while the lexical voice's SQL runs (the same vector).
        embedding = embed_ahead(query)
        # Its scores before decay × confidence: _adjust applies them to the fused score, once.
        lists["lexical"] = voices.lexical(scope, query, limit=lexical_limit, undecayed=True, ranking=rows)
        vector = embedding.result()
        lists["semantic"] = voices.semantic(scope, vector, limit=CANDIDATES, ranking=rows)
    if mode == "hybrid":
        pool = [pk for pk, sim in lists["semantic"] if sim >= RELEVANCE_FLOOR] + [pk for pk, _ in lists["lexical"]]
        lists["recency"] = _recency(scope, list(dict.fromkeys(pool)), rows)
        # Graph seeds are the strongest facts by lexical + semantic evidence; a neighbour inherits
        # the strength of the seed that reaches it (spreading activation over episode edges).
        lexical_total = sum(idf for _, idf, _ in voices.weighted_terms(query)) if LEXICAL_SCALE == "coverage" else None
        direct = fuse({k: lists[k] for k in ("lexical", "semantic")}, WEIGHTS[intent], lexical_total=lexical_total)
        seeds = sorted(direct, key=lambda pk: -direct[pk])[:SEEDS]
        top = direct[seeds[0]] if seeds else 1.0
        strengths = {pk: direct[pk] / top for pk in seeds}
        lists["graph"] = voices.graph(scope, seeds, limit=CANDIDATES, strengths=strengths, ranking=rows)

    ranks = {name: _ranks(ranked) for name, ranked in lists.items()}
    if mode == "keyword":
        fused = {pk: score for pk, score in lists["lexical"]}
    elif mode == "hybrid":
        fused = _hybrid_fusion(lists, direct, WEIGHTS[intent])
    else:
        fused = fuse(lists, {"lexical": 1.0, "semantic": 1.0})
    ordered = sorted(fused, key=lambda pk: -fused[pk])[:head]
    if mode == "keyword":
        candidates = _candidates(found)
    else:
        # Ranked from what the voices brought (an as-of scope's semantic voice brings nothing);
        # only the hits are loaded whole, below.
        rows.update(rank_rows.load(voices.reader(), [pk for pk in ordered if pk not in rows]))
        candidates = _ranked_candidates(rows, ordered, repo, as_of)
    ranked: list[Candidate] = []
    for pk in ordered:
        candidate = candidates.get(pk)
        if candidate is None:
            continue
        # The keyword score already carries decay × confidence (voices.lexical_hits).
        if mode == "keyword":
            candidate.score = fused[pk] * _repo_boost(candidate, repo)
        else:
            candidate.score = _adjust(candidate, fused[pk], repo, as_of)
        ranked.append(candidate)
    ranked.sort(key=lambda c: -c.score)
    if mode == "hybrid":
        shortlist = ranked[: pool_size(limit)]
        near, asked = _pairs([c.pk for c in shortlist], as_of)
        _current_first(shortlist, asked)
        ranked = _mmr(shortlist, limit, near)
    else:
        ranked = ranked[:limit]
    if mode != "keyword":
        found = voices.hits_by_id([c.pk for c in ranked], extra=reserve)
    hits = [
        Hit(fact=found.fact(c.pk), score=c.score, voices={v: ranks.get(v, {}).get(c.pk) for v in VOICES})
        for c in ranked
        if c.pk in found.rows  # a fact erased since it was ranked is not shown
    ]

    episode_id = None
    if record and hits:
        episode_id = open_episode(agent=agent, kind="search", title=query, episode_id=found.extra)
        record_recall(episode_id, [h.fact.pk for h in hits], agent=agent, served_as="search")
    return SearchResult(
        mode=mode, intent=intent.value, hits=hits, episode_id=episode_id, as_of=as_of, valid_at=valid_at
    )
