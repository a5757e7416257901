"""Engram's data model (SPEC §1–§4, lifecycle fields of §7).

Writes go through memory.services; reads through memory.selectors and the querysets in
memory.querysets, whose `visible_to(agent)` is the one place grants and workspaces apply.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from memory.choices import FactStatus as FactStatus
from memory.choices import GrantLevel as GrantLevel
from memory.choices import PromotionStatus as PromotionStatus
from memory.querysets import (
    CandidateQuerySet,
    FactQuerySet,
    MemoryDomainQuerySet,
    PolicyQuerySet,
)

EMBEDDING_DIM = 384


# --- Tenancy ------------------------------------------------------------------------------
# The largest policy budget a workspace admin may set: about 5,000 tokens of rules before every task.
POLICY_BUDGET_MAX = 20_000


class Workspace(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    # 2,000 characters (about 500 tokens) is some twenty one-line rules, or four of the longest
    # (ENGRAM_POLICY_MAX_CHARS, 500): with the preamble's ~1,200 characters of facts, a dispatch
    # stays near 1,000 tokens before the task. A workspace admin can raise it.
    policy_budget_chars = models.PositiveIntegerField(
        default=2000,
        validators=[MaxValueValidator(POLICY_BUDGET_MAX)],
        help_text="Characters the active policies may add to every dispatch. A proposal, revision or "
        "activation that would go past it is refused (409 policy_budget_exceeded).",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class WorkspaceMembership(models.Model):
    """A person's access to a workspace's pages; admins manage grants and see every domain."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="engram_memberships")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    is_admin = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "workspace"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace}{' (admin)' if self.is_admin else ''}"


class Repo(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="repos")
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workspace", "slug"]
        constraints = [models.UniqueConstraint(fields=["workspace", "slug"], name="repo_unique_per_workspace")]

    def __str__(self) -> str:
        return f"{self.workspace.slug}/{self.slug}"


class Role(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="roles")
    name = models.SlugField(max_length=64)
    description = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["workspace", "name"]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="role_unique_per_workspace")]

    def __str__(self) -> str:
        return self.name


