"""The four voices of recall (SPEC §6), each a ranked list of fact ids.

Every voice starts from `Fact.objects.visible_to(agent).recallable()`: grants, workspace,
supersession, status and expiry are applied in one place (memory.querysets).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import DEFAULT_DB_ALIAS
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import QuerySet

from memory import decay
from memory.caches import register_cache
from memory.embeddings import vector_literal
from memory.models import Fact
from memory.routing import read_connection
from memory.search import rank_rows
from memory.search.as_of import mentioned_then_sql
from memory.search.loaded import HIT_JOINS, Loaded, hit_columns

if TYPE_CHECKING:
    from memory.models import Agent

MAX_TERMS = 24
EF_SEARCH = 200  # the database default (migration 0006); measured in make bench
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
    # Only facts written under this session key (Fact.session_key), when given.
    session_key: str | None = None
    # As-of recall (memory.search.as_of): believed at `as_of`, true at `valid_at`; None = now.
    as_of: datetime | None = None
    valid_at: datetime | None = None

    @property
    def current(self) -> bool:
        return self.as_of is None and self.valid_at is None

    def facts(self) -> QuerySet[Fact]:
        qs = Fact.objects.visible_to(self.agent).recallable_then(as_of=self.as_of, valid_at=self.valid_at)
        if self.session_key:
            qs = qs.filter(session_key=self.session_key)
        return qs.filter(domain_id=self.domain_id) if self.domain_id else qs


def reader() -> BaseDatabaseWrapper:
    """The connection recall's SQL reads from: the replica serving this request's reads, else the
    primary (memory.routing decides; without replicas, always the primary)."""
    return read_connection(Fact)


def reserves_here(database: BaseDatabaseWrapper) -> bool:
    """Whether a query on `database` may reserve an episode id (recalls.EPISODE_ID_SQL): only on
    the primary, a standby refuses nextval."""
    return database.alias == DEFAULT_DB_ALIAS


def terms(text: str) -> list[str]:
    """The distinct content tokens of a query or task, in order, at most MAX_TERMS."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(text):
        lowered = token.lower()
        if lowered not in _FILLER and lowered not in seen:
            seen[lowered] = None
    return list(seen)[:MAX_TERMS]


# --- Term weights: an IDF from PostgreSQL's own statistics ----------------------------------
# ts_rank has no notion of how rare a word is, so with OR semantics a fact matching one common
# word can outrank one matching the rare word the question is about. ANALYZE already keeps the
# most common lexemes of the tsvector column with their document frequencies (pg_stats); a
# lexeme missing from that list is rarer than all of them. Read once per process every 5 minutes.
_STATS_SECONDS = 300.0
SELECTIVE_ROWS = 1500  # the candidate budget: the rarest terms select up to about this many facts together
NARROWING_SHARE = 0.25  # see narrowing_terms
_stats: tuple[float, dict[str, float], float, float] | None = None
_lexemes: dict[str, tuple[str, ...]] = {}


def lexeme_frequencies() -> tuple[dict[str, float], float, float]:
    """(lexeme → fraction of facts containing it, frequency assumed for any other lexeme,
    estimated number of facts)."""
    global _stats
    now = time.monotonic()
    if _stats is None or now - _stats[0] > _STATS_SECONDS:
        with reader().cursor() as cursor:
            cursor.execute(
                "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats "
                "WHERE tablename = 'memory_fact' AND attname = 'search_vector' LIMIT 1"
            )
            row = cursor.fetchone()
            cursor.execute("SELECT greatest(reltuples, 0) FROM pg_class WHERE relname = 'memory_fact'")
            rows_row = cursor.fetchone()
        freqs: dict[str, float] = {}
        if row and row[0] and row[1]:
            freqs = {lexeme: float(f) for lexeme, f in zip(row[0], row[1], strict=False)}
        floor = min(freqs.values()) / 2 if freqs else 0.01
        _stats = (now, freqs, floor, float(rows_row[0]) if rows_row else 0.0)
    return _stats[1], _stats[2], _stats[3]


@register_cache
def forget_statistics() -> None:
    """Drop the lexeme statistics (they list words of facts): the next search reads them anew."""
    global _stats
    _stats = None


