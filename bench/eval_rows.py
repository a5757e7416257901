"""The rows of a labelled search set (bench.eval --data MODULE): one shape for a fact and one for a
query, shared by the tuning set and the held-out sets that build their rows with a function."""

from __future__ import annotations

from typing import Any


def fact_row(
    key: str,
    domain: str,
    topic: str,
    content: str,
    memory_type: str,
    veracity: str,
    age_days: float,
    repo: str | None = None,
) -> dict[str, Any]:
    """A fact to load: `key` names it in SUPERSESSIONS, EPISODES and the queries' `relevant`;
    `age_days` back-dates it; `repo` puts it in that repo's `domain`."""
    return {
        "key": key,
        "domain": domain,
        "topic": topic,
        "content": content,
        "memory_type": memory_type,
        "veracity": veracity,
        "age_days": age_days,
        "repo": repo,
    }


def query_row(qid: str, category: str, query: str, relevant: dict[str, int], repo: str | None = None) -> dict[str, Any]:
    """A query and its graded relevant fact keys (3 best); `repo`, when given, is passed to search."""
    row: dict[str, Any] = {"id": qid, "category": category, "query": query, "relevant": relevant}
    if repo is not None:
        row["repo"] = repo
    return row