# --- Domains and grants (SPEC §2) ---------------------------------------------------------
class MemoryDomain(models.Model):
    """A store of facts and policies: workspace-wide (repo is null) or scoped to one repo."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="domains")
    repo = models.ForeignKey(Repo, null=True, blank=True, on_delete=models.CASCADE, related_name="domains")
    name = models.SlugField(max_length=64)
    description = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = MemoryDomainQuerySet.as_manager()

    class Meta:
        ordering = ["workspace", "repo__slug", "name"]
        permissions = [("review_domain", "Can review pending items in this domain")]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "name"], condition=Q(repo__isnull=True), name="domain_unique_workspace_wide"
            ),
            models.UniqueConstraint(
                fields=["workspace", "repo", "name"], condition=Q(repo__isnull=False), name="domain_unique_per_repo"
            ),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        """`architecture` or `repo:<slug>/architecture`, as the API shows domains."""
        return f"repo:{self.repo.slug}/{self.name}" if self.repo is not None else self.name


class AccessGrant(models.Model):
    """(role, domain) → level. No row means read (SPEC §2: reads fail open on purpose)."""

    role = models.ForeignKey(Role, on_delete=models.CASCADE, related_name="grants")
    domain = models.ForeignKey(MemoryDomain, on_delete=models.CASCADE, related_name="grants")
    level = models.CharField(max_length=5, choices=GrantLevel.choices)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["role", "domain"], name="grant_unique_role_domain"),
            models.CheckConstraint(condition=Q(level__in=GrantLevel.values), name="grant_level_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.role} on {self.domain}: {self.level}"


# --- Facts (SPEC §3, §7) ------------------------------------------------------------------
class MemoryType(models.TextChoices):
    COMMITMENT = "commitment"
    EVENT = "event"
    OBSERVATION = "observation"
    DECISION = "decision"
    CONVENTION = "convention"
    PROCEDURE = "procedure"
    PROFILE = "profile"


class Veracity(models.TextChoices):
    HUMAN_STATED = "human_stated"
    AGENT_INFERRED = "agent_inferred"
    IMPORTED = "imported"
    TOOL_GENERATED = "tool_generated"


VERACITY_WEIGHT: dict[str, float] = {
    Veracity.HUMAN_STATED: 1.0,
    Veracity.AGENT_INFERRED: 0.7,
    Veracity.IMPORTED: 0.6,
    Veracity.TOOL_GENERATED: 0.5,
}


class ValidatedBy(models.TextChoices):
    NONE = "", "not validated"
    REPLAY = "replay"
    HUMAN = "human"


class DecayProfile(models.Model):
    """Weibull parameters per memory type (SPEC §3): weight(t) = exp(-(t/λ)^k)."""

    memory_type = models.CharField(max_length=20, choices=MemoryType.choices, unique=True)
    scale_days = models.FloatField(help_text="λ, in days")
    shape = models.FloatField(help_text="k")
    stale_after_days = models.PositiveIntegerField(
        default=180, help_text="An active fact not validated for this long is challenged as stale (SPEC §7)."
    )

    class Meta:
        ordering = ["memory_type"]
        constraints = [
            models.CheckConstraint(condition=Q(scale_days__gt=0), name="decay_scale_positive"),
            models.CheckConstraint(condition=Q(shape__gt=0), name="decay_shape_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.memory_type}: λ={self.scale_days:g}d k={self.shape:g}"


class Fact(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="facts")
    domain = models.ForeignKey(MemoryDomain, on_delete=models.PROTECT, related_name="facts")
    topic = models.CharField(max_length=200)
    content = models.TextField()
    confidence = models.FloatField()
    memory_type = models.CharField(max_length=20, choices=MemoryType.choices)
    veracity = models.CharField(max_length=20, choices=Veracity.choices, default=Veracity.AGENT_INFERRED)
    source_observations = models.ManyToManyField("Observation", blank=True, related_name="facts")  # type: ignore[var-annotated]

    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="supersedes"
    )
    superseded_at = models.DateTimeField(null=True, blank=True)
    supersede_reason = models.CharField(max_length=500, blank=True)

    observed_at = models.DateTimeField(default=timezone.now, help_text="When it was true.")
    valid_until = models.DateTimeField(null=True, blank=True, help_text="Hard expiry: never recalled after.")
    created_at = models.DateTimeField(default=timezone.now)
    last_mentioned_at = models.DateTimeField(default=timezone.now, help_text="Decay age is measured from here.")
    recall_count = models.PositiveIntegerField(default=0)
    mention_count = models.PositiveIntegerField(default=1)
    last_recalled_at = models.DateTimeField(null=True, blank=True)

    # Lifecycle (SPEC §7)
    status = models.CharField(max_length=12, choices=FactStatus.choices, default=FactStatus.ACTIVE)
    status_changed_at = models.DateTimeField(default=timezone.now)
    origin = models.CharField(
        max_length=40, default="agent", help_text="agent, human, promotion, remember_review, memory_agent, import…"
    )
    origin_candidate = models.ForeignKey(
        "Candidate",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="promoted_facts",
        help_text="The promotion candidate it came from.",
    )
    validated_by = models.CharField(max_length=10, choices=ValidatedBy.choices, default=ValidatedBy.NONE, blank=True)
    valid_for = models.JSONField(default=list, blank=True, help_text="Where it applies (scope).")
    not_valid_for = models.JSONField(default=list, blank=True, help_text="Where it does not apply (anti-scope).")
    verification = models.TextField(blank=True, help_text="How it is verified (the probe).")
    last_validated_at = models.DateTimeField(null=True, blank=True)
    verification_contract_version = models.CharField(max_length=40, blank=True)

    # Provenance
    human_edited = models.BooleanField(default=False)
    source = models.CharField(max_length=60, default="agent_api")
    source_file = models.CharField(max_length=500, blank=True)
    source_layer = models.CharField(max_length=40, blank=True)
    rationale = models.TextField(blank=True)
    # The session key it was written under (a remember review's or hot-tier session id, or what
    # the proposing agent named), so one query's or one session's memories can be found again.
    session_key = models.CharField(max_length=200, blank=True, default="", help_text="Session key; blank when none.")
    created_by_agent = models.ForeignKey(
        "memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="facts"
    )
    created_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="engram_facts"
    )

    # Search
    search_vector = models.GeneratedField(
        expression=SearchVector("topic", weight="A", config="english")
        + SearchVector("content", weight="B", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(dimensions=EMBEDDING_DIM, null=True, blank=True)
    # What the content alone means (no topic prefix): the write path finds and reads the live facts
    # a proposal could restate or contradict by it, whatever their topic (issue 34). Written with
    # `embedding`; null for rows embedded before it existed (the write path then reads `embedding`).
    content_embedding = VectorField(dimensions=EMBEDDING_DIM, null=True, blank=True)
    embedded_at = models.DateTimeField(null=True, blank=True)

    objects = FactQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(confidence__gte=0) & Q(confidence__lte=1), name="fact_confidence_0_1"),
            models.CheckConstraint(condition=~Q(superseded_by=models.F("id")), name="fact_not_self_superseded"),
            models.CheckConstraint(
                condition=Q(superseded_by__isnull=True) | Q(superseded_at__isnull=False),
                name="fact_superseded_has_time",
            ),
            models.CheckConstraint(condition=Q(memory_type__in=MemoryType.values), name="fact_memory_type_valid"),
            models.CheckConstraint(condition=Q(veracity__in=Veracity.values), name="fact_veracity_valid"),
            models.CheckConstraint(condition=Q(status__in=FactStatus.values), name="fact_status_valid"),
            models.CheckConstraint(condition=~Q(content=""), name="fact_content_not_empty"),
            models.CheckConstraint(condition=Q(mention_count__gte=1), name="fact_mentioned_at_least_once"),
        ]
        indexes = [
            # An agent's or a person's list of facts, newest first: read in order, not sorted (at
            # 100k facts, a page of GET facts/ took ~210 ms sorting them all, 5 ms with it).
            models.Index(fields=["workspace", "-created_at", "-id"], name="fact_newest_first"),
            # The same order across workspaces: the admin's fact list for a superuser (at 100k
            # facts it sorted every fact, ~200 ms a page) and its date hierarchy's bounds.
            models.Index(fields=["-created_at", "-id"], name="fact_all_newest_first"),
            # Counting a workspace's live facts for a page (by domain, for the `none` grants):
            # from this index alone, 84 → 10 ms at 100k facts.
            models.Index(
                fields=["workspace", "domain"],
                condition=Q(superseded_by__isnull=True),
                name="fact_live_by_workspace_domain",
            ),
            GinIndex(fields=["search_vector"], name="fact_search_gin"),
            HnswIndex(
                name="fact_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
                # Only recallable rows: the post-filter then rarely discards HNSW candidates.
                condition=Q(superseded_by__isnull=True, status="active"),
            ),
            models.Index(
                fields=["domain", "topic"], name="fact_live_by_topic", condition=Q(superseded_by__isnull=True)
            ),
            models.Index(fields=["workspace", "status", "-last_mentioned_at"], name="fact_recent_activity"),
            models.Index(fields=["workspace", "session_key"], name="fact_by_session_key", condition=~Q(session_key="")),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} [{self.domain_id}/{self.topic}] {self.content[:60]}"

    @property
    def is_live(self) -> bool:
        """Not replaced and not retired: conflict detection compares against live facts."""
        return self.superseded_by_id is None and self.status in (FactStatus.ACTIVE, FactStatus.CHALLENGED)


# --- Policies, conflicts, agents' private memory (SPEC §4) ---------------------------------
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


# --- Episodes: the knowledge graph's edges (SPEC §4) -----------------------------------------
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


# --- Audit -------------------------------------------------------------------------------
class AuditEvent(models.Model):
    """Written by every service that changes state, in the same transaction."""

    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_events"
    )
    # The domain of what the event is about (memory.audit.record_event fills it from the target):
    # who may see the event is who may see that domain (memory.access). Empty: a workspace-level
    # event, seen by every member. RESTRICT: a domain with a trail is not deleted alone (its events
    # would otherwise vanish, or fall back to workspace-level and show to everyone); deleting its
    # workspace deletes both.
    domain = models.ForeignKey(
        MemoryDomain, null=True, blank=True, on_delete=models.RESTRICT, related_name="audit_events"
    )
    actor_agent = models.ForeignKey("memory.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=200)
    verb = models.CharField(max_length=60)
    target_type = models.CharField(max_length=60, blank=True)
    target_id = models.BigIntegerField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "-created_at"], name="audit_recent"),
            models.Index(fields=["target_type", "target_id"], name="audit_by_target"),
        ]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.verb} {self.target_type}#{self.target_id}"


# --- Promotion gate (SPEC §7) -----------------------------------------------------------------
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


# --- Agent identities (issue 17: identity lives with tenancy, below review and the agent surface) ---
# A key is shown once at creation; only its SHA-256 is stored. Keys carry 256 bits of randomness,
# so a fast hash is enough (no password stretching needed) and lets authentication be a single
# indexed lookup. The tables keep the names the agents app gave them.
KEY_PREFIX = "engram_"


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class AgentQuerySet(models.QuerySet):
    def active(self) -> AgentQuerySet:
        return self.filter(revoked_at__isnull=True)


class Agent(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="agents")
    role = models.ForeignKey(Role, on_delete=models.PROTECT, related_name="agents")
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
        db_table = "agents_agent"  # created by the agents app; moved here state-only (issue 17)
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


class MemoryRun(models.Model):
    """One long task an action agent performs with a memory agent beside it; it owns a memory bank."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memory_runs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="memory_runs")
    task = models.TextField()
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.RUNNING)
    episode = models.ForeignKey(Episode, null=True, blank=True, on_delete=models.SET_NULL, related_name="memory_runs")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = MemoryRunQuerySet.as_manager()

    class Meta:
        db_table = "agents_memoryrun"  # created by the agents app; moved here state-only (issue 17)
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


