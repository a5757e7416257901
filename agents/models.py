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
