"""The audit trail and the webhooks that deliver it (issue 21)."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory.models.tenancy import MemoryDomain, Workspace


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