# --- Webhooks (issue 21) ----------------------------------------------------------------------
WEBHOOK_EVENTS: tuple[str, ...] = (
    "review.resolved",
    "candidate.decided",
    "conflict.opened",
    "fact.superseded",
    "fact.challenged",
    "fact.erased",
    "policy.changed",
)


def new_webhook_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


class WebhookSubscription(models.Model):
    """A workspace's HTTP endpoint for some events (memory.webhooks).

    The secret is stored as it is, not hashed: signing each delivery (HMAC-SHA256) needs it. It is
    shown once when the subscription is created and masked in the admin afterwards; rotating it
    issues a new one."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="webhook_subscriptions")
    url = models.URLField(max_length=2000, help_text="http(s) URL that receives a signed POST per event.")
    secret = models.CharField(max_length=100, default=new_webhook_secret, editable=False)
    events = models.JSONField(default=list, help_text="Event names this endpoint receives.")
    active = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workspace", "id"]
        indexes = [models.Index(fields=["workspace", "active"], name="webhook_sub_active")]

    def __str__(self) -> str:
        return f"{self.url} ({', '.join(self.events) or 'no events'})"

    @property
    def masked_secret(self) -> str:
        return f"{self.secret[:10]}…" if self.secret else ""


class WebhookDelivery(models.Model):
    """One event sent (or to be sent) to one subscription, with its attempts: the delivery log.

    `payload` holds ids, states and paths only, never fact or policy text, so erasing a subject
    never has to chase its content into this table. `uuid` is the X-Engram-Delivery header (the
    same on every retry; receivers dedupe by it); `event_id` is the event's own id, shared by the
    deliveries of one event to several subscriptions."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    uuid = models.UUIDField(unique=True, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="webhook_deliveries")
    subscription = models.ForeignKey(WebhookSubscription, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40)
    event_id = models.UUIDField(editable=False)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=["next_attempt_at"], name="webhook_due", condition=Q(status="pending")),
            models.Index(fields=["subscription", "-created_at"], name="webhook_sub_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "delivered", "failed"]), name="webhook_delivery_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} → #{self.subscription_id} ({self.status})"
