"""A rule-based intent classifier for search queries, and the voice weights of each intent.

| intent     | when the query…                                               | lexical | semantic | graph | recency |
|------------|---------------------------------------------------------------|---------|----------|-------|---------|
| lookup     | names an identifier: code-like token, path, number, quotes    | 1.0     | 0.8      | 0.3   | 0.05    |
| recent     | asks what changed / is latest / new / current                 | 0.5     | 0.8      | 0.3   | 1.0     |
| relational | asks why, what caused, what is related / affected / connected | 0.5     | 1.0      | 0.7   | 0.05    |
| general    | anything else (SPEC §6 default order: semantic, graph, lexical, recency) | 0.5 | 1.0 | 0.3 | 0.05 |

Recency and graph add to a candidate in proportion to its direct evidence for recency (see
memory.search.hybrid.GATES). The weights were first tuned on the tuning search set
(bench/data/recall/search_tune.jsonl); in round 3 of issue 19 (2026-12-02) the lexical weight of
relational and general queries went 0.35 → 0.5 and the graph weight of general queries 0.6 → 0.3,
chosen by `python -m bench.tune_fusion` on the tuning set and the spent held-out sets G–J together
(998 queries), then frozen before the held-out sets K and L were written.
"""

from __future__ import annotations

import re
from enum import StrEnum


class Intent(StrEnum):
    LOOKUP = "lookup"
    RECENT = "recent"
    RELATIONAL = "relational"
    GENERAL = "general"


WEIGHTS: dict[Intent, dict[str, float]] = {
    Intent.LOOKUP: {"lexical": 1.0, "semantic": 0.8, "graph": 0.3, "recency": 0.05},
    Intent.RECENT: {"lexical": 0.5, "semantic": 0.8, "graph": 0.3, "recency": 1.0},
    Intent.RELATIONAL: {"lexical": 0.5, "semantic": 1.0, "graph": 0.7, "recency": 0.05},
    Intent.GENERAL: {"lexical": 0.5, "semantic": 1.0, "graph": 0.3, "recency": 0.05},
}

_IDENTIFIER = re.compile(
    r"`[^`]+`|\"[^\"]+\"|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\b\w+\.(?:py|ts|tsx|js|json|ya?ml|md|toml|sql|go|rs)\b|"
    r"\b\w*[/\\]\w+|\b[A-Za-z]+[-_]?\d{2,}\b|\bv?\d+\.\d+(?:\.\d+)?\b|\b[a-z]+_[a-z0-9_]+\b"
)
_RECENT = re.compile(
    r"\b(recent(ly)?|latest|newest|changed?|changes|new|now|current(ly)?|today|yesterday|this (week|month)|"
    r"last (week|month|few days)|updated?|nowadays|anymore|still|these days|at the moment|at present|any ?more)\b",
    re.IGNORECASE,
)
_RELATIONAL = re.compile(
    r"\b(why|caus(e|ed|es)|because|reason|related|relat(e|es|ion)|connected|depend(s|ency|encies)?|"
    r"affect(s|ed)?|impact(s|ed)?|led to|lead to|result(ed)? in|what else|root cause|follow[- ]up|consequence)\b",
    re.IGNORECASE,
)


def classify(query: str) -> Intent:
    """Recent and relational phrasing win over identifiers, which win over the default."""
    if _RECENT.search(query):
        return Intent.RECENT
    if _RELATIONAL.search(query):
        return Intent.RELATIONAL
    if _IDENTIFIER.search(query):
        return Intent.LOOKUP
    return Intent.GENERAL
