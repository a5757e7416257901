"""Serializers of the memory-agent run endpoints (SPEC §9, API.md "Memory agent runs").

Input serializers check shapes and the same bounds as `agents.runs`, which stays the authority
for every caller (API, MCP, in-process adapter).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents import runs
from agents.operations.serializers_candidates import CandidateOut
from memory.models import BankItem, BankKind, FailureClass, MemoryRun


# --- Input ---------------------------------------------------------------------------------------
class Text(serializers.CharField):
    """A CharField that takes only JSON strings: `5` or `true` for a text is a mistake, not a text."""

    default_error_messages = {"not_a_string": "Must be a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class RunIn(serializers.Serializer):
    task = Text(max_length=runs.TASK_MAX, help_text="what the action agent is working on")


class StatusIn(serializers.Serializer):
    content = Text(
        max_length=runs.STATUS_MAX, allow_blank=True, help_text="the progress note; replaces the previous one"
    )


class ItemIdField(serializers.RegexField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", runs.ITEM_ID_MAX)
        kwargs.setdefault("help_text", "the memory agent's id for the item; saving the same id replaces it")
        super().__init__(runs.ITEM_ID, error_messages={"invalid": runs.ITEM_ID_RULE}, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class KnowledgeIn(serializers.Serializer):
    id = ItemIdField()
    content = Text(max_length=runs.ITEM_CONTENT_MAX)
    tags = serializers.ListField(
        child=Text(max_length=runs.TAG_MAX),
        required=False,
        default=list,
        max_length=runs.TAGS_MAX,
        help_text="labels; `applies_to:X` / `not_for:Y` become the scope of a candidate offered at finish",
    )


class ProceduralIn(serializers.Serializer):
    id = ItemIdField()
    content = Text(max_length=runs.ITEM_CONTENT_MAX)
    outcome = Text(max_length=runs.OUTCOME_MAX, help_text="what happened: failed, worked, partial, or a short phrase")


class DeleteQuery(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=[BankKind.KNOWLEDGE, BankKind.PROCEDURAL], required=False, help_text="only this kind (both by default)"
    )


class WindowStepIn(serializers.Serializer):
    step = serializers.IntegerField(min_value=0)
    command = Text(required=False, allow_blank=True, trim_whitespace=False, default="")
    thought = Text(required=False, allow_blank=True, trim_whitespace=False, default="")
    ok = serializers.BooleanField(required=False, allow_null=True, default=None)
    output = Text(required=False, allow_blank=True, trim_whitespace=False, default="")


class InterventionIn(serializers.Serializer):
    step = serializers.IntegerField(min_value=0, max_value=10_000_000, help_text="the step the decision precedes")
    reminder = Text(
        max_length=runs.REMINDER_MAX,
        allow_null=True,
        required=False,
        default=None,
        help_text="one specific, grounded reminder appended to the action agent's context; null = stay silent",
    )
    rationale = Text(max_length=runs.RATIONALE_MAX, required=False, allow_blank=True, default="")
    window = WindowStepIn(
        many=True, required=False, default=list, help_text="the steps reviewed (at most the last 8), for the run page"
    )

    def validate_window(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(value) > runs.WINDOW_MAX:
            raise serializers.ValidationError(f"At most {runs.WINDOW_MAX} steps.")
        return value


class FinishScopeIn(serializers.Serializer):
    applies_to = serializers.ListField(child=Text(max_length=200), required=False, max_length=100)
    does_not_apply_to = serializers.ListField(child=Text(max_length=200), required=False, max_length=100)


class FinishIn(serializers.Serializer):
    offer_candidates = serializers.BooleanField(
        required=False,
        default=False,
        help_text="offer the knowledge and procedural items as promotion candidates (human review required)",
    )
    items = serializers.ListField(
        child=Text(max_length=runs.ITEM_ID_MAX),
        required=False,
        allow_null=True,
        default=None,
        max_length=200,
        help_text="only these item ids (default: every knowledge and procedural item)",
    )
    domain = Text(
        max_length=200, required=False, allow_null=True, help_text="where the candidates would go (default `knowledge`)"
    )
    repo = serializers.SlugField(required=False, allow_null=True, max_length=100)
    topic = Text(
        max_length=200, required=False, allow_null=True, help_text="default: the item's first tag, else its id"
    )
    failure_class = serializers.ChoiceField(
        choices=FailureClass.values, required=False, default=FailureClass.AGENT_FAILURE
    )
    scope = FinishScopeIn(required=False, help_text="scope and anti-scope added to every candidate offered")


# --- Output --------------------------------------------------------------------------------------
class RunOut(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.CharField()
    status = serializers.CharField(help_text="running or finished")
    episode_id = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    end_reason = serializers.CharField(
        help_text="why the run ended: `finished` (by its agent) or `abandoned: no activity for N hours` (closed by "
        "the daily job after ENGRAM_RUN_ABANDON_HOURS without a write); empty while it runs"
    )
    last_activity_at = serializers.DateTimeField(
        help_text="the run's latest write (start, bank, decision); reads do not count"
    )
    run_url = serializers.SerializerMethodField(help_text="the run page in the review site")

    def get_run_url(self, run: MemoryRun) -> str:
        path = runs.run_page_path(run.pk)
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class KnowledgeOut(serializers.Serializer):
    id = serializers.CharField(source="item_id")
    content = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    candidate_id = serializers.IntegerField(allow_null=True, help_text="the candidate it was offered as, if any")
    updated_at = serializers.DateTimeField()


class ProceduralOut(serializers.Serializer):
    id = serializers.CharField(source="item_id")
    content = serializers.CharField()
    outcome = serializers.CharField()
    candidate_id = serializers.IntegerField(allow_null=True, help_text="the candidate it was offered as, if any")
    updated_at = serializers.DateTimeField()


class BankOut(serializers.Serializer):
    run = serializers.IntegerField(source="run.pk")
    run_status = serializers.CharField(source="run.status", help_text="running or finished")
    run_end_reason = serializers.CharField(
        source="run.end_reason", help_text="why the run ended (`finished`, `abandoned: …`); empty while it runs"
    )
    status = serializers.SerializerMethodField(help_text="the progress note (memory agent only)")
    status_updated_at = serializers.SerializerMethodField()
    knowledge = KnowledgeOut(many=True)
    procedural = ProceduralOut(many=True)

    def get_status(self, bank: Any) -> str:
        return bank.status.content if bank.status is not None else ""

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_status_updated_at(self, bank: Any) -> Any:
        return serializers.DateTimeField().to_representation(bank.status.updated_at) if bank.status else None


class StatusOut(serializers.Serializer):
    status = serializers.CharField(source="content")
    updated_at = serializers.DateTimeField()


class SavedItemOut(serializers.Serializer):
    kind = serializers.CharField()
    id = serializers.CharField(source="item_id")
    content = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    outcome = serializers.CharField()
    created = serializers.SerializerMethodField(help_text="true when the id was new, false when it was replaced")
    updated_at = serializers.DateTimeField()

    def get_created(self, item: BankItem) -> bool:
        return bool(self.context.get("created"))


class DeletedItemOut(serializers.Serializer):
    kind = serializers.CharField()
    id = serializers.CharField(source="item_id")


class DeletedOut(serializers.Serializer):
    deleted = DeletedItemOut(many=True)


class WindowStepOut(serializers.Serializer):
    step = serializers.IntegerField()
    command = serializers.CharField()
    thought = serializers.CharField()
    ok = serializers.BooleanField(allow_null=True)
    output = serializers.CharField()


class InterventionOut(serializers.Serializer):
    id = serializers.IntegerField()
    run = serializers.IntegerField(source="run_id")
    step = serializers.IntegerField()
    reminder = serializers.CharField(allow_null=True)
    intervened = serializers.SerializerMethodField(help_text="false: selective silence")
    rationale = serializers.CharField()
    window = WindowStepOut(many=True)
    created_at = serializers.DateTimeField()

    def get_intervened(self, intervention: Any) -> bool:
        return intervention.reminder is not None


class FinishOut(RunOut):
    candidates = CandidateOut(many=True, help_text="the promotion candidates created (origin memory_agent)")
