"""Input and output serializers of the agent API."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

# `fields` cannot be a declared field name on a DRF Serializer class, hence the inline form.
ErrorSerializer = inline_serializer(
    name="Error",
    fields={
        "code": serializers.CharField(help_text="stable snake_case error code"),
        "detail": serializers.CharField(help_text="a human sentence"),
        "fields": serializers.DictField(help_text="field name → messages, for 400s"),
    },
)


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    role = serializers.CharField(source="role.name")
    workspace = serializers.CharField(source="workspace.slug")
    workspace_name = serializers.CharField(source="workspace.name")


# --- Facts ---------------------------------------------------------------------------------
MEMORY_TYPES = ["commitment", "event", "observation", "decision", "convention", "procedure", "profile"]
VERACITIES = ["human_stated", "agent_inferred", "imported", "tool_generated"]
FACT_STATUSES = ["active", "challenged", "deprecated", "archived"]


def _max_content() -> int:
    from django.conf import settings

    return int(settings.ENGRAM_FACT_MAX_CHARS)


class FactProposeIn(serializers.Serializer):
    domain = serializers.CharField(max_length=200, help_text="`architecture` or `repo:<slug>/architecture`")
    repo = serializers.SlugField(required=False, allow_null=True, max_length=100)
    topic = serializers.CharField(max_length=200)
    content = serializers.CharField(max_length=16_000)
    memory_type = serializers.ChoiceField(choices=MEMORY_TYPES)
    veracity = serializers.ChoiceField(choices=VERACITIES, default="agent_inferred")
    observed_at = serializers.DateTimeField(required=False, allow_null=True, help_text="when it was true; default now")
    valid_until = serializers.DateTimeField(required=False, allow_null=True)
    source_observation_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, max_length=50
    )
    episode_id = serializers.IntegerField(required=False, allow_null=True, min_value=1)

    def validate_content(self, value: str) -> str:
        if len(value) > _max_content():
            raise serializers.ValidationError(f"At most {_max_content()} characters.")
        return value


class FactSupersedeIn(serializers.Serializer):
    content = serializers.CharField(max_length=16_000)
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class FactListQuery(serializers.Serializer):
    domain = serializers.CharField(required=False, max_length=200)
    repo = serializers.SlugField(required=False, max_length=100)
    topic = serializers.CharField(required=False, max_length=200)
    status = serializers.ChoiceField(choices=FACT_STATUSES, required=False)
    current = serializers.BooleanField(required=False, default=True, help_text="only facts not superseded")


class FactOut(serializers.Serializer):
    id = serializers.IntegerField()
    domain = serializers.CharField(source="domain.label")
    repo = serializers.SerializerMethodField()
    topic = serializers.CharField()
    content = serializers.CharField()
    confidence = serializers.FloatField()
    memory_type = serializers.CharField()
    veracity = serializers.CharField()
    status = serializers.CharField()
    superseded_by = serializers.IntegerField(source="superseded_by_id", allow_null=True)
    superseded_at = serializers.DateTimeField(allow_null=True)
    supersede_reason = serializers.CharField()
    observed_at = serializers.DateTimeField()
    valid_until = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    last_mentioned_at = serializers.DateTimeField()
    recall_count = serializers.IntegerField()
    mention_count = serializers.IntegerField()
    human_edited = serializers.BooleanField()
    origin = serializers.CharField()
    source = serializers.CharField()
    validated_by = serializers.CharField()
    valid_for = serializers.ListField(child=serializers.CharField())
    not_valid_for = serializers.ListField(child=serializers.CharField())
    verification = serializers.CharField()
    last_validated_at = serializers.DateTimeField(allow_null=True)
    verification_contract_version = serializers.CharField()

    def get_repo(self, fact: Any) -> str | None:
        return fact.domain.repo.slug if fact.domain.repo_id else None


class ConflictOut(serializers.Serializer):
    id = serializers.IntegerField()
    domain = serializers.CharField(source="domain.label")
    topic = serializers.CharField()
    winner = serializers.IntegerField(source="winner_id")
    loser = serializers.IntegerField(source="loser_id")
    winner_content = serializers.CharField(source="winner.content")
    loser_content = serializers.CharField(source="loser.content")
    rule = serializers.CharField()
    similarity = serializers.FloatField()
    detected_by = serializers.CharField()
    detected_at = serializers.DateTimeField()


class FactHistoryEntry(serializers.Serializer):
    id = serializers.IntegerField()
    content = serializers.CharField()
    veracity = serializers.CharField()
    confidence = serializers.FloatField()
    status = serializers.CharField()
    created_at = serializers.DateTimeField()
    superseded_by = serializers.IntegerField(source="superseded_by_id", allow_null=True)
    superseded_at = serializers.DateTimeField(allow_null=True)
    supersede_reason = serializers.CharField()


class FactDetailOut(FactOut):
    source_observation_ids = serializers.SerializerMethodField()
    history = serializers.SerializerMethodField()
    conflicts = serializers.SerializerMethodField()

    def get_source_observation_ids(self, fact: Any) -> list[int]:
        return sorted(o.pk for o in fact.source_observations.all())

    @extend_schema_field(FactHistoryEntry(many=True))
    def get_history(self, fact: Any) -> list[dict[str, Any]]:
        return FactHistoryEntry(self.context["history"], many=True).data  # type: ignore[return-value]

    @extend_schema_field(ConflictOut(many=True))
    def get_conflicts(self, fact: Any) -> list[dict[str, Any]]:
        return ConflictOut(self.context["conflicts"], many=True).data  # type: ignore[return-value]


class ProposalOut(serializers.Serializer):
    fact = FactOut()
    outcome = serializers.ChoiceField(choices=["created", "re_mentioned", "conflict_won", "conflict_lost"])
    conflict_id = serializers.IntegerField(allow_null=True)
    similarity = serializers.FloatField(allow_null=True, help_text="cosine to the fact it was compared with")
    compared_with = serializers.IntegerField(allow_null=True)


class EpisodeIn(serializers.Serializer):
    kind = serializers.CharField(max_length=30)
    title = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
    started_at = serializers.DateTimeField(required=False, allow_null=True)


class EpisodeOut(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    title = serializers.CharField()
    started_at = serializers.DateTimeField()
