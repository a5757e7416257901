"""Remember reviews (SPEC §8): what an agent's remember sub-agent nominated, waiting for a person.

A review is the whole human-in-the-loop state: the sub-agent's raw output, one item per
nominated file (with the file's text, since Engram cannot see the agent's disk), the
reviewer's edits saved as they are made, and the resolution the runtime reads back. Writes go
through review.services; nothing here changes state by itself.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class RememberLayer(models.TextChoices):
    USER_PROFILE = "user/profile", "user/profile"
    PROJECT_CONTEXT = "project/context", "project/context"
    DOMAIN_KNOWLEDGE = "domain/knowledge", "domain/knowledge"


LAYER_GUIDE = {
    RememberLayer.USER_PROFILE: "How the people here work: preferences, style, conventions of a person or team.",
    RememberLayer.PROJECT_CONTEXT: "This project: structure, architecture decisions, module boundaries.",
    RememberLayer.DOMAIN_KNOWLEDGE: "Beyond one project: business rules, domain facts, API contracts, patterns.",
}


class ReviewStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    CONSUMED = "consumed"


class ItemSource(models.TextChoices):
    JSON = "json", "JSON block"
    FALLBACK = "fallback", "paths found in the text"


class RememberReviewQuerySet(models.QuerySet):
    def pending(self) -> RememberReviewQuerySet:
        return self.filter(status=ReviewStatus.PENDING)

    def live(self) -> RememberReviewQuerySet:
        """Not yet consumed (pending, approved or rejected): at most one per agent and session."""
        return self.exclude(status=ReviewStatus.CONSUMED)

    def for_agent(self, agent: Any) -> RememberReviewQuerySet:
        """The agent's own reviews: they carry its session's files, so another agent (of this
        workspace or another) is answered as if the review did not exist."""
        return self.filter(workspace_id=agent.workspace_id, agent_id=agent.pk)


class RememberReview(models.Model):
    workspace = models.ForeignKey("memory.Workspace", on_delete=models.CASCADE, related_name="remember_reviews")
    agent = models.ForeignKey(
        "memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="remember_reviews"
    )
    repo = models.ForeignKey(
        "memory.Repo", null=True, blank=True, on_delete=models.SET_NULL, related_name="remember_reviews"
    )
    session_id = models.CharField(max_length=200)
    raw_output = models.TextField(help_text="The remember sub-agent's output, verbatim.")
    status = models.CharField(max_length=10, choices=ReviewStatus.choices, default=ReviewStatus.PENDING)
    used_fallback = models.BooleanField(
        default=False, help_text="No JSON block parsed: items are paths found in the text."
    )
    created_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    consumed_at = models.DateTimeField(null=True, blank=True)
    resolution = models.JSONField(
        default=dict, blank=True, help_text="approved, selected_paths, edits, stored_ids, note (for the runtime)."
    )
    reviewer_note = models.TextField(blank=True, help_text="A note from the reviewer to the agent.")

    objects = RememberReviewQuerySet.as_manager()
    # Set by review.selectors.review_for_agent (not a column): the resolution as that agent may read it.
    resolution_for_agent: dict[str, Any] | None

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=ReviewStatus.values), name="remember_review_status_valid"),
            models.CheckConstraint(
                condition=Q(status=ReviewStatus.PENDING) | Q(resolved_at__isnull=False),
                name="remember_review_resolved_has_time",
            ),
            models.CheckConstraint(
                condition=~Q(status=ReviewStatus.CONSUMED) | Q(consumed_at__isnull=False),
                name="remember_review_consumed_has_time",
            ),
            # One live review per agent and session (issue 39): a second submission answers it.
            models.UniqueConstraint(
                fields=["agent", "session_id"],
                condition=~Q(status=ReviewStatus.CONSUMED),
                name="remember_review_one_live_per_session",
            ),
        ]
        indexes = [models.Index(fields=["workspace", "status", "-created_at"], name="remember_review_queue")]

    def __str__(self) -> str:
        return f"remember review #{self.pk} ({self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status == ReviewStatus.PENDING


class ReviewItem(models.Model):
    """One nominated file. `edited_*` hold the reviewer's overrides (null: not overridden)."""

    review = models.ForeignKey(RememberReview, on_delete=models.CASCADE, related_name="items")
    order = models.PositiveSmallIntegerField()
    path = models.CharField(max_length=500)
    bytes = models.PositiveIntegerField(default=0, help_text="Size of the uploaded file text (UTF-8).")
    recommended_layer = models.CharField(max_length=20, choices=RememberLayer.choices)
    rationale = models.TextField(blank=True)
    suggested_memory_content = models.TextField(blank=True)
    file_text = models.TextField(blank=True)
    source = models.CharField(max_length=10, choices=ItemSource.choices, default=ItemSource.JSON)

    selected = models.BooleanField(default=True)
    edited_layer = models.CharField(max_length=20, choices=RememberLayer.choices, blank=True)
    edited_rationale = models.TextField(null=True, blank=True)
    edited_content = models.TextField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    stored_fact = models.ForeignKey(
        "memory.Fact", null=True, blank=True, on_delete=models.SET_NULL, related_name="remember_review_items"
    )
    # Set by review.selectors.review_for_agent (not a column): None when that agent may not read the fact.
    stored_fact_id_for_agent: int | None

    class Meta:
        ordering = ["review", "order"]
        constraints = [
            models.UniqueConstraint(fields=["review", "path"], name="review_item_unique_path"),
            models.UniqueConstraint(fields=["review", "order"], name="review_item_unique_order"),
            models.CheckConstraint(
                condition=Q(recommended_layer__in=RememberLayer.values), name="review_item_layer_valid"
            ),
            models.CheckConstraint(
                condition=Q(edited_layer="") | Q(edited_layer__in=RememberLayer.values),
                name="review_item_edited_layer_valid",
            ),
            models.CheckConstraint(condition=Q(source__in=ItemSource.values), name="review_item_source_valid"),
        ]

    def __str__(self) -> str:
        return self.path

    @property
    def layer(self) -> str:
        """The layer it will be stored in: the reviewer's override, else the recommendation."""
        return self.edited_layer or self.recommended_layer

    @property
    def effective_rationale(self) -> str:
        return self.rationale if self.edited_rationale is None else self.edited_rationale

    @property
    def note(self) -> str:
        """The note that will be stored: the reviewer's text, else the suggestion."""
        return self.suggested_memory_content if self.edited_content is None else self.edited_content

    @property
    def note_edited(self) -> bool:
        """The reviewer changed the note (→ `human_edited`, veracity human_stated)."""
        return self.edited_content is not None and self.edited_content.strip() != self.suggested_memory_content.strip()

    @property
    def layer_edited(self) -> bool:
        return bool(self.edited_layer) and self.edited_layer != self.recommended_layer

    @property
    def rationale_edited(self) -> bool:
        return self.edited_rationale is not None and self.edited_rationale.strip() != self.rationale.strip()

    @property
    def edits(self) -> dict[str, str]:
        """Only what the reviewer overrode, as the resolution reports it."""
        changed: dict[str, str] = {}
        if self.layer_edited:
            changed["layer"] = self.layer
        if self.rationale_edited:
            changed["rationale"] = self.effective_rationale
        if self.note_edited:
            changed["content"] = self.note
        return changed


