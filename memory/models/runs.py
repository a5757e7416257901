"""Background jobs and the proactive memory agent's runs (SPEC §4, §9)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory.models.episodes import Episode
from memory.models.promotion import Candidate
from memory.models.tenancy import Agent, Workspace


# --- Background jobs (SPEC §4: consolidate, harmonize) ----------------------------------------
class Job(models.Model):
    """One asked-for run of consolidate or harmonize. At most one job per (kind, scope) is
    unfinished at a time (a partial unique index): a second request while one is queued or
    running gets that job instead of queueing another. A job not finished by `expires_at` (a
    crashed worker or web process) is closed as expired by the next request for its scope."""

    class Kind(models.TextChoices):
        CONSOLIDATE = "consolidate"
        HARMONIZE = "harmonize"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        EXPIRED = "expired"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    scope = models.CharField(max_length=300, help_text="What runs one at a time: the workspace, or agent+session.")
    task_id = models.CharField(max_length=64, unique=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    arguments = models.JSONField(default=dict, blank=True)
    report = models.JSONField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    requested_by_agent = models.ForeignKey(
        "memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "-created_at"], name="job_by_workspace")]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "scope"], condition=Q(finished_at__isnull=True), name="job_one_unfinished_per_scope"
            ),
            models.CheckConstraint(
                condition=(Q(finished_at__isnull=True) & Q(state__in=["queued", "running"]))
                | (Q(finished_at__isnull=False) & Q(state__in=["done", "failed", "expired"])),
                name="job_finished_iff_final_state",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.scope} ({self.state})"

    @property
    def is_finished(self) -> bool:
        return self.finished_at is not None


# --- Proactive memory agent runs (SPEC §9) ------------------------------------------------------
class RunStatus(models.TextChoices):
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"


class BankKind(models.TextChoices):
    STATUS = "status", "status"
    KNOWLEDGE = "knowledge", "knowledge"
    PROCEDURAL = "procedural", "procedural"


STATUS_ITEM_ID = "status"
# Why a run ended (MemoryRun.end_reason): its agent finished it, or the daily job closed it after
# ENGRAM_RUN_ABANDON_HOURS without activity (memory.services.runs: "abandoned: no activity for N hours").
END_FINISHED = "finished"
END_ABANDONED = "abandoned"


class MemoryRunQuerySet(models.QuerySet):
    def of_agent(self, agent: Agent) -> MemoryRunQuerySet:
        """Runs of this agent only: a run is private to the agent that opened it, even inside its workspace."""
        return self.filter(agent_id=agent.pk)


class MemoryRun(models.Model):
    """One long task an action agent performs with a memory agent beside it; it owns a memory bank."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memory_runs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="memory_runs")
    task = models.TextField()
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.RUNNING)
    episode = models.ForeignKey(Episode, null=True, blank=True, on_delete=models.SET_NULL, related_name="memory_runs")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_activity_at = models.DateTimeField(
        default=timezone.now,
        help_text="The run's latest sign of life: its start, or a write of its agent (bank, decision).",
    )
    end_reason = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="Why the run ended: `finished` by its agent, or `abandoned: no activity for N hours`; "
        "blank while it runs.",
    )

    objects = MemoryRunQuerySet.as_manager()

    class Meta:
        db_table = "agents_memoryrun"  # created by the agents app; moved here state-only (issue 17)
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["agent", "-created_at"], name="memoryrun_agent_recent"),
            # The abandon sweep reads the running runs idle the longest, never a bank.
            models.Index(fields=["last_activity_at"], condition=Q(status="running"), name="memoryrun_running_idle"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=(Q(status="running") & Q(finished_at__isnull=True))
                | (Q(status="finished") & Q(finished_at__isnull=False)),
                name="memoryrun_finished_at_iff_finished",
            ),
            models.CheckConstraint(
                condition=(Q(status="running") & Q(end_reason="")) | (Q(status="finished") & ~Q(end_reason="")),
                name="memoryrun_end_reason_iff_finished",
            ),
        ]

    def __str__(self) -> str:
        return f"run #{self.pk} of {self.agent_id}: {self.task[:60]}"

    @property
    def is_running(self) -> bool:
        return self.status == RunStatus.RUNNING

    @property
    def was_abandoned(self) -> bool:
        """Closed by the daily job after too long without activity, not finished by its agent."""
        return self.end_reason.startswith(END_ABANDONED)


class BankItem(models.Model):
    """One entry of a run's memory bank: the status line, a knowledge item or a procedural item."""

    run = models.ForeignKey(MemoryRun, on_delete=models.CASCADE, related_name="bank_items")
    kind = models.CharField(max_length=10, choices=BankKind.choices)
    item_id = models.CharField(max_length=100, help_text="The memory agent's own id for the item.")
    content = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True, help_text="Knowledge items: labels.")
    outcome = models.CharField(max_length=200, blank=True, help_text="Procedural items: failed, worked, …")
    candidate = models.ForeignKey(
        Candidate,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="bank_items",
        help_text="The promotion candidate this item was offered as when the run finished.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "agents_bankitem"  # created by the agents app; moved here state-only (issue 17)
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
        db_table = "agents_intervention"  # created by the agents app; moved here state-only (issue 17)
        ordering = ["run", "step", "created_at", "id"]
        indexes = [models.Index(fields=["run", "step"], name="intervention_run_step")]

    def __str__(self) -> str:
        return f"step {self.step}: {'silent' if self.reminder is None else 'reminder'}"
