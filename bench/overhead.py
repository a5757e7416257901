"""Issue 38: what each endpoint of `make bench` costs above the work it cannot avoid, measured in
the same run (no Django here: bench.run reports it, tests check it).

An endpoint's unavoidable parts: an authenticated request that does nothing (GET me/), the query's
embedding, and the top-10 SQL of each index it reads. Its overhead is its p50 minus the sum of
those parts' p50s; its tail is p95 / p50.
"""

from __future__ import annotations

# Overhead targets are p50 ms; every endpoint's p95 ≤ 1.6× p50.
ME, EMBEDDING, PGVECTOR, FULLTEXT = (
    "floor: GET me/ (auth)",
    "query embedding",
    "pgvector top-10 (SQL)",
    "full-text top-10 (SQL)",
)
PARTS = {
    "keyword": (ME, FULLTEXT),
    "preamble": (ME, FULLTEXT),
    "semantic": (ME, EMBEDDING, PGVECTOR),
    "hybrid": (ME, EMBEDDING, PGVECTOR, FULLTEXT),
}
# The endpoints' own ranking statements alone (bench.run.ranking_baselines): the restated floor.
LEXICAL_RANKING, SEMANTIC_RANKING = "lexical ranking (SQL)", "semantic ranking (SQL)"
OVERHEAD_TARGETS = {"keyword": 2.0, "preamble": 2.0, "semantic": 4.0, "hybrid": 8.0}
TAIL_TARGET = 1.6  # p95 / p50
HYBRID_VS_PGVECTOR = 8.0  # hybrid p50 ≤ 8× the plain pgvector query


def overheads(result: dict, server: str = "primary") -> list[dict]:
    """Per endpoint and client count on `server` (the primary alone by default): p50, the sum of
    its unavoidable parts' p50s, the overhead (p50 minus that sum) and p95 / p50, each against its
    target. An endpoint whose parts were not all measured at that client count is left out."""
    rows = {(r["name"], r["server"], r["clients"]): r for r in result["rows"]}
    out = []
    for clients in sorted({r["clients"] for r in result["rows"]}):
        for name, parts in PARTS.items():
            row = rows.get((name, server, clients))
            measured = [rows.get((part, server, clients)) for part in parts]
            if row is None or not all(measured):
                continue
            floor = sum(part["p50"] for part in measured if part)
            overhead = row["p50"] - floor
            tail = row["p95"] / row["p50"]
            line = {
                "name": name,
                "clients": clients,
                "p50": row["p50"],
                "floor": floor,
                "overhead": overhead,
                "tail": tail,
                "overhead_met": overhead <= OVERHEAD_TARGETS[name],
                "tail_met": tail <= TAIL_TARGET,
            }
            if name == "hybrid" and (vector := rows.get((PGVECTOR, server, clients))) is not None:
                line["vs_pgvector"] = row["p50"] / vector["p50"]
            out.append(line)
    return out


def ranking_overheads(result: dict, server: str = "primary") -> list[dict]:
    """Per endpoint and client count: p50 minus what the endpoint cannot avoid sending once its
    ranking is what it is — GET me/, its own ranking statements (keyword and preamble: the lexical
    one; semantic and hybrid: the lexical one, which runs while the query is embedded, so the
    longer of the two, then the semantic one) — against the same targets."""
    rows = {(r["name"], r["server"], r["clients"]): r for r in result["rows"]}
    out = []
    for clients in sorted({r["clients"] for r in result["rows"]}):
        me, embedding, lexical, semantic = (
            rows.get((part, server, clients)) for part in (ME, EMBEDDING, LEXICAL_RANKING, SEMANTIC_RANKING)
        )
        if not (me and embedding and lexical and semantic):
            continue
        floors = {
            "keyword": me["p50"] + lexical["p50"],
            "preamble": me["p50"] + lexical["p50"],
            "semantic": me["p50"] + max(embedding["p50"], lexical["p50"]) + semantic["p50"],
            "hybrid": me["p50"] + max(embedding["p50"], lexical["p50"]) + semantic["p50"],
        }
        for name, floor in floors.items():
            row = rows.get((name, server, clients))
            if row is None:
                continue
            overhead = row["p50"] - floor
            out.append(
                {
                    "name": name,
                    "clients": clients,
                    "p50": row["p50"],
                    "floor": floor,
                    "overhead": overhead,
                    "overhead_met": overhead <= OVERHEAD_TARGETS[name],
                }
            )
    return out
