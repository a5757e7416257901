"""A fact as recall loads it (search hits, preamble lines, their serializers, ranking): the
HIT_FIELDS columns, its domain and repo, by the statement that ranked it or by
voices.hits_by_id, made into a Fact only when it is shown."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, models
from django.db.models import DEFERRED

from memory.models import Fact, MemoryDomain, Repo

M = TypeVar("M", bound=models.Model)

# What recall answers with (search hits, preamble lines, their serializers, ranking): a fact
# loaded by hits_by_id or lexical_hits has these and its domain and repo; any other field is
# read on first use (Django's deferred fields).
HIT_FIELDS = (
    "id",
    "workspace_id",
    "domain_id",
    "topic",
    "content",
    "confidence",
    "memory_type",
    "veracity",
    "status",
    "created_at",
    "last_mentioned_at",
    "valid_for",
    "not_valid_for",
    "verification",
    "session_key",
    "observed_at",
    "validated_by",
    "human_edited",
    # provenance (issue 39): what a hit carries as GET facts/{id}/ does
    "origin",
    "source",
    "source_file",
    "source_layer",
    "rationale",
    "origin_candidate_id",
    "recall_count",
)
_INDEX = {name: i for i, name in enumerate(HIT_FIELDS)}
_JSON_FIELDS = {HIT_FIELDS.index("valid_for"), HIT_FIELDS.index("not_valid_for")}
_HIT_COLUMNS = ", ".join(f"hit.{name}" for name in HIT_FIELDS) + ", hit_domain.name, hit_domain.repo_id, hit_repo.slug"
HIT_JOINS = (
    " LEFT JOIN memory_memorydomain hit_domain ON hit_domain.id = hit.domain_id"
    " LEFT JOIN memory_repo hit_repo ON hit_repo.id = hit_domain.repo_id"
)


def hit_columns(vectors: bool, extra: str) -> str:
    """HIT_FIELDS, domain name, repo id and slug, the vector as text (or NULL), `extra` (or NULL)."""
    columns = _HIT_COLUMNS + (", hit.embedding::text" if vectors else ", NULL")
    return columns + (f", (SELECT {extra})" if extra else ", NULL")


@dataclass
class Loaded:
    """Ranked (id, score) pairs, the rows of the facts loaded with them (hit_columns' values, by
    id; `fact(pk)` makes the Fact), and the value of the `extra` expression asked for (None
    without it or without rows)."""

    ranked: list[tuple[int, float]]
    rows: dict[int, Sequence[Any]]
    extra: Any = None
    alias: str = DEFAULT_DB_ALIAS
    vectors: bool = False
    _facts: dict[int, Fact] = field(default_factory=dict)
    matched: dict[int, float] = field(default_factory=dict)  # id → matched term weight (lexical_hits)

    def fact(self, pk: int) -> Fact:
        """The loaded fact `pk` with its domain and repo (built once, only for what is shown)."""
        if pk not in self._facts:
            self._facts[pk] = _fact_of(self.rows[pk], vectors=self.vectors, alias=self.alias)
        return self._facts[pk]

    def value(self, pk: int, name: str) -> Any:
        """One of HIT_FIELDS of a loaded fact, without making the Fact."""
        return self.rows[pk][_INDEX[name]]

    def repo_slug(self, pk: int) -> str | None:
        return self.rows[pk][len(HIT_FIELDS) + 2]


def loaded(model: type[M], alias: str, values: dict[str, Any]) -> M:
    """An instance of `model` as Django loads one from the database `alias` with only the fields
    (attnames) of `values`; any other field is read on first use."""
    fields = model._meta.concrete_fields
    return model.from_db(alias, [f.attname for f in fields], [values.get(f.attname, DEFERRED) for f in fields])


def _fact_of(row: Sequence[Any], *, vectors: bool, alias: str) -> Fact:
    """A Fact with its domain and repo from hit_columns' values, as Django would load them from
    the database `alias`."""
    width = len(HIT_FIELDS)
    values = {
        name: json.loads(v) if i in _JSON_FIELDS and isinstance(v, str) else v
        for i, (name, v) in enumerate(zip(HIT_FIELDS, row[:width], strict=True))
    }
    fact = loaded(Fact, alias, values)
    domain_name, repo_id, repo_slug, vector_text = row[width : width + 4]
    domain = loaded(MemoryDomain, alias, {"id": fact.domain_id, "name": domain_name, "repo_id": repo_id})
    domain.repo = loaded(Repo, alias, {"id": repo_id, "slug": repo_slug}) if repo_id is not None else None
    fact.domain = domain
    if vectors:
        fact.embedding_text = vector_text  # type: ignore[attr-defined]
    return fact