def _lexemes_of(words: Sequence[str]) -> dict[str, tuple[str, ...]]:
    missing = [w for w in words if w not in _lexemes]
    if missing:
        with reader().cursor() as cursor:
            cursor.execute(
                "SELECT t, tsvector_to_array(to_tsvector('english', t)) FROM unnest(%s::text[]) AS t", [missing]
            )
            for word, lexemes in cursor.fetchall():
                if len(_lexemes) > 50_000:
                    _lexemes.clear()
                _lexemes[word] = tuple(lexemes or ())
    return {w: _lexemes[w] for w in words}


def weighted_terms(text: str) -> list[tuple[str, float, float]]:
    """(term, idf, document frequency) of each searchable term; stop words drop out."""
    words = terms(text)
    if not words:
        return []
    freqs, floor, _ = lexeme_frequencies()
    weighted = []
    for word, lexemes in _lexemes_of(words).items():
        if not lexemes:
            continue
        # A multi-lexeme term (an identifier) matches only where all parts occur: its rarest part bounds it.
        frequency = min(freqs.get(lexeme, floor) for lexeme in lexemes)
        weighted.append((word, math.log(1.0 + 1.0 / max(frequency, 1e-6)), frequency))
    return weighted


def selecting_terms(weighted: Sequence[tuple[str, float, float]]) -> list[str]:
    """The terms whose matches are the candidates: the rarest first, while their estimated matches
    together stay within SELECTIVE_ROWS (always at least the rarest). The others still score.
    This bounds the rows ranked at any table size: "add retries to usage-rollup for calls…"
    selects by `usage-rollup`, not by every fact that mentions "add" or "call" (at 10k facts
    those selected a third of the table and took 23 ms)."""
    facts = lexeme_frequencies()[2]
    chosen: list[str] = []
    budget = float(SELECTIVE_ROWS)
    for word, _, frequency in sorted(weighted, key=lambda t: t[2]):
        rows = frequency * facts
        if chosen and rows > budget:
            break
        chosen.append(word)
        budget -= rows
    return chosen


_where_cache: dict[tuple[int, int, int | None, str | None, bool, bool], tuple[str, list[Any]]] = {}
# Stand-ins for an as-of scope's moments while its WHERE is compiled (once), swapped for the
# real ones in the parameters of each call: compiling the as-of queryset cost ~5 ms a voice.
_AS_OF_MARK = datetime(1900, 1, 1, tzinfo=UTC)
_VALID_AT_MARK = datetime(1900, 1, 2, tzinfo=UTC)


def _scope_where(scope: Scope) -> tuple[str, list[Any]]:
    """The WHERE clause of `scope.facts()` (visibility, recallability, domain) as SQL, so the
    hand-written ranking queries below apply exactly the queryset's rules. It depends only on
    workspace, role, domain and session key (grants are looked up by the SQL itself), so it is
    compiled once (an as-of scope's with stand-in moments, replaced in its parameters)."""
    key = (
        scope.agent.workspace_id,
        scope.agent.role_id,
        scope.domain_id,
        scope.session_key,
        scope.as_of is not None,
        scope.valid_at is not None,
    )
    cached = _where_cache.get(key)
    if cached is None:
        marked = scope
        if not scope.current:
            marked = replace(
                scope,
                as_of=_AS_OF_MARK if scope.as_of is not None else None,
                valid_at=_VALID_AT_MARK if scope.valid_at is not None else None,
            )
        qs = marked.facts()
        where, params = qs.query.get_compiler(using=qs.db).compile(qs.query.where)
        cached = (where, list(params))
        if len(_where_cache) > 10_000:
            _where_cache.clear()
        _where_cache[key] = cached
    if scope.current:
        return cached
    moments = {_AS_OF_MARK: scope.as_of, _VALID_AT_MARK: scope.valid_at}
    where, params = cached
    return where, [moments.get(p, p) if isinstance(p, datetime) else p for p in params]


