"""Choices the querysets filter on as well as the models: here, so memory.querysets need not
import memory.models (which imports it for its managers). memory.models re-exports them."""

from __future__ import annotations

from django.db import models


class GrantLevel(models.TextChoices):
    NONE = "none", "none"
    READ = "read", "read"
    WRITE = "write", "write"


class FactStatus(models.TextChoices):
    ACTIVE = "active"
    CHALLENGED = "challenged"
    DEPRECATED = "deprecated"
    ARCHIVED = "archived"


class PromotionStatus(models.TextChoices):
    CANDIDATE = "candidate", "candidate (open)"
    HELD = "held", "held (scope or anti-scope missing)"
    BLOCKED = "blocked", "blocked"
    HARNESS_FIX = "harness_fix", "routed to harness fixes"
    ACTIVE = "active", "promoted"
    DENIED = "denied", "denied"
