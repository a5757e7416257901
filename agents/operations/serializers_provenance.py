"""Where a fact came from (issue 20, point 4; issue 39, point 4): what GET facts/, GET facts/{id}/,
search hits and preamble facts answer as `provenance`."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

__all__ = ["RECALL_RATIONALE_CHARS", "ProvenanceOut", "attach_origin_reviews", "provenance_of"]


class ProvenanceOut(serializers.Serializer):
    """Where a fact came from. Blank strings and nulls when unknown (an agent's proposal has no file)."""

    source = serializers.CharField(  # type: ignore[assignment]
        help_text="how it was written: agent_api, remember_agent_human_approved (a remember review), "
        "meeting_decisions, supersede, consolidate:<session>, promotion…"
    )
    file = serializers.CharField(help_text="the file a remember review kept it from (its path), else empty")
    layer = serializers.CharField(help_text="the remember layer: user/profile, project/context, domain/knowledge")
    rationale = serializers.CharField(help_text="why it was kept (the remember review's rationale)")
    review_id = serializers.IntegerField(
        allow_null=True, help_text="the remember review whose approval stored it (GET reviews/{id}/), else null"
    )
    candidate_id = serializers.IntegerField(
        allow_null=True, help_text="the promotion candidate it was promoted from (GET candidates/{id}/), else null"
    )
    session_key = serializers.CharField(help_text="the session key it was written under (as the fact's `session_key`)")


# A recalled fact's rationale (search hits, preamble facts) is cut to this many characters: a
# remember review's rationale is free text, and a recall answers within its size budget; GET
# facts/{id}/ has it whole.
RECALL_RATIONALE_CHARS = 300


def provenance_of(fact: Any, *, rationale_chars: int | None = None) -> dict[str, Any]:
    """ProvenanceOut of `fact` (its originating review read unless already attached); the
    rationale cut to `rationale_chars` (with "…") when given."""
    if not hasattr(fact, "origin_review_id"):
        attach_origin_reviews([fact])
    rationale = str(fact.rationale or "")
    if rationale_chars is not None and len(rationale) > rationale_chars:
        rationale = rationale[: rationale_chars - 1] + "…"
    return {
        "source": str(fact.source),
        "file": str(fact.source_file),
        "layer": str(fact.source_layer),
        "rationale": rationale,
        "review_id": fact.origin_review_id,
        "candidate_id": fact.origin_candidate_id,
        "session_key": str(fact.session_key),
    }


def attach_origin_reviews(facts: list[Any]) -> None:
    """Set each fact's `origin_review_id` (one query for all; none unless a review stored one)."""
    from review.selectors import origin_review_ids

    found = origin_review_ids(facts)
    for fact in facts:
        fact.origin_review_id = found.get(fact.pk)