class LayerMapping(models.Model):
    """Where a layer's approved items go in one workspace (SPEC §8; admins remap in the admin).

    Without a row the defaults of DEFAULT_LAYER_MAPPING apply. `per_repo`: the domain is the
    review's repo's domain of that name (`repo:<slug>/context`)."""

    workspace = models.ForeignKey("memory.Workspace", on_delete=models.CASCADE, related_name="layer_mappings")
    layer = models.CharField(max_length=20, choices=RememberLayer.choices)
    domain_name = models.SlugField(max_length=64)
    per_repo = models.BooleanField(
        default=False, help_text="Use the review's repo's domain of this name (a workspace domain when no repo)."
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workspace", "layer"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "layer"], name="layer_mapping_unique"),
            models.CheckConstraint(condition=Q(layer__in=RememberLayer.values), name="layer_mapping_layer_valid"),
        ]

    def __str__(self) -> str:
        target = f"repo:<repo>/{self.domain_name}" if self.per_repo else self.domain_name
        return f"{self.layer} → {target}"


# layer → (domain name, per repo): SPEC §8 defaults.
DEFAULT_LAYER_MAPPING: dict[str, tuple[str, bool]] = {
    RememberLayer.USER_PROFILE: ("profile", False),
    RememberLayer.PROJECT_CONTEXT: ("context", True),
    RememberLayer.DOMAIN_KNOWLEDGE: ("knowledge", False),
}
