"""Tenancy, domains and grants, and agent identities (SPEC §1–§2; issue 17: an agent's identity
lives with tenancy, below review and the agent surface)."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory.choices import GrantLevel
from memory.querysets import MemoryDomainQuerySet

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