def _decay_sql(as_of: datetime | None = None) -> tuple[str, list[Any]]:
    """decay.Weibull.factor for a row of memory_fact: floor + (1 - floor) × exp(-(age/λ')^k), with
    λ' = λ × (1 + RECALL_STRETCH × ln(1 + recall_count)) and λ, k, floor per memory type (a CASE
    over the types, in float8: numeric arithmetic and a per-row subquery cost a third of the
    ranking; `1.0 + integer` is numeric, and that ln alone cost 40 % of the lexical statement).
    The exponent is capped at 700: exp(-745) underflows float8 and PostgreSQL raises
    "value out of range: underflow" — a 700-day-old commitment (λ 14, k 2) made every search fail.
    With `as_of`, the age is measured at as_of from the last mention recorded by then (the recall
    count is today's: its history is not kept)."""
    curves = decay.parameters()
    if as_of is None:
        age_days = "greatest(date_part('epoch', now() - memory_fact.last_mentioned_at), 0) / 86400.0"
        age_params: list[Any] = []
    else:
        mentioned, mentioned_params = mentioned_then_sql(as_of)
        age_days = f"greatest(date_part('epoch', %s::timestamptz - {mentioned}), 0) / 86400.0"
        age_params = [as_of, *mentioned_params]
    stretched = "(%s::float8 * (1.0 + %s::float8 * ln(1.0::float8 + greatest(memory_fact.recall_count, 0))))"
    branch = f"WHEN %s THEN %s::float8 + %s::float8 * exp(-least(power({age_days} / {stretched}, %s::float8), 700.0))"
    params: list[Any] = [
        x
        for name, c in curves.items()
        for x in (name, c.floor, 1.0 - c.floor, *age_params, c.scale_days, decay.RECALL_STRETCH, c.shape)
    ]
    return f"(CASE memory_fact.memory_type {' '.join([branch] * len(curves))} ELSE 1.0 END)", params


def lexical_sql(
    scope: Scope,
    text: str,
    *,
    limit: int,
    prefer_repo: str | None = None,
    narrow: bool = False,
    matched: bool = False,
    relevance: bool = False,
    ranking: bool = False,
) -> tuple[str, list[Any]] | None:
    """Full-text matches (GIN index) with OR semantics over the text's terms, scored by the IDF of
    the terms each fact contains (plus ts_rank for density) × decay × confidence; with
    `prefer_repo`, that repo's facts come first. With `matched`, each row also brings the summed
    IDF of the terms the fact contains (before ts_rank, decay and confidence: how much of the text's
    term weight it matches). With `relevance`, last, the score before decay and confidence (what
    hybrid fuses: it applies decay × confidence itself, once). With `ranking`, last, rank_rows'
    columns. None when the text has no searchable term.

    Written as SQL rather than ORM expressions: building the ORM form cost ~10 ms a call."""
    weighted = weighted_terms(text)
    if not weighted:
        return None
    selective = selecting_terms(weighted)
    tsquery = lambda words: " || ".join(["plainto_tsquery('english', %s)"] * len(words))  # noqa: E731
    select_sql, select_params = f"({tsquery(selective)})", list(selective)
    companions = narrowing_terms(weighted, selective) if narrow else []
    if companions:
        select_sql = f"({tsquery(selective)}) && ({tsquery(companions)})"
        select_params += companions
    idf_sql = " + ".join(
        ["CASE WHEN memory_fact.search_vector @@ plainto_tsquery('english', %s) THEN %s::float8 ELSE 0 END"]
        * len(weighted)
    )
    idf_params: list[Any] = [x for w, idf, _ in weighted for x in (w, idf)]
    where, where_params = _scope_where(scope)
    decay_sql, decay_params = _decay_sql(scope.as_of)
    # `preferred`: the repo's facts first (a constant false without a repo), so a query wrapping
    # this one (lexical_hits) orders its rows by the same columns.
    preferred_sql, repo_params = "false", []
    if prefer_repo:
        preferred_sql = (
            "(memory_fact.domain_id IN (SELECT d.id FROM memory_memorydomain d JOIN memory_repo r ON r.id = d.repo_id"
            " WHERE r.slug = %s))"
        )
        repo_params = [prefer_repo]
    # Each matched row's term weight and density are computed once, below an optimisation fence
    # (OFFSET 0: PostgreSQL would otherwise inline them into every column that reads them), and
    # rank_rows' columns only for the `limit` rows kept (issue 38: the relevance column computed
    # them a second time, and rank_rows' for every matched row, 0.5 ms of 3.8 at 870 rows).
    scan = (
        f"SELECT {_CARRIED}, ({idf_sql}) AS matched,"  # noqa: S608 -- fragments built in code from %s placeholders; every value is a bound param
        f" ts_rank(memory_fact.search_vector, {tsquery(weighted)}, 1) AS density"
        f" FROM memory_fact WHERE {where} AND memory_fact.search_vector @@ ({select_sql}) OFFSET 0"
    )
    relevance_sql = "(memory_fact.matched + memory_fact.density)"
    kept = (
        f"SELECT memory_fact.id, {relevance_sql} * {decay_sql} * memory_fact.confidence AS score,"  # noqa: S608 -- as above
        f" {preferred_sql} AS preferred"
        + (", memory_fact.matched" if matched else "")
        + (f", {relevance_sql} AS relevance" if relevance else "")
        + (f", {_CARRIED_BUT_ID}" if ranking else "")
        + f" FROM ({scan}) AS memory_fact ORDER BY {LEXICAL_ORDER} LIMIT %s"
    )
    params = [*decay_params, *repo_params, *idf_params, *[w for w, _, _ in weighted], *where_params, *select_params]
    if not ranking:
        return kept, [*params, limit]
    named = ["id", "score", "preferred", *(["matched"] if matched else []), *(["relevance"] if relevance else [])]
    sql = (
        f"SELECT {', '.join(f'memory_fact.{n}' for n in named)}, {rank_rows.SQL}"  # noqa: S608 -- constant fragments
        f" FROM ({kept}) AS memory_fact ORDER BY {LEXICAL_ORDER}"
    )
    return sql, [*params, limit]


