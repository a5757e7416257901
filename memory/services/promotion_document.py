"""The candidate document (SPEC §7): `awtl.memory_candidate.v2` as an agent submits it, parsed
and bounded before anything is stored, and the limits of every field a candidate's writes take."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from memory.errors import InvalidInput
from memory.models import (
    CANDIDATE_SCHEMA,
    FailureClass,
    MemoryType,
    PromotionStatus,
)

CANDIDATE_ID_MAX = 200
LIST_MAX = 100
ITEM_MAX = 200
SUMMARY_MAX = 4000
PROBE_MAX = 500
DETAILS_MAX = 20_000
REASON_MAX = 2000
FAILURE_TYPE_MAX = 100
ORIGIN_MAX = 40
_ORIGIN = re.compile(rf"^[a-z][a-z0-9_.:-]{{0,{ORIGIN_MAX - 1}}}$")


# --- The document -----------------------------------------------------------------------------
@dataclass
class CandidateDocument:
    """A parsed `awtl.memory_candidate.v2` document."""

    candidate_id: str
    failure_class: str
    proposed_memory: str
    failure_type: str = ""
    source_action_ids: list[str] = field(default_factory=list)
    root_cause_summary: str = ""
    applies_to: list[str] = field(default_factory=list)
    does_not_apply_to: list[str] = field(default_factory=list)
    evidence_refs: list[str] = field(default_factory=list)
    verification_probe_candidate: str = ""
    requires_human_review: bool = False
    origin: str = "agent"
    memory_type: str = MemoryType.PROCEDURE
    schema_version: str = CANDIDATE_SCHEMA


def _text(raw: Mapping[str, Any], key: str, errors: dict[str, Any], *, max_len: int, required: bool = False) -> str:
    value = raw.get(key)
    if value is None:
        if required:
            errors[key] = ["This field is required."]
        return ""
    if not isinstance(value, str):
        errors[key] = ["Must be a string."]
        return ""
    value = value.strip()
    if required and not value:
        errors[key] = ["May not be blank."]
    elif len(value) > max_len:
        errors[key] = [f"At most {max_len} characters."]
    return value


def string_list(value: Any, *, ids: bool = False) -> tuple[list[str], str | None]:
    """A list of short non-empty strings (ids may also be integers); (cleaned, error or None)."""
    if value is None:
        return [], None
    if not isinstance(value, list):
        return [], "Must be a list of strings."
    if len(value) > LIST_MAX:
        return [], f"At most {LIST_MAX} items."
    cleaned: list[str] = []
    for item in value:
        if ids and isinstance(item, int) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str) or not item.strip():
            return [], "Every item must be a non-empty string."
        if len(item) > ITEM_MAX:
            return [], f"Items have at most {ITEM_MAX} characters."
        if item.strip() not in cleaned:
            cleaned.append(item.strip())
    return cleaned, None


def parse_candidate_document(raw: Mapping[str, Any]) -> CandidateDocument:
    """Validate an `awtl.memory_candidate.v2` document (the domain/repo/topic envelope is not
    part of it). Raises InvalidInput naming every bad field; unknown keys are ignored, an
    absent `schema` means v2, any other schema version is refused."""
    if not isinstance(raw, Mapping):
        raise InvalidInput("A candidate is a JSON object.", fields={"non_field_errors": ["Expected an object."]})
    errors: dict[str, Any] = {}
    for key in ("schema", "schema_version"):
        version = raw.get(key)
        if version is not None and version != CANDIDATE_SCHEMA:
            errors[key] = [f"Unknown schema version {version!r}; this server accepts {CANDIDATE_SCHEMA!r}."]
            raise InvalidInput(f"Unknown schema version {version!r}.", code="unknown_schema_version", fields=errors)

    candidate_id = _text(raw, "candidate_id", errors, max_len=CANDIDATE_ID_MAX, required=True)
    failure_class = raw.get("failure_class")
    if failure_class is None:
        errors["failure_class"] = ["This field is required."]
    elif failure_class not in FailureClass.values:
        errors["failure_class"] = [f"One of {', '.join(FailureClass.values)}."]
    proposed = _text(raw, "proposed_memory", errors, max_len=settings.ENGRAM_FACT_MAX_CHARS, required=True)
    failure_type = _text(raw, "failure_type", errors, max_len=FAILURE_TYPE_MAX)
    summary = _text(raw, "root_cause_summary", errors, max_len=SUMMARY_MAX)
    probe = _text(raw, "verification_probe_candidate", errors, max_len=PROBE_MAX)

    lists: dict[str, list[str]] = {}
    for key in ("source_action_ids", "evidence_refs"):
        lists[key], problem = string_list(raw.get(key), ids=key == "source_action_ids")
        if problem:
            errors[key] = [problem]
    scope = raw.get("scope")
    scope_errors: dict[str, list[str]] = {}
    if scope is not None and not isinstance(scope, Mapping):
        errors["scope"] = ["Must be an object {applies_to, does_not_apply_to}."]
        scope = None
    for key in ("applies_to", "does_not_apply_to"):
        lists[key], problem = string_list((scope or {}).get(key))
        if problem:
            scope_errors[key] = [problem]
    if scope_errors:
        errors["scope"] = scope_errors

    status = raw.get("promotion_status")
    if status is not None and status != PromotionStatus.CANDIDATE:
        errors["promotion_status"] = ["A submitted document is a `candidate`; the gate decides the rest."]
    review = raw.get("requires_human_review", False)
    if review is None:
        review = False
    if not isinstance(review, bool):
        errors["requires_human_review"] = ["Must be a boolean."]
    origin = raw.get("origin") or "agent"
    if not isinstance(origin, str) or not _ORIGIN.match(origin):
        errors["origin"] = ["A short lowercase token: agent, memory_agent, human, imported…"]
    memory_type = raw.get("memory_type") or MemoryType.PROCEDURE
    if memory_type not in MemoryType.values:
        errors["memory_type"] = [f"One of {', '.join(MemoryType.values)}."]
    if errors:
        raise InvalidInput("The candidate document has invalid fields; see `fields`.", fields=errors)
    return CandidateDocument(
        candidate_id=candidate_id,
        failure_class=str(failure_class),
        proposed_memory=proposed,
        failure_type=failure_type,
        source_action_ids=lists["source_action_ids"],
        root_cause_summary=summary,
        applies_to=lists["applies_to"],
        does_not_apply_to=lists["does_not_apply_to"],
        evidence_refs=lists["evidence_refs"],
        verification_probe_candidate=probe,
        requires_human_review=bool(review),
        origin=str(origin),
        memory_type=str(memory_type),
    )
