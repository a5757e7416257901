"""Serializers of the promotion-candidate endpoints (SPEC §7, API.md "Promotion candidates").

Input serializers check shapes and types; `memory.services.promotion.parse_candidate_document`
is the authority on the document itself (schema version, classes, scope), for every caller.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.operations.serializers import FactOut, FactText
from memory.models import CANDIDATE_SCHEMA, FailureClass, MemoryType, PromotionDecision, PromotionStatus
from memory.services.facts import TOPIC_MAX
from memory.services.promotion import (
    CANDIDATE_ID_MAX,
    DETAILS_MAX,
    FAILED,
    FAILURE_TYPE_MAX,
    ITEM_MAX,
    LIST_MAX,
    ORIGIN_MAX,
    PASSED,
    PENDING,
    PROBE_MAX,
    REASON_MAX,
    SUMMARY_MAX,
    compute_gates,
    replay_standing,
)

DOCUMENT_KEYS = (
    "schema",
    "schema_version",
    "candidate_id",
    "failure_class",
    "failure_type",
    "source_action_ids",
    "root_cause_summary",
    "proposed_memory",
    "scope",
    "evidence_refs",
    "verification_probe_candidate",
    "promotion_status",
    "requires_human_review",
    "origin",
    "memory_type",
)


# --- Input ---------------------------------------------------------------------------------------
class CandidateScopeIn(serializers.Serializer):
    applies_to = serializers.ListField(
        child=serializers.CharField(max_length=ITEM_MAX),
        required=False,
        max_length=LIST_MAX,
        help_text="where the rule applies",
    )
    does_not_apply_to = serializers.ListField(
        child=serializers.CharField(max_length=ITEM_MAX),
        required=False,
        max_length=LIST_MAX,
        help_text="where it does not (anti-scope); without both the candidate is held",
    )


class CandidateIn(serializers.Serializer):
    """An `awtl.memory_candidate.v2` document plus where its fact would go (domain, repo, topic)."""

    domain = serializers.CharField(max_length=200, help_text="`architecture` or `repo:<slug>/architecture`")
    repo = serializers.SlugField(required=False, allow_null=True, max_length=100)
    topic = serializers.CharField(max_length=TOPIC_MAX)
    schema = serializers.CharField(
        required=False, max_length=100, help_text=f"`{CANDIDATE_SCHEMA}` (the default); any other version is refused"
    )
    schema_version = serializers.CharField(required=False, max_length=100, help_text="alias of `schema`")
    candidate_id = serializers.CharField(
        max_length=CANDIDATE_ID_MAX, help_text="resubmitting the same id is idempotent"
    )
    failure_class = serializers.ChoiceField(choices=FailureClass.values)
    failure_type = serializers.CharField(max_length=FAILURE_TYPE_MAX, required=False, allow_blank=True)
    source_action_ids = serializers.ListField(
        child=serializers.CharField(max_length=ITEM_MAX), required=False, max_length=LIST_MAX
    )
    root_cause_summary = serializers.CharField(max_length=SUMMARY_MAX, required=False, allow_blank=True)
    proposed_memory = FactText(help_text="the rule that would become a fact")
    scope = CandidateScopeIn(required=False)
    evidence_refs = serializers.ListField(
        child=serializers.CharField(max_length=ITEM_MAX), required=False, max_length=LIST_MAX
    )
    verification_probe_candidate = serializers.CharField(
        max_length=PROBE_MAX, required=False, allow_blank=True, allow_null=True
    )
    promotion_status = serializers.ChoiceField(
        choices=[PromotionStatus.CANDIDATE], required=False, help_text="always `candidate`; the gate decides the rest"
    )
    requires_human_review = serializers.BooleanField(required=False, default=False)
    origin = serializers.CharField(
        max_length=ORIGIN_MAX,
        required=False,
        help_text="agent (default), memory_agent, human, imported… imported is blocked",
    )
    memory_type = serializers.ChoiceField(choices=MemoryType.values, required=False, default=MemoryType.PROCEDURE)


def document_of(data: dict[str, Any]) -> dict[str, Any]:
    """The document part of validated CandidateIn data (without the domain/repo/topic envelope)."""
    return {key: data[key] for key in DOCUMENT_KEYS if key in data}


class CandidateListQuery(serializers.Serializer):
    promotion_status = serializers.ChoiceField(choices=PromotionStatus.values, required=False)
    failure_class = serializers.ChoiceField(choices=FailureClass.values, required=False)
    domain = serializers.CharField(required=False, max_length=200)
    repo = serializers.SlugField(required=False, max_length=100)


class ReplayIn(serializers.Serializer):
    probe = serializers.CharField(max_length=PROBE_MAX, help_text="the probe that was replayed")
    passed = serializers.BooleanField()
    details = serializers.CharField(max_length=DETAILS_MAX, required=False, allow_blank=True, default="")


class PromoteIn(serializers.Serializer):
    write = serializers.BooleanField(
        required=False, default=False, help_text="true to write; without it the call is a dry run that writes nothing"
    )
    auto = serializers.BooleanField(
        required=False,
        default=False,
        help_text="the automatic path: only when the latest replay by a person or a verifier agent (not the "
        "submitter) passed, and no human review is required",
    )


class DenyIn(serializers.Serializer):
    reason = serializers.CharField(max_length=REASON_MAX, required=False, allow_blank=True, default="")


# --- Output --------------------------------------------------------------------------------------
class GateOut(serializers.Serializer):
    status = serializers.ChoiceField(choices=[PASSED, FAILED, PENDING])
    reason = serializers.CharField()


class ScopeOut(serializers.Serializer):
    applies_to = serializers.ListField(child=serializers.CharField())
    does_not_apply_to = serializers.ListField(child=serializers.CharField())


class ReplayOut(serializers.Serializer):
    id = serializers.IntegerField()
    probe = serializers.CharField()
    passed = serializers.BooleanField()
    details = serializers.CharField()
    recorded_by = serializers.CharField(source="recorded_by_label")
    counts_as_evidence = serializers.SerializerMethodField(
        help_text="true only when a person, or a verifier agent other than the candidate's submitter, recorded it"
    )
    standing = serializers.SerializerMethodField(help_text="why it counts or does not count")
    created_at = serializers.DateTimeField()

    def get_counts_as_evidence(self, replay: Any) -> bool:
        return replay_standing(replay.candidate, replay).counts

    def get_standing(self, replay: Any) -> str:
        return replay_standing(replay.candidate, replay).reason


class DecisionOut(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="null for a dry run: nothing was stored")
    decision = serializers.ChoiceField(choices=PromotionDecision.Kind.values)
    dry_run = serializers.BooleanField(source="is_dry_run")
    recorded = serializers.SerializerMethodField(help_text="false for a dry run: nothing at all was written")
    write = serializers.BooleanField()
    auto = serializers.BooleanField()
    decided_by = serializers.CharField(source="decided_by_label")
    scorecard = serializers.DictField(child=GateOut(), help_text="the gates the decision was made on")
    fact_id = serializers.IntegerField(allow_null=True)
    outcome = serializers.CharField(help_text="propose_fact's outcome for a promotion")
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()

    def get_recorded(self, decision: PromotionDecision) -> bool:
        return decision.pk is not None


class CandidateOut(serializers.Serializer):
    id = serializers.IntegerField()
    candidate_id = serializers.CharField()
    schema = serializers.CharField(source="schema_version")
    domain = serializers.CharField(source="domain.label")
    repo = serializers.SerializerMethodField()
    topic = serializers.CharField()
    failure_class = serializers.CharField()
    failure_type = serializers.CharField()
    source_action_ids = serializers.ListField(child=serializers.CharField())
    root_cause_summary = serializers.CharField()
    proposed_memory = serializers.CharField()
    scope = serializers.SerializerMethodField()
    evidence_refs = serializers.ListField(child=serializers.CharField())
    verification_probe_candidate = serializers.CharField()
    promotion_status = serializers.CharField()
    requires_human_review = serializers.BooleanField()
    origin = serializers.CharField()
    memory_type = serializers.CharField()
    human_approved_by = serializers.SerializerMethodField()
    human_approved_at = serializers.DateTimeField(allow_null=True)
    fact_id = serializers.IntegerField(allow_null=True)
    submitted_by = serializers.CharField(source="submitted_by_label")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    gates = serializers.SerializerMethodField()
    replays = ReplayOut(many=True, help_text="oldest first")
    decisions = DecisionOut(many=True, help_text="oldest first, each with the scorecard it was made on")

    def get_repo(self, candidate: Any) -> str | None:
        return candidate.domain.repo.slug if candidate.domain.repo_id else None

    @extend_schema_field(ScopeOut)
    def get_scope(self, candidate: Any) -> dict[str, list[str]]:
        return {"applies_to": candidate.applies_to, "does_not_apply_to": candidate.does_not_apply_to}

    def get_human_approved_by(self, candidate: Any) -> str | None:
        user = candidate.human_approved_by
        return user.get_username() if user is not None else None

    @extend_schema_field(serializers.DictField(child=GateOut()))
    def get_gates(self, candidate: Any) -> dict[str, dict[str, str]]:
        return compute_gates(candidate)


class ReplayCreatedOut(ReplayOut):
    candidate = serializers.IntegerField(source="candidate_id")
    promotion_status = serializers.CharField(help_text="the candidate's, after this replay")
    gates = serializers.DictField(child=GateOut(), help_text="recomputed after this replay")
    fact_status = serializers.CharField(allow_null=True, help_text="the promoted fact's status, if any")


class PromoteOut(DecisionOut):
    candidate = serializers.IntegerField(source="candidate_id")
    promotion_status = serializers.CharField(help_text="the candidate's, after this call")
    gates = serializers.DictField(child=GateOut(), help_text="the candidate's gates after this call")
    fact = FactOut(
        allow_null=True, help_text="the fact written (or re-mentioned); only with write and every gate passed"
    )
