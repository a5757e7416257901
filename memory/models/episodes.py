"""Episodes, the knowledge graph's edges, and the exposure and mention trails (SPEC §4)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory.models.facts import Fact, Veracity
from memory.models.tenancy import Workspace


class Episode(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="episodes")
    agent = models.ForeignKey("memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="episodes")
    kind = models.CharField(max_length=30, help_text="dispatch, search, session, meeting, run, review, import…")
    title = models.CharField(max_length=300, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)
    facts = models.ManyToManyField(Fact, through="EpisodeFact", related_name="episodes")

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["workspace", "-started_at"], name="episode_recent")]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} {self.title[:60]}"


class EpisodeFact(models.Model):
    class Relation(models.TextChoices):
        WRITTEN = "written"
        RECALLED = "recalled"

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="links")
    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="episode_links")
    relation = models.CharField(max_length=10, choices=Relation.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "fact", "relation"], name="episode_fact_unique")]
        indexes = [models.Index(fields=["fact", "episode"], name="episode_fact_by_fact")]

    def __str__(self) -> str:
        return f"episode {self.episode_id} {self.relation} fact {self.fact_id}"


class Exposure(models.Model):
    """One fact or policy served to an agent (issue 21): the exposure trail.

    Ids only, never content: `fact_id`, `policy_id` and `run_id` are plain integers, not foreign
    keys, so the row outlives the fact's erasure and "who received it since" still answers from a
    bare id. Written by the recall buffer (memory.recalls) off the request path; pruned after
    ENGRAM_EXPOSURE_RETENTION_DAYS."""

    class Surface(models.TextChoices):
        PREAMBLE = "preamble"
        SEARCH = "search"
        MCP_PREAMBLE = "mcp_preamble"
        MCP_SEARCH = "mcp_search"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    episode = models.ForeignKey(Episode, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    surface = models.CharField(max_length=16, choices=Surface.choices)
    fact_id = models.BigIntegerField(null=True, blank=True)
    policy_id = models.BigIntegerField(null=True, blank=True)
    run_id = models.BigIntegerField(null=True, blank=True, help_text="The agent's memory run then running, if any.")
    served_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-served_at", "-id"]
        indexes = [
            models.Index(
                fields=["workspace", "fact_id", "served_at"],
                condition=Q(fact_id__isnull=False),
                name="exposure_by_fact",
            ),
            models.Index(
                fields=["workspace", "policy_id", "served_at"],
                condition=Q(policy_id__isnull=False),
                name="exposure_by_policy",
            ),
            models.Index(fields=["served_at"], name="exposure_served_at"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(fact_id__isnull=False, policy_id__isnull=True)
                | Q(fact_id__isnull=True, policy_id__isnull=False),
                name="exposure_fact_xor_policy",
            ),
        ]

    def __str__(self) -> str:
        what = f"fact {self.fact_id}" if self.fact_id is not None else f"policy {self.policy_id}"
        return f"{what} to agent {self.agent_id} via {self.surface}"


class FactMention(models.Model):
    """What was said when a fact was stated again: a re-mention, a near-duplicate merged into it,
    or a fact a person decided says the same. The fact is not duplicated; the words are kept."""

    class Via(models.TextChoices):
        PROPOSAL = "proposal", "stated again"
        MERGE = "merge", "near-duplicate merged"
        REVIEW = "review", "a person decided it is the same"

    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="mentions")
    text = models.TextField()
    veracity = models.CharField(max_length=20, choices=Veracity.choices)
    via = models.CharField(max_length=10, choices=Via.choices, default=Via.PROPOSAL)
    agent = models.ForeignKey("memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    episode = models.ForeignKey(Episode, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    merged_fact = models.ForeignKey(
        Fact,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The fact whose text this was, when a fact was merged into this one.",
    )
    observed_at = models.DateTimeField(default=timezone.now, help_text="When it was said to be true.")
    similarity = models.FloatField(null=True, blank=True, help_text="Cosine to the fact's text.")
    reason = models.CharField(max_length=500, blank=True, help_text="Why it counts as the same.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=~Q(text=""), name="fact_mention_text_not_empty"),
            models.CheckConstraint(condition=Q(via__in=["proposal", "merge", "review"]), name="fact_mention_via_valid"),
        ]
        indexes = [models.Index(fields=["fact", "-created_at", "-id"], name="fact_mention_recent")]

    def __str__(self) -> str:
        return f"mention of #{self.fact_id}: {self.text[:60]}"
