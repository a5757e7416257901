"""Agent identities. A key is shown once at creation; only its SHA-256 is stored.

Keys carry 256 bits of randomness, so a fast hash is enough (no password stretching needed)
and lets authentication be a single indexed lookup.
"""

from __future__ import annotations

import hashlib
import secrets

from django.db import models
from django.db.models import Q
from django.utils import timezone

KEY_PREFIX = "engram_"


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class AgentQuerySet(models.QuerySet):
    def active(self) -> AgentQuerySet:
        return self.filter(revoked_at__isnull=True)


class Agent(models.Model):
    workspace = models.ForeignKey("memory.Workspace", on_delete=models.CASCADE, related_name="agents")
    role = models.ForeignKey("memory.Role", on_delete=models.PROTECT, related_name="agents")
    name = models.SlugField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    key_hint = models.CharField(
        max_length=16, editable=False, help_text="First characters of the key, to tell keys apart."
    )
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    relays_human_words = models.BooleanField(
        default=False,
        help_text="Relays people's own words (e.g. a chat front end): may propose human_stated facts. "
        "Only a workspace admin sets it; every change is audited.",
    )
    is_verifier = models.BooleanField(
        default=False,
        help_text="Independent verifier: its replays count for the evidence gate of candidates it did not "
        "submit. Only a workspace admin sets it; every change is audited.",
    )

    objects = AgentQuerySet.as_manager()

    class Meta:
        ordering = ["workspace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="agent_unique_per_workspace"),
            models.CheckConstraint(condition=Q(key_hash__regex=r"^[0-9a-f]{64}$"), name="agent_key_is_sha256"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.role.name})"

    # DRF treats request.user as a principal; an agent is always an authenticated one.
    is_authenticated = True
    is_anonymous = False

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


# --- Proactive memory agent runs (SPEC §9) ------------------------------------------------------
class RunStatus(models.TextChoices):
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"


class BankKind(models.TextChoices):
    STATUS = "status", "status"
    KNOWLEDGE = "knowledge", "knowledge"
    PROCEDURAL = "procedural", "procedural"


STATUS_ITEM_ID = "status"


class MemoryRunQuerySet(models.QuerySet):
    def of_agent(self, agent: Agent) -> MemoryRunQuerySet:
        """Runs of this agent only: a run is private to the agent that opened it, even inside its workspace."""
        return self.filter(agent_id=agent.pk)

    def for_user(self, user: object) -> MemoryRunQuerySet:
        """Runs of the workspaces a person may see (all for superusers, none for anonymous)."""
        from memory.models import Workspace

        return self.filter(workspace__in=Workspace.objects.for_user(user))  # type: ignore[arg-type]


class MemoryRun(models.Model):
    """One long task an action agent performs with a memory agent beside it; it owns a memory bank."""

    workspace = models.ForeignKey("memory.Workspace", on_delete=models.CASCADE, related_name="memory_runs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="memory_runs")
    task = models.TextField()
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.RUNNING)
    episode = models.ForeignKey(
        "memory.Episode", null=True, blank=True, on_delete=models.SET_NULL, related_name="memory_runs"
    )
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = MemoryRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["agent", "-created_at"], name="memoryrun_agent_recent")]
        constraints = [
            models.CheckConstraint(
                condition=(Q(status="running") & Q(finished_at__isnull=True))
                | (Q(status="finished") & Q(finished_at__isnull=False)),
                name="memoryrun_finished_at_iff_finished",
            ),
        ]

    def __str__(self) -> str:
        return f"run #{self.pk} of {self.agent_id}: {self.task[:60]}"

    @property
    def is_running(self) -> bool:
        return self.status == RunStatus.RUNNING


class BankItem(models.Model):
    """One entry of a run's memory bank: the status line, a knowledge item or a procedural item."""

    run = models.ForeignKey(MemoryRun, on_delete=models.CASCADE, related_name="bank_items")
    kind = models.CharField(max_length=10, choices=BankKind.choices)
    item_id = models.CharField(max_length=100, help_text="The memory agent's own id for the item.")
    content = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True, help_text="Knowledge items: labels.")
    outcome = models.CharField(max_length=200, blank=True, help_text="Procedural items: failed, worked, …")
    candidate = models.ForeignKey(
        "memory.Candidate",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="bank_items",
        help_text="The promotion candidate this item was offered as when the run finished.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "kind", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "kind", "item_id"], name="bankitem_unique_id_per_run_and_kind"),
            models.UniqueConstraint(
                fields=["run"], condition=Q(kind="status"), name="bankitem_one_status_item_per_run"
            ),
            models.CheckConstraint(
                condition=~Q(kind="status") | Q(item_id=STATUS_ITEM_ID), name="bankitem_status_item_id_is_status"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.item_id}"


class Intervention(models.Model):
    """One decision of the memory agent: a reminder for the next step, or selective silence (null)."""

    run = models.ForeignKey(MemoryRun, on_delete=models.CASCADE, related_name="interventions")
    step = models.PositiveIntegerField()
    reminder = models.TextField(null=True, blank=True, help_text="Null: the memory agent stayed silent.")
    rationale = models.TextField(blank=True, help_text="Why it spoke or stayed silent (optional).")
    window = models.JSONField(default=list, blank=True, help_text="The steps it reviewed (at most the last 8).")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "step", "created_at", "id"]
        indexes = [models.Index(fields=["run", "step"], name="intervention_run_step")]

    def __str__(self) -> str:
        return f"step {self.step}: {'silent' if self.reminder is None else 'reminder'}"

    @property
    def is_silent(self) -> bool:
        return self.reminder is None