# The columns of memory_fact that the score, `preferred` and rank_rows read (and as-of decay's
# last mention), carried from the matched rows to the kept ones under the same names.
_CARRIED_BUT_ID = ", ".join(
    f"memory_fact.{c}"
    for c in (
        "domain_id",
        "memory_type",
        "last_mentioned_at",
        "recall_count",
        "confidence",
        "created_at",
        "observed_at",
        "validated_by",
        "human_edited",
        "veracity",
    )
)
_CARRIED = f"memory_fact.id, {_CARRIED_BUT_ID}"


LEXICAL_ORDER = "preferred DESC, score DESC, id DESC"


def narrowing_terms(weighted: Sequence[tuple[str, float, float]], selective: Sequence[str]) -> list[str]:
    """When even the rarest term matches more than SELECTIVE_ROWS facts (a service name in a
    large workspace), the candidates may first be the facts that also contain one of the next
    rarest terms (together matching at most NARROWING_SHARE of facts): those are the ones that
    score higher. Empty when no narrowing applies."""
    facts = lexeme_frequencies()[2]
    frequency = dict((w, f) for w, _, f in weighted)
    if len(selective) != 1 or frequency[selective[0]] * facts <= SELECTIVE_ROWS:
        return []
    companions: list[str] = []
    share = 0.0
    for word, _, f in sorted(weighted, key=lambda t: t[2]):
        if word in selective:
            continue
        if share + f > NARROWING_SHARE:
            break
        companions.append(word)
        share += f
    return companions


def lexical(
    scope: Scope,
    text: str,
    *,
    limit: int,
    prefer_repo: str | None = None,
    undecayed: bool = False,
    ranking: dict[int, rank_rows.RankRow] | None = None,
) -> list[tuple[int, float]]:
    """Ranked (id, score) of the lexical voice (with `undecayed`, in the same order, each fact's
    score before decay and confidence). When the rarest term is common, the facts that also
    contain one of the next rarest terms are asked first (narrowing_terms); when they are fewer
    than `limit`, the question is asked again without narrowing. (Narrowing is a bound on work,
    not exact: a fresh fact with only the common term may lose to an older one with both.)
    With `ranking`, each ranked fact's rank_rows.RankRow is put there."""
    rows = _lexical_rows(
        scope, text, limit=limit, prefer_repo=prefer_repo, relevance=undecayed, ranking=ranking is not None
    )
    if ranking is not None:
        ranking.update((row[0], rank_rows.of(row)) for row in rows)
    return [(row[0], float(row[3] if undecayed else row[1])) for row in rows]


