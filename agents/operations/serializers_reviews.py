"""Serializers of the remember review endpoints (API.md, "Remember reviews")."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from review.models import ReviewStatus
from review.selectors import MAX_WAIT_SECONDS
from review.services import SESSION_ID_MAX

OUTPUT_MAX_CHARS = 200_000
FILES_MAX = 50


class StrictText(serializers.CharField):
    """A string, never a number or boolean coerced into one (file texts are taken verbatim)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class ReviewSubmitIn(serializers.Serializer):
    session_id = serializers.CharField(
        max_length=SESSION_ID_MAX,
        help_text="the agent runtime's session (turn) id; while a review of it is live (not consumed) a "
        "second submission answers that one",
    )
    repo = serializers.SlugField(required=False, allow_null=True, max_length=100)
    output = StrictText(
        max_length=OUTPUT_MAX_CHARS,
        allow_blank=True,
        trim_whitespace=False,
        help_text="the remember sub-agent's raw output: a fenced JSON block `recommendations`, prose allowed",
    )
    files = serializers.DictField(
        child=StrictText(allow_blank=True, trim_whitespace=False),
        required=False,
        default=dict,
        help_text="path → text of each nominated file (Engram cannot see the agent's disk)",
    )

    def validate_files(self, value: dict[str, str]) -> dict[str, str]:
        if len(value) > FILES_MAX:
            raise serializers.ValidationError(f"At most {FILES_MAX} files.")
        return value


class ReviewWaitQuery(serializers.Serializer):
    wait = serializers.FloatField(
        required=False,
        default=0,
        min_value=0,
        max_value=MAX_WAIT_SECONDS,
        help_text=f"seconds to long-poll while pending (max {MAX_WAIT_SECONDS})",
    )


class ReviewListQuery(serializers.Serializer):
    session = serializers.CharField(
        max_length=SESSION_ID_MAX, help_text="the session (turn) id the reviews were submitted under (`session_id`)"
    )
    status = serializers.ChoiceField(
        choices=ReviewStatus.values, required=False, help_text="only the reviews in this state"
    )


class ReviewItemOut(serializers.Serializer):
    id = serializers.IntegerField()
    path = serializers.CharField()
    bytes = serializers.IntegerField()
    recommended_layer = serializers.CharField()
    rationale = serializers.CharField()
    suggested_memory_content = serializers.CharField()
    # A field named `source` shadows Field.source for type checkers only; DRF pops declared fields.
    source = serializers.CharField(help_text="json, or fallback (path found in the text)")  # type: ignore[assignment]
    selected = serializers.BooleanField()
    layer = serializers.CharField(help_text="the layer it is (or was) stored in, after the reviewer's override")
    stored_fact_id = serializers.IntegerField(
        allow_null=True,
        source="stored_fact_id_for_agent",
        help_text="null until stored, and when stored in a domain this agent's role may not read",
    )


class ResolutionOut(serializers.Serializer):
    approved = serializers.BooleanField()
    selected_paths = serializers.ListField(child=serializers.CharField())
    edits = serializers.DictField(help_text="path → the fields the reviewer overrode (layer, rationale, content)")
    stored_ids = serializers.ListField(child=serializers.IntegerField())
    withheld_paths = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="paths a person stored in a domain this agent's role may not read: no fact id, no outcome",
    )
    note = serializers.CharField(help_text="a short sentence the runtime can put in its final answer")


class ReviewOut(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField(help_text="pending, approved, rejected or consumed")
    session_id = serializers.CharField()
    repo = serializers.SerializerMethodField()
    used_fallback = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    consumed_at = serializers.DateTimeField(allow_null=True)
    items = ReviewItemOut(many=True, source="items.all")
    resolution = serializers.SerializerMethodField()
    review_url = serializers.SerializerMethodField()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_repo(self, review: Any) -> str | None:
        return review.repo.slug if review.repo is not None else None

    @extend_schema_field(ResolutionOut(allow_null=True))
    def get_resolution(self, review: Any) -> dict[str, Any] | None:
        """Null while pending; afterwards what the reviewer decided, as this agent may read it
        (review.selectors.review_for_agent withholds facts stored in its `none` domains)."""
        return review.resolution_for_agent

    @extend_schema_field(serializers.URLField())
    def get_review_url(self, review: Any) -> str:
        path = reverse("review:remember-review", args=[review.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path
