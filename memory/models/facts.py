"""Facts and their decay profiles (SPEC §3, §7)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from memory.choices import FactStatus
from memory.models.tenancy import MemoryDomain, Workspace
from memory.querysets import FactQuerySet

EMBEDDING_DIM = 384


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
    floor = models.FloatField(
        default=0.0,
        help_text="Search scales a fact's score by floor + (1 − floor) × weight: 0 (the default) applies decay "
        "fully; a floor keeps old facts of this type from fading below it — write down why you set one.",
    )

    class Meta:
        ordering = ["memory_type"]
        constraints = [
            models.CheckConstraint(condition=Q(scale_days__gt=0), name="decay_scale_positive"),
            models.CheckConstraint(condition=Q(shape__gt=0), name="decay_shape_positive"),
            models.CheckConstraint(
                condition=Q(floor__gte=0) & Q(floor__lt=1),
                name="decay_floor_in_range",
                violation_error_message="The floor is at least 0 and below 1 (1 would switch decay off).",
            ),
        ]

    def __str__(self) -> str:
        floor = f" floor={self.floor:g}" if self.floor else ""
        return f"{self.memory_type}: λ={self.scale_days:g}d k={self.shape:g}{floor}"


# The facts recall reads now; the two HNSW graphs of Fact split the embedded facts by it.
RECALLABLE = Q(superseded_by__isnull=True, status="active")


def _cosine_graph(name: str, condition: Q) -> HnswIndex:
    """A partial HNSW index over the embeddings by cosine distance (m 16, ef_construction 64)."""
    return HnswIndex(
        name=name, fields=["embedding"], m=16, ef_construction=64, opclasses=["vector_cosine_ops"], condition=condition
    )


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
            # Only recallable rows: the post-filter then rarely discards HNSW candidates.
            _cosine_graph("fact_embedding_hnsw", RECALLABLE),
            # Every other embedded fact (superseded, challenged, retired): with the index above,
            # each fact sits in exactly one graph, so as-of recall reaches the past from an index
            # (voices.semantic_then) while writing a new fact still costs one graph insert (and
            # leaving the recallable set, one more).
            _cosine_graph("fact_embedding_hnsw_past", ~RECALLABLE),
            models.Index(
                fields=["domain", "topic"], name="fact_live_by_topic", condition=Q(superseded_by__isnull=True)
            ),
            models.Index(fields=["workspace", "status", "-last_mentioned_at"], name="fact_recent_activity"),
            # The knowledge graph draws a workspace's most recently mentioned facts, any status.
            models.Index(fields=["workspace", "-last_mentioned_at"], name="fact_recently_mentioned"),
            models.Index(fields=["workspace", "session_key"], name="fact_by_session_key", condition=~Q(session_key="")),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} [{self.domain_id}/{self.topic}] {self.content[:60]}"

    @property
    def is_live(self) -> bool:
        """Not replaced and not retired: conflict detection compares against live facts."""
        return self.superseded_by_id is None and self.status in (FactStatus.ACTIVE, FactStatus.CHALLENGED)
