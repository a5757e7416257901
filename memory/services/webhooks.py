"""Webhook subscriptions and deliveries (issue 21): who may manage them, and each attempt.

Subscriptions are managed by people administering the workspace (never by agents). A delivery is
attempted in three steps so no network call happens inside a transaction: claim the row (lock,
re-check, count the attempt and hold it for a lease), POST, then record the answer — delivered,
due again after a backoff, or failed once ENGRAM_WEBHOOK_MAX_ATTEMPTS are spent. With a broker
the retry is queued with a countdown; in the inline (eager) mode it is only recorded as
`next_attempt_at` and the sweep (`deliver_due`, run by beat, the embedded scheduler or
`manage.py deliver_webhooks`) sends it, so a request never sleeps on a failing receiver.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory import access, webhooks
from memory.actors import Actor
from memory.audit import record_event
from memory.errors import InsufficientPermission, InvalidInput
from memory.models import WEBHOOK_EVENTS, WebhookDelivery, WebhookSubscription, Workspace, new_webhook_secret

# Seconds before attempt 2, 3, …: exponential-ish, each stretched by up to 20% of jitter.
BACKOFF_SECONDS: tuple[int, ...] = (10, 60, 300, 1800, 7200)
JITTER = 0.2
# A claimed attempt is not taken again by the sweep for this long past the POST's timeout.
LEASE_MARGIN_SECONDS = 30


def backoff(attempts: int, *, rng: random.Random | None = None) -> float:
    """Seconds to wait after the `attempts`-th failed attempt (1-based)."""
    base = BACKOFF_SECONDS[min(max(attempts, 1), len(BACKOFF_SECONDS)) - 1]
    return base * (1 + (rng or random).random() * JITTER)


# --- Subscriptions ---------------------------------------------------------------------------
def _require_admin(by: Actor, workspace: Workspace | int) -> None:
    if by.agent is not None or (by.user is not None and not access.is_workspace_admin(by.user, workspace)):
        raise InsufficientPermission(
            "Only the workspace's admins manage its webhooks.", code="webhook_permission_denied"
        )


def _clean(url: str, events: Iterable[str], *, check_url: bool = True) -> tuple[str, list[str]]:
    errors: dict[str, list[str]] = {}
    url = (url or "").strip()
    if len(url) > 2000:
        errors["url"] = ["At most 2000 characters."]
    elif check_url:
        try:
            webhooks.validate_url(url)
        except webhooks.UnsafeURL as exc:
            errors["url"] = [str(exc)]
    chosen = list(dict.fromkeys(events))
    unknown = [e for e in chosen if e not in WEBHOOK_EVENTS]
    if unknown or not chosen:
        errors["events"] = [f"One or more of {', '.join(WEBHOOK_EVENTS)}."]
    if errors:
        raise InvalidInput("The webhook has invalid fields; see `fields`.", code="invalid_webhook", fields=errors)
    return url, [e for e in WEBHOOK_EVENTS if e in chosen]


def _host(url: str) -> str:
    # The audit trail names the host only: a URL's path or query may carry a receiver's token.
    return urlsplit(url).hostname or ""


def create_subscription(
    *, workspace: Workspace, url: str, events: Iterable[str], by: Actor, description: str = "", active: bool = True
) -> WebhookSubscription:
    """A new subscription with a fresh secret (shown to its creator once). Raises InvalidInput
    (`invalid_webhook`: unsafe URL, unknown events) or InsufficientPermission (not an admin)."""
    _require_admin(by, workspace)
    url, chosen = _clean(url, events)  # resolves the host: before the transaction, not inside
    with transaction.atomic():
        return _create(workspace, url, chosen, by, description, active)


def _create(
    workspace: Workspace, url: str, chosen: list[str], by: Actor, description: str, active: bool
) -> WebhookSubscription:
    subscription = WebhookSubscription.objects.create(
        workspace=workspace,
        url=url,
        events=chosen,
        active=active,
        description=description.strip()[:200],
        created_by=by.user,
    )
    record_event(
        actor=by,
        verb="webhook.created",
        workspace_id=workspace.pk,
        target=subscription,
        detail={"host": _host(url), "events": chosen, "active": active},
    )
    return subscription


def update_subscription(
    *,
    subscription: WebhookSubscription,
    by: Actor,
    url: str | None = None,
    events: Iterable[str] | None = None,
    active: bool | None = None,
    description: str | None = None,
) -> WebhookSubscription:
    """Change what is given; a new URL is checked as on creation (deactivating a subscription
    whose host stopped resolving still works). Raises as create_subscription."""
    _require_admin(by, subscription.workspace_id)
    new_url, chosen = _clean(
        subscription.url if url is None else url,
        subscription.events if events is None else events,
        check_url=url is not None and url.strip() != subscription.url,
    )
    with transaction.atomic():
        subscription = WebhookSubscription.objects.select_for_update().get(pk=subscription.pk)
        return _update(subscription, by, new_url, chosen, active, description)


def _update(
    subscription: WebhookSubscription,
    by: Actor,
    new_url: str,
    chosen: list[str],
    active: bool | None,
    description: str | None,
) -> WebhookSubscription:
    changed = []
    for name, value in (
        ("url", new_url),
        ("events", chosen),
        ("active", subscription.active if active is None else active),
        ("description", subscription.description if description is None else description.strip()[:200]),
    ):
        if getattr(subscription, name) != value:
            setattr(subscription, name, value)
            changed.append(name)
    if changed:
        subscription.save(update_fields=changed)
        record_event(
            actor=by,
            verb="webhook.changed",
            workspace_id=subscription.workspace_id,
            target=subscription,
            detail={"changed": changed, "host": _host(subscription.url), "active": subscription.active},
        )
    return subscription


@transaction.atomic
def rotate_secret(*, subscription: WebhookSubscription, by: Actor) -> str:
    """A new signing secret, returned once; the old one stops signing at once."""
    _require_admin(by, subscription.workspace_id)
    subscription = WebhookSubscription.objects.select_for_update().get(pk=subscription.pk)
    subscription.secret = new_webhook_secret()
    subscription.save(update_fields=["secret"])
    record_event(actor=by, verb="webhook.secret_rotated", workspace_id=subscription.workspace_id, target=subscription)
    return subscription.secret


@transaction.atomic
def delete_subscription(*, subscription: WebhookSubscription, by: Actor) -> None:
    """Delete the subscription and its delivery log."""
    _require_admin(by, subscription.workspace_id)
    record_event(
        actor=by,
        verb="webhook.deleted",
        workspace_id=subscription.workspace_id,
        target=subscription,
        detail={"host": _host(subscription.url)},
    )
    subscription.delete()


@transaction.atomic
def redeliver(*, delivery: WebhookDelivery, by: Actor) -> WebhookDelivery:
    """Send a logged event again as a new delivery (new X-Engram-Delivery id, same event id),
    queued on commit. Raises InsufficientPermission unless `by` administers the workspace."""
    _require_admin(by, delivery.workspace_id)
    again = WebhookDelivery.objects.create(
        uuid=uuid.uuid4(),
        workspace_id=delivery.workspace_id,
        subscription_id=delivery.subscription_id,
        event=delivery.event,
        event_id=delivery.event_id,
        payload=delivery.payload,
        next_attempt_at=timezone.now(),
    )
    record_event(
        actor=by,
        verb="webhook.redelivered",
        workspace_id=delivery.workspace_id,
        target=again,
        detail={"of": delivery.pk, "event": delivery.event},
    )
    webhooks.enqueue_on_commit([again.pk])
    return again


# --- Attempts --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Attempt:
    """What one call to attempt_delivery did: `state` is delivered, retry (due again in
    `retry_in` seconds), failed, or skipped (not due, already final, or claimed elsewhere)."""

    state: str
    retry_in: float | None = None


@dataclass(frozen=True)
class _Claim:
    url: str
    secret: str
    event: str
    uuid: str
    payload: dict[str, Any]


def _claim(delivery_id: int, now: datetime) -> _Claim | Attempt:
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("subscription")
            .filter(pk=delivery_id)
            .first()
        )
        if delivery is None or delivery.status != WebhookDelivery.Status.PENDING:
            return Attempt("skipped")
        if delivery.next_attempt_at is not None and delivery.next_attempt_at > now:
            return Attempt("skipped")
        if not delivery.subscription.active:
            delivery.status, delivery.last_error, delivery.next_attempt_at = (
                WebhookDelivery.Status.FAILED,
                "The subscription was deactivated.",
                None,
            )
            delivery.save(update_fields=["status", "last_error", "next_attempt_at"])
            return Attempt("failed")
        delivery.attempts += 1
        delivery.last_attempt_at = now
        lease = settings.ENGRAM_WEBHOOK_TIMEOUT_SECONDS + LEASE_MARGIN_SECONDS
        delivery.next_attempt_at = now + timedelta(seconds=lease)
        delivery.save(update_fields=["attempts", "last_attempt_at", "next_attempt_at"])
        return _Claim(
            url=delivery.subscription.url,
            secret=delivery.subscription.secret,
            event=delivery.event,
            uuid=str(delivery.uuid),
            payload=dict(delivery.payload),
        )


def attempt_delivery(*, delivery_id: int, now: datetime | None = None) -> Attempt:
    """One attempt at a pending delivery that is due at `now` (default: now): claim, POST
    outside any transaction, record. Safe to call twice or from two workers at once."""
    now = now or timezone.now()
    claim = _claim(delivery_id, now)
    if isinstance(claim, Attempt):
        return claim
    outcome = webhooks.post(
        url=claim.url, secret=claim.secret, event=claim.event, delivery_id=claim.uuid, payload=claim.payload
    )
    with transaction.atomic():
        delivery = WebhookDelivery.objects.select_for_update().get(pk=delivery_id)
        delivery.last_status_code = outcome.status_code
        delivery.last_error = outcome.error[:500]
        fields = ["last_status_code", "last_error", "status", "next_attempt_at", "delivered_at"]
        if outcome.delivered:
            delivery.status, delivery.next_attempt_at, delivery.delivered_at = (
                WebhookDelivery.Status.DELIVERED,
                None,
                timezone.now(),
            )
            delivery.save(update_fields=fields)
            return Attempt("delivered")
        if delivery.attempts >= settings.ENGRAM_WEBHOOK_MAX_ATTEMPTS:
            delivery.status, delivery.next_attempt_at = WebhookDelivery.Status.FAILED, None
            delivery.save(update_fields=fields)
            return Attempt("failed")
        wait = backoff(delivery.attempts)
        delivery.next_attempt_at = now + timedelta(seconds=wait)
        delivery.save(update_fields=fields)
        return Attempt("retry", retry_in=wait)


def due(now: datetime | None = None, *, limit: int = 500) -> list[int]:
    """Ids of pending deliveries whose next attempt is due, oldest first."""
    now = now or timezone.now()
    return list(
        WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )


def deliver_due(now: datetime | None = None, *, limit: int = 500) -> dict[str, int]:
    """The sweep: one attempt at each due delivery; counts per outcome. Retries it schedules
    wait for a later sweep (never a retry loop inside one call)."""
    now = now or timezone.now()
    counts: dict[str, int] = {}
    for pk in due(now, limit=limit):
        state = attempt_delivery(delivery_id=pk, now=now).state
        counts[state] = counts.get(state, 0) + 1
    return counts
