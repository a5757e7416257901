"""The promotion gate: candidates, replays and decisions (SPEC §7)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory.choices import PromotionStatus
from memory.models.facts import Fact, MemoryType
from memory.models.tenancy import MemoryDomain, Workspace
from memory.querysets import CandidateQuerySet

CANDIDATE_SCHEMA = "awtl.memory_candidate.v2"


class FailureClass(models.TextChoices):
    AGENT_FAILURE = "agent_failure"
    VERIFICATION_FAILURE = "verification_failure"
    ENVIRONMENT_BLOCKER = "environment_blocker"
    FLAKY_BLOCKER = "flaky_blocker"
    HARNESS_BLOCKER = "harness_blocker"


class Candidate(models.Model):
    """A memory candidate (`awtl.memory_candidate.v2`): a rule proposed from a failure, waiting
    for replay evidence or a person's approval before a promotion decision may make it a fact."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="candidates")
    domain = models.ForeignKey(MemoryDomain, on_delete=models.PROTECT, related_name="candidates")
    topic = models.CharField(max_length=200)
    submitted_by_agent = models.ForeignKey(
        "memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="candidates"
    )
    submitted_by_label = models.CharField(max_length=200, blank=True)

    # The document, as submitted
    candidate_id = models.CharField(max_length=200, help_text="The submitter's id; resubmitting it is idempotent.")
    schema_version = models.CharField(max_length=40, default=CANDIDATE_SCHEMA)
    failure_class = models.CharField(max_length=24, choices=FailureClass.choices)
    failure_type = models.CharField(max_length=100, blank=True)
    source_action_ids = models.JSONField(default=list, blank=True)
    root_cause_summary = models.TextField(blank=True)
    proposed_memory = models.TextField()
    applies_to = models.JSONField(default=list, blank=True, help_text="Scope: where the rule applies.")
    does_not_apply_to = models.JSONField(default=list, blank=True, help_text="Anti-scope: where it does not.")
    evidence_refs = models.JSONField(default=list, blank=True)
    verification_probe_candidate = models.CharField(max_length=500, blank=True)
    requires_human_review = models.BooleanField(default=False)
    origin = models.CharField(max_length=40, default="agent", help_text="agent, memory_agent, human, imported…")
    memory_type = models.CharField(max_length=20, choices=MemoryType.choices, default=MemoryType.PROCEDURE)

    # The gate's state
    promotion_status = models.CharField(
        max_length=12, choices=PromotionStatus.choices, default=PromotionStatus.CANDIDATE
    )
    human_approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    human_approved_at = models.DateTimeField(null=True, blank=True)
    human_approval_note = models.CharField(max_length=500, blank=True)
    fact = models.ForeignKey(
        Fact, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="The promoted fact."
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = CandidateQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "candidate_id"], name="candidate_id_unique_per_workspace"),
            models.CheckConstraint(condition=~Q(candidate_id=""), name="candidate_id_not_empty"),
            models.CheckConstraint(condition=~Q(proposed_memory=""), name="candidate_memory_not_empty"),
            models.CheckConstraint(
                condition=Q(failure_class__in=FailureClass.values), name="candidate_failure_class_valid"
            ),
            models.CheckConstraint(
                condition=Q(promotion_status__in=PromotionStatus.values), name="candidate_status_valid"
            ),
            models.CheckConstraint(condition=Q(memory_type__in=MemoryType.values), name="candidate_memory_type_valid"),
            models.CheckConstraint(
                condition=Q(fact__isnull=True) | Q(promotion_status=PromotionStatus.ACTIVE),
                name="candidate_fact_only_when_promoted",
            ),
            models.CheckConstraint(
                condition=Q(human_approved_at__isnull=False) | Q(human_approved_by__isnull=True),
                name="candidate_approval_has_time",
            ),
            # The class routes a candidate: these never reach memory, whatever else happens.
            models.CheckConstraint(
                condition=~Q(promotion_status=PromotionStatus.ACTIVE)
                | Q(failure_class__in=[FailureClass.AGENT_FAILURE, FailureClass.VERIFICATION_FAILURE]),
                name="candidate_blockers_never_promoted",
            ),
        ]
        indexes = [models.Index(fields=["workspace", "promotion_status", "-created_at"], name="candidate_queue")]

    def __str__(self) -> str:
        return f"{self.candidate_id} ({self.promotion_status})"

    @property
    def is_decided(self) -> bool:
        """Promoted or denied: no further promotion decision can be made."""
        return self.promotion_status in (PromotionStatus.ACTIVE, PromotionStatus.DENIED)


class Replay(models.Model):
    """One run of a candidate's verification probe: did the failure reproduce the rule's way?"""

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="replays")
    probe = models.CharField(max_length=500)
    passed = models.BooleanField()
    details = models.TextField(blank=True)
    recorded_by_agent = models.ForeignKey(
        "memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    recorded_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    recorded_by_label = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.CheckConstraint(condition=~Q(probe=""), name="replay_probe_not_empty")]

    def __str__(self) -> str:
        return f"replay #{self.pk} of {self.candidate_id}: {'passed' if self.passed else 'failed'}"


class PromotionDecision(models.Model):
    """A promote/deny (or refused promotion) with the gate scorecard it was made on.

    Dry runs are never stored: they write nothing, not even their decision."""

    class Kind(models.TextChoices):
        PROMOTE = "promote"
        DENY = "deny"
        REFUSED = "refused", "refused (gates not passed; candidate stays open)"
        DRY_RUN = "dry_run", "dry run (never stored)"

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="decisions")
    decision = models.CharField(max_length=10, choices=Kind.choices)
    decided_by_agent = models.ForeignKey(
        "memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by_label = models.CharField(max_length=200)
    auto = models.BooleanField(default=False, help_text="Made by the automatic path.")
    write = models.BooleanField(default=False)
    scorecard = models.JSONField(default=dict, help_text="Every gate's status and reason at that moment.")
    fact = models.ForeignKey(Fact, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    outcome = models.CharField(max_length=20, blank=True, help_text="propose_fact's outcome for a promotion.")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(decision__in=["promote", "deny", "refused"]), name="decision_stored_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(fact__isnull=True) | Q(decision="promote"), name="decision_fact_only_on_promote"
            ),
            models.CheckConstraint(
                condition=~Q(decision="promote") | Q(write=True), name="decision_promote_needs_write"
            ),
            models.UniqueConstraint(
                fields=["candidate"],
                condition=Q(decision__in=["promote", "deny"]),
                name="decision_one_final_per_candidate",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.decision} {self.candidate_id} by {self.decided_by_label}"

    @property
    def is_dry_run(self) -> bool:
        return self.decision == self.Kind.DRY_RUN
