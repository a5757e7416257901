"""What ranking reads of a candidate fact, and nothing more (issue 38).

Semantic and hybrid search rank every fused candidate (50–100 facts) by decay, confidence,
authority and repo, and show only the first `limit`. Loading every candidate's whole row cost
more than the statements that found them: ~90 rows × 28 columns a search, three timestamps each
parsed in Python (1.7 ms for the rows, 0.26 ms of it in PostgreSQL). So the voices' statements
bring these few columns beside each ranked id, timestamps as epoch seconds (float8 keeps the
microseconds), and only the hits are loaded whole (voices.hits_by_id).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from django.db.backends.base.base import BaseDatabaseWrapper

# Each over the row `memory_fact`, in RankRow's order.
COLUMNS = (
    "memory_fact.memory_type",
    "date_part('epoch', memory_fact.last_mentioned_at)",
    "memory_fact.confidence",
    "date_part('epoch', memory_fact.observed_at)",
    # a person vouched for it: validated (by a replay or a person) or edited by a person
    "(memory_fact.validated_by <> '' OR memory_fact.human_edited)",
    "memory_fact.veracity",
    "memory_fact.recall_count",
    "date_part('epoch', memory_fact.created_at)",
    "memory_fact.domain_id",
)
SQL = ", ".join(COLUMNS)
WIDTH = len(COLUMNS)


class RankRow(NamedTuple):
    memory_type: str
    last_mentioned: float  # epoch seconds
    confidence: float
    observed: float | None
    vouched: bool | None
    veracity: str
    recall_count: int
    created: float
    domain_id: int


def of(row: Sequence[Any]) -> RankRow:
    """The RankRow of a statement's row whose last WIDTH columns are COLUMNS."""
    return RankRow(*row[-WIDTH:])


def moment(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def load(database: BaseDatabaseWrapper, ids: Sequence[int]) -> dict[int, RankRow]:
    """The RankRows of `ids` (missing facts left out), for candidates no voice brought them with
    (an as-of scope's semantic voice)."""
    if not ids:
        return {}
    with database.cursor() as cursor:
        cursor.execute(f"SELECT memory_fact.id, {SQL} FROM memory_fact WHERE memory_fact.id = ANY(%s)", [list(ids)])  # noqa: S608 -- constant columns; ids are a bound param
        return {row[0]: of(row) for row in cursor.fetchall()}