def _lexical_rows(
    scope: Scope,
    text: str,
    *,
    limit: int,
    prefer_repo: str | None,
    loading: dict[str, Any] | None = None,
    database: BaseDatabaseWrapper | None = None,
    relevance: bool = False,
    ranking: bool = False,
) -> list[tuple[Any, ...]]:
    """The lexical voice's rows (id, score, …); with `loading`, each wrapped by _with_facts."""
    database = database or reader()
    weighted = weighted_terms(text)
    if not weighted:
        return []
    narrowed = bool(narrowing_terms(weighted, selecting_terms(weighted)))
    rows: list[tuple[Any, ...]] = []
    with database.cursor() as cursor:
        for narrow in (True, False) if narrowed else (False,):
            matched = bool(loading and loading.get("matched"))
            query = lexical_sql(
                scope,
                text,
                limit=limit,
                prefer_repo=prefer_repo,
                narrow=narrow,
                matched=matched,
                relevance=relevance,
                ranking=ranking,
            )
            assert query is not None  # the text has searchable terms
            cursor.execute(*(query if loading is None else _with_facts(*query, order=LEXICAL_ORDER, **loading)))
            rows = cursor.fetchall()
            if len(rows) >= limit:
                break
    return rows


def lexical_hits(
    scope: Scope,
    text: str,
    *,
    limit: int,
    prefer_repo: str | None = None,
    load: int | None = None,
    vectors: bool = False,
    extra: str = "",
    matched: bool = False,
) -> Loaded:
    """The lexical voice with its facts loaded by the same query (no rank-then-fetch round trip).
    The first `load` facts (all when None) are loaded with HIT_FIELDS, their domain and repo (and
    their vector as `embedding_text` with `vectors`). `extra` is an SQL expression evaluated once
    when there are rows (e.g. recalls.EPISODE_ID_SQL). With `matched`, `Loaded.matched` holds each
    fact's matched term weight (lexical_sql)."""
    database = reader()
    if extra and not reserves_here(database):
        extra = ""  # a standby refuses nextval: the caller reserves on the primary instead
    loading = {"load": load, "vectors": vectors, "extra": extra, "matched": matched}
    rows = _lexical_rows(scope, text, limit=limit, prefer_repo=prefer_repo, loading=loading, database=database)
    found = Loaded(
        [(row[0], float(row[1])) for row in rows],
        {row[0]: row[2:] for row in rows if row[2] is not None},
        rows[0][-2 if matched else -1] if rows and extra else None,
        database.alias,
        vectors,
    )
    if matched:
        found.matched = {row[0]: float(row[-1]) for row in rows}
    return found


def _with_facts(
    sql: str, params: list[Any], *, order: str, load: int | None, vectors: bool, extra: str, matched: bool = False
) -> tuple[str, list[Any]]:
    """Wrap a ranking query (its rows id, score, preferred) so that each row, in the same order,
    also brings its fact's columns (hit_columns): the first `load` rows (every row when None);
    with `matched`, the ranking query's `matched` column last."""
    numbered = f"SELECT ranked.*, row_number() OVER (ORDER BY {order}) AS n FROM ({sql}) AS ranked"  # noqa: S608 -- constant fragments and a built query; values are bound params
    join = "hit.id = numbered.id" + (" AND numbered.n <= %s" if load is not None else "")
    wrapped = (
        f"SELECT numbered.id, numbered.score, {hit_columns(vectors, extra)}"  # noqa: S608 -- constant fragments; values are bound params
        + (", numbered.matched" if matched else "")
        + f" FROM ({numbered}) AS numbered LEFT JOIN memory_fact hit ON {join}{HIT_JOINS} ORDER BY numbered.n"
    )
    return wrapped, [*params, *([load] if load is not None else [])]


def hits_by_id(ids: Sequence[int], *, extra: str = "") -> Loaded:
    """The facts of `ids` (any order; missing ones left out) with HIT_FIELDS, domain and repo, in
    one query, and the value of `extra` (an SQL expression evaluated once when a fact is found,
    e.g. recalls.EPISODE_ID_SQL)."""
    if not ids:
        return Loaded([], {})
    database = reader()
    if extra and not reserves_here(database):
        extra = ""  # a standby refuses nextval: the caller reserves on the primary instead
    with database.cursor() as cursor:
        cursor.execute(
            f"SELECT {hit_columns(False, extra)} FROM memory_fact hit{HIT_JOINS} WHERE hit.id = ANY(%s)",  # noqa: S608 -- constant fragments; ids are a bound param
            [list(ids)],
        )
        rows = cursor.fetchall()
    loaded = {row[0]: row for row in rows}
    return Loaded([(pk, 0.0) for pk in loaded], loaded, rows[0][-1] if rows and extra else None, database.alias)


