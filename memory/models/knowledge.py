"""Policies, conflicts and agents' private memory: observations, working and hot memory (SPEC §4)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory.models.facts import Fact
from memory.models.tenancy import MemoryDomain, Role, Workspace
from memory.querysets import PolicyQuerySet


class Policy(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="policies")
    domain = models.ForeignKey(MemoryDomain, on_delete=models.PROTECT, related_name="policies")
    rule = models.TextField()
    required_role = models.ForeignKey(Role, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    active = models.BooleanField(default=True)
    derived_from = models.ManyToManyField(Fact, blank=True, related_name="policies")
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="supersedes"
    )
    superseded_at = models.DateTimeField(null=True, blank=True)
    supersede_reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by_agent = models.ForeignKey(
        "memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = PolicyQuerySet.as_manager()

    class Meta:
        ordering = ["domain__name", "created_at"]
        verbose_name_plural = "policies"
        constraints = [
            models.CheckConstraint(condition=~Q(rule=""), name="policy_rule_not_empty"),
            models.CheckConstraint(
                condition=Q(superseded_by__isnull=True) | Q(active=False), name="policy_superseded_is_inactive"
            ),
            models.UniqueConstraint(fields=["superseded_by"], name="policy_one_predecessor_per_successor"),
        ]

    def __str__(self) -> str:
        return f"[{self.domain}] {self.rule[:80]}"


class Conflict(models.Model):
    """Two live facts of one domain that disagree — or may — and how that was decided (`topic` is
    the existing fact's).

    `existing` is the live fact a write (or harmonize) compared against, `proposed` the newcomer.
    A conflict the machine decided (status `decided`, resolution `machine`) names its winner, loser
    and rule (veracity, update, confidence, recency) at detection. A *possible* conflict — the classifier
    could not tell a contradiction from two true statements — opens with status `open`: both facts
    stay live and winner, loser and rule stay empty until a person decides (rule `human`):
    `contradicts` (a winner, the loser superseded), `same` (the newer became a re-mention of the
    older; no winner) or `both_true` (status `dismissed`: both stay, the pair is not asked again)."""

    class Rule(models.TextChoices):
        VERACITY = "veracity", "higher veracity"
        CONFIDENCE = "confidence", "higher confidence"
        RECENCY = "recency", "newer"
        # The later statement of the same thing replaces the earlier (issue 34): "now 25 minutes".
        UPDATE = "update", "the later statement (an update)"
        HUMAN = "human", "a person decided"

    class Status(models.TextChoices):
        OPEN = "open", "waiting for a person"
        DECIDED = "decided"
        DISMISSED = "dismissed", "both true"

    class Resolution(models.TextChoices):
        MACHINE = "machine", "decided by the rule"
        SAME = "same", "the same fact (merged)"
        CONTRADICTS = "contradicts", "contradicts (a person chose the winner)"
        BOTH_TRUE = "both_true", "both true"

    MACHINE_RULES = ("veracity", "confidence", "recency", "update")
    WITH_WINNER = ("machine", "contradicts")

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="conflicts")
    domain = models.ForeignKey(MemoryDomain, on_delete=models.CASCADE, related_name="conflicts")
    topic = models.CharField(max_length=200)
    existing = models.ForeignKey(Fact, on_delete=models.PROTECT, related_name="conflicts_as_existing")
    proposed = models.ForeignKey(Fact, on_delete=models.PROTECT, related_name="conflicts_as_proposed")
    winner = models.ForeignKey(Fact, null=True, blank=True, on_delete=models.PROTECT, related_name="conflicts_won")
    loser = models.ForeignKey(Fact, null=True, blank=True, on_delete=models.PROTECT, related_name="conflicts_lost")
    # One question per disagreement (issue 34): an open possible conflict asked together with an
    # earlier one — the same proposal unsure against several facts, or several proposals against
    # one fact. Only the first (`question` null) waits in the queue; deciding it settles the pairs
    # joined to it that its decision covers (memory.services.conflicts.decide_conflict).
    question = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="joined")
    rule = models.CharField(max_length=12, choices=Rule.choices, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DECIDED)
    resolution = models.CharField(max_length=12, choices=Resolution.choices, default=Resolution.MACHINE, blank=True)
    reason = models.CharField(max_length=500, blank=True, help_text="The classifier's reason, in a reviewer's words.")
    similarity = models.FloatField()
    detected_by = models.CharField(max_length=20, default="write", help_text="write, harmonize")
    detected_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decision_note = models.CharField(max_length=500, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-detected_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=~Q(winner=models.F("loser")), name="conflict_two_facts"),
            models.CheckConstraint(condition=~Q(existing=models.F("proposed")), name="conflict_pair_two_facts"),
            models.CheckConstraint(
                condition=Q(rule__in=["veracity", "confidence", "recency", "update", "human", ""]),
                name="conflict_rule_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["open", "decided", "dismissed"]), name="conflict_status_valid"
            ),
            # Open: nothing decided yet. Decided: a machine rule or a person's. Dismissed: both true.
            models.CheckConstraint(
                condition=Q(status="open", resolution="", rule="")
                | Q(status="decided", resolution="machine", rule__in=["veracity", "confidence", "recency", "update"])
                | Q(status="decided", resolution__in=["same", "contradicts"], rule="human")
                | Q(status="dismissed", resolution="both_true", rule="human"),
                name="conflict_status_resolution_rule",
            ),
            # A winner and a loser exactly when it was decided as a contradiction, and they are the pair.
            models.CheckConstraint(
                condition=Q(
                    resolution__in=["machine", "contradicts"], winner=models.F("existing"), loser=models.F("proposed")
                )
                | Q(resolution__in=["machine", "contradicts"], winner=models.F("proposed"), loser=models.F("existing"))
                | (~Q(resolution__in=["machine", "contradicts"]) & Q(winner__isnull=True, loser__isnull=True)),
                name="conflict_winner_is_of_the_pair",
            ),
            models.UniqueConstraint(
                fields=["existing", "proposed"], condition=Q(status="open"), name="conflict_one_open_per_pair"
            ),
        ]
        indexes = [
            models.Index(fields=["workspace", "domain"], name="conflict_open", condition=Q(status="open")),
            # GET conflicts/ pages newest first: read in order, not every conflict joined to its
            # four facts and sorted (586 conflicts: 15 ms before the first row).
            models.Index(fields=["workspace", "-detected_at", "-id"], name="conflict_newest_first"),
        ]

    def __str__(self) -> str:
        if self.status == self.Status.OPEN:
            return f"#{self.proposed_id} may contradict #{self.existing_id}"
        if self.winner_id is None:
            return f"#{self.proposed_id} and #{self.existing_id}: {self.get_resolution_display()}"
        return f"#{self.winner_id} beat #{self.loser_id} by {self.rule}"

    @property
    def is_open(self) -> bool:
        return self.status == self.Status.OPEN


class Observation(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="observations")
    agent = models.ForeignKey("memory.Agent", on_delete=models.CASCADE, related_name="observations")
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=~Q(text=""), name="observation_text_not_empty")]

    def __str__(self) -> str:
        return self.text[:80]


class WorkingMemory(models.Model):
    """One private scratchpad per agent, injected verbatim into its dispatches."""

    agent = models.OneToOneField("memory.Agent", on_delete=models.CASCADE, related_name="working_memory")
    notes = models.TextField(blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "working memories"

    def __str__(self) -> str:
        return f"notes of {self.agent_id}"


class HotMemory(models.Model):
    """Session-scoped entries (`remember`) waiting for consolidation."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="hot_memories")
    agent = models.ForeignKey("memory.Agent", on_delete=models.CASCADE, related_name="hot_memories")
    session_id = models.CharField(max_length=200)
    content = models.TextField()
    domain = models.ForeignKey(MemoryDomain, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    topic = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    consolidated_at = models.DateTimeField(null=True, blank=True)
    consolidated_fact = models.ForeignKey(Fact, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "hot memories"
        indexes = [models.Index(fields=["agent", "session_id"], name="hot_by_session")]
        constraints = [models.CheckConstraint(condition=~Q(content=""), name="hot_content_not_empty")]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.content[:60]}"