def explain(sql: str, params: Sequence[Any]) -> str:
    with reader().cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def semantic_sql(scope: Scope, vector: Sequence[float], *, limit: int, ranking: bool = False) -> tuple[str, list[Any]]:
    """Nearest facts by cosine distance: ORDER BY embedding <=> query LIMIT k is served by the
    HNSW index of the facts recallable now (hnsw.ef_search is 200 for the database, migration
    0006); with `ranking`, each row also brings rank_rows' columns. For an `as_of` / `valid_at`
    scope, the query of semantic_then's first candidates."""
    if not scope.current:
        reaches = _reaches(limit)
        if not reaches:
            return semantic_exact_sql(scope, vector, limit=limit)
        return semantic_then_sql(scope, vector, limit=limit, reach=reaches[0])
    return _nearest_sql(scope, vector, limit=limit, order="memory_fact.embedding <=> %s::vector", ranking=ranking)


def _nearest_sql(
    scope: Scope, vector: Sequence[float], *, limit: int, order: str, ranking: bool = False
) -> tuple[str, list[Any]]:
    """(id, similarity) of the scope's `limit` facts first by `order`, an ORDER BY clause naming
    the query vector once as %s: served by the HNSW index when it is the bare distance."""
    where, params = _scope_where(scope)
    literal = vector_literal(vector)
    columns = f", {rank_rows.SQL}" if ranking else ""
    sql = (
        f"SELECT memory_fact.id, 1 - (memory_fact.embedding <=> %s::vector){columns} FROM memory_fact"  # noqa: S608 -- `where` is the compiled scope queryset and `order` a constant; values are bound params
        f" WHERE {where} AND memory_fact.embedding IS NOT NULL ORDER BY {order} LIMIT %s"
    )
    return sql, [literal, *params, literal, limit]


def semantic(
    scope: Scope, vector: Sequence[float], *, limit: int, ranking: dict[int, rank_rows.RankRow] | None = None
) -> list[tuple[int, float]]:
    """Ranked (id, similarity) of the semantic voice; with `ranking` (and a current scope), each
    ranked fact's rank_rows.RankRow is put there."""
    if not scope.current:
        return semantic_then(scope, vector, limit=limit)
    wanted = ranking is not None
    rows = _nearest(*semantic_sql(scope, vector, limit=limit, ranking=wanted), limit if limit > EF_SEARCH else None)
    if ranking is not None:
        ranking.update((row[0], rank_rows.of(row)) for row in rows)
    return [(row[0], float(row[1])) for row in rows]


def _nearest(sql: str, params: list[Any], ef_search: int | None) -> list[tuple[Any, ...]]:
    """The rows of a nearest-neighbour query, its HNSW scans searching `ef_search` wide (an index
    scan returns at most that many rows), or as wide as the database default (EF_SEARCH) when None.
    One round trip: statements sent together run in one implicit transaction, which SET LOCAL
    holds for; RESET undoes it when the caller's own transaction goes on."""
    with reader().cursor() as cursor:
        if ef_search is None:
            cursor.execute(sql, params)
            return cursor.fetchall()
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}; {sql}; RESET hnsw.ef_search", params)
        cursor.nextset()
        return cursor.fetchall()


# --- As-of semantic recall: two HNSW graphs, overfetched, then filtered ----------------------
# fact_embedding_hnsw holds the facts recallable now, fact_embedding_hnsw_past every other
# embedded fact: each fact is in one graph, so writing a fact costs one graph insert as before,
# and a fact leaving the recallable set (superseded, challenged) one more. Their predicates, as
# the migrations write them, so that PostgreSQL proves a branch may use its index.
_NOW_GRAPH = "memory_fact.status = 'active' AND memory_fact.superseded_by_id IS NULL"
_PAST_GRAPH = f"NOT ({_NOW_GRAPH})"
MAX_EF_SEARCH = 1000  # pgvector's ceiling for hnsw.ef_search


def _reaches(limit: int) -> list[int]:
    """How many neighbours each graph is asked for, widening: first three quarters of EF_SEARCH
    (two graphs searched that wide: 1.5× the current voice's one search, enough that a moment
    whose facts are a third of today's rarely needs more) or twice `limit`, then doubling up to
    pgvector's ceiling. Empty when `limit` outgrows it."""
    reach, reaches = max(EF_SEARCH * 3 // 4, 2 * limit), []
    while reach < MAX_EF_SEARCH:
        reaches.append(reach)
        reach *= 2
    return [r for r in [*reaches, MAX_EF_SEARCH] if r >= limit]


def semantic_then_sql(scope: Scope, vector: Sequence[float], *, limit: int, reach: int) -> tuple[str, list[Any]]:
    """The nearest facts of an as-of scope among each graph's nearest `reach` index entries (only
    the graph of facts recallable now when the scope has no as_of: a valid_at scope recalls
    nothing else): rows (id, similarity), at most `limit`, nearest first. A fact a scan did not
    return lies beyond its graph's edge (the farthest candidate it returned), so only candidates
    within every edge are answered: those are exact (as HNSW is) whatever the graphs hold further."""
    where, params = _scope_where(scope)
    literal = vector_literal(vector)
    graphs = [_NOW_GRAPH] if scope.as_of is None else [_NOW_GRAPH, _PAST_GRAPH]
    branch = (
        "(SELECT memory_fact.id, memory_fact.embedding <=> %s::vector AS distance, {} AS graph FROM memory_fact"
        " WHERE {} AND memory_fact.embedding IS NOT NULL ORDER BY memory_fact.embedding <=> %s::vector LIMIT %s)"
    )
    nearest = " UNION ALL ".join(branch.format(i, graph) for i, graph in enumerate(graphs))
    sql = (
        f"WITH nearest AS MATERIALIZED ({nearest})"  # noqa: S608 -- constant fragments and the compiled scope queryset; values are bound params
        " SELECT within.id, 1 - within.distance FROM (SELECT id, distance FROM nearest WHERE distance <="
        " (SELECT min(edge) FROM (SELECT max(distance) AS edge FROM nearest GROUP BY graph) AS edges)"
        # OFFSET 0: the scope's test below stays outside, on the candidates in order, and stops at
        # `limit`. A scalar subquery tests each through its key: PostgreSQL never makes it a join,
        # which (guessing the as-of filter keeps a handful of facts) read every fact believed then.
        " ORDER BY distance, id OFFSET 0) AS within"
        f" WHERE (SELECT true FROM memory_fact WHERE memory_fact.id = within.id AND {where})"
        " ORDER BY within.distance, within.id LIMIT %s"
    )
    return sql, [*[literal, literal, reach] * len(graphs), *params, limit]


def semantic_then(scope: Scope, vector: Sequence[float], *, limit: int) -> list[tuple[int, float]]:
    """The semantic voice for an as-of scope, from the indexes (semantic_then_sql): each graph's
    nearest `reach` entries (an HNSW scan searching as wide; pgvector 0.6 has no iterative scan
    to go on) filtered by the scope. When `limit` facts come back, that is the answer. Otherwise
    a wider reach, if one could find `limit` at the rate this one found facts of the scope, else
    the exact scan (semantic_exact_sql): a moment when the facts then are few among today's, or a
    narrow scope (a domain, a session), goes to it at once. ("Fewer than reach returned, so the
    graph was read whole" would not do: the reach counts dead versions the scan skips.)
    Approximate as the current voice is (HNSW); no old fact is missed for being old. A graph
    returning no row is taken as empty: only its nearest `reach` entries all being dead versions
    would hide a fact."""
    reaches = _reaches(limit)
    reach = reaches[0] if reaches else None
    while reach is not None:
        rows = _nearest(*semantic_then_sql(scope, vector, limit=limit, reach=reach), reach)
        if len(rows) == limit:
            return [(pk, float(similarity)) for pk, similarity in rows]
        reach = next((wider for wider in reaches if wider > reach and len(rows) * wider >= limit * reach), None)
    return [
        (pk, float(similarity)) for pk, similarity in _nearest(*semantic_exact_sql(scope, vector, limit=limit), None)
    ]


def semantic_exact_sql(scope: Scope, vector: Sequence[float], *, limit: int) -> tuple[str, list[Any]]:
    """The nearest facts of the scope by a scan: ordering by an expression no index serves makes
    PostgreSQL compute every distance. Exact; semantic_then's last resort."""
    return _nearest_sql(scope, vector, limit=limit, order="(memory_fact.embedding <=> %s::vector) + 0, memory_fact.id")


def temporal(scope: Scope, pool: Sequence[int], *, limit: int) -> list[tuple[int, float]]:
    """The most recently active facts among the relevant pool (newest first); with no pool,
    the most recently active facts of the scope."""
    where, params = _scope_where(scope)
    pool_sql, pool_params = (" AND memory_fact.id = ANY(%s)", [list(pool)]) if pool else ("", [])
    # As of a moment, "recently active" is measured by the mentions recorded by then.
    mentioned, mentioned_params = mentioned_then_sql(scope.as_of)
    with reader().cursor() as cursor:
        cursor.execute(
            f"SELECT memory_fact.id, extract(epoch FROM {mentioned}) FROM memory_fact"  # noqa: S608 -- `where` is the compiled scope queryset; values are bound params
            f" WHERE {where}{pool_sql} ORDER BY {mentioned} DESC, memory_fact.id DESC LIMIT %s",
            [*mentioned_params, *params, *pool_params, *mentioned_params, limit],
        )
        return [(pk, float(epoch)) for pk, epoch in cursor.fetchall()]


# The fan effect (issue 35): a neighbour reached through an episode of more than GRAPH_FANOUT facts
# inherits the seed's strength × GRAPH_FANOUT / the episode's size. A chat session stored turn by
# turn links every turn to every other; a meeting or a dispatch links a few related facts. Chosen on
# the tuning conversations CA and CB (`python -m bench.eval_conversations --part tune --ablate`:
# hybrid nDCG@10 0.404 → 0.426 and 0.386 → 0.393); the engineering sets' figures are unchanged
# (the tuning search set and G–J: their episodes hold fewer facts); 4 scored a little lower.
GRAPH_FANOUT = 8.0


def graph(
    scope: Scope,
    seeds: Sequence[int],
    *,
    limit: int,
    strengths: dict[int, float] | None = None,
    ranking: dict[int, rank_rows.RankRow] | None = None,
) -> list[tuple[int, float]]:
    """Two hops over episode edges: seed fact → episode it was written in → other facts written
    there. A neighbour scores the strength of the strongest seed reaching it (default: by seed
    order), so it ranks below the evidence that led to it. One query; with `ranking`, each
    neighbour's rank_rows.RankRow is put there."""
    if not seeds:
        return []
    strength = strengths or {pk: 1.0 / (1 + i) for i, pk in enumerate(seeds)}
    ids = list(strength)
    where, params = _scope_where(scope)
    # As of a moment, only the edges recorded by then.
    edges_sql, edges_params = ("", []) if scope.as_of is None else (" AND n.created_at <= %s", [scope.as_of])
    columns = f", {rank_rows.SQL}" if ranking is not None else ""
    with reader().cursor() as cursor:
        cursor.execute(
            f"SELECT memory_fact.id, max(seed.strength * LEAST(1.0, %s::float8 / e.size)){columns}"  # noqa: S608 -- `where` is the compiled scope queryset; values are bound params
            " FROM memory_episodefact s"
            " JOIN unnest(%s::bigint[], %s::float8[]) AS seed(id, strength) ON s.fact_id = seed.id"
            " CROSS JOIN LATERAL (SELECT count(*) AS size FROM memory_episodefact c"
            " WHERE c.episode_id = s.episode_id AND c.relation = 'written') e"
            " JOIN memory_episodefact n ON n.episode_id = s.episode_id AND n.relation = 'written'"
            f"{edges_sql} JOIN memory_fact ON memory_fact.id = n.fact_id"
            f" WHERE s.relation = 'written' AND NOT (n.fact_id = ANY(%s)) AND {where}"
            " GROUP BY memory_fact.id ORDER BY 2 DESC, 1 LIMIT %s",
            [GRAPH_FANOUT, ids, [strength[pk] for pk in ids], *edges_params, ids, *params, limit],
        )
        rows = cursor.fetchall()
    if ranking is not None:
        ranking.update((row[0], rank_rows.of(row)) for row in rows)
    return [(row[0], float(row[1])) for row in rows]
