"""Admin for webhooks (issue 21): subscriptions, changed by workspace admins through
memory.services.webhooks, and the read-only delivery log with a "redeliver" action.

Members of a workspace see its subscriptions (URL, events, the secret masked) and the log (ids
and states only); only its admins add, change, delete, rotate secrets or redeliver."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils.html import format_html

from memory import webhooks
from memory.actors import Actor
from memory.admin.base import EMPTY, ReadOnlyAdmin, SameWorkspaceForm, WorkspaceScopedAdmin, admin_link, adopt_saved
from memory.errors import EngramError
from memory.models import WEBHOOK_EVENTS, WebhookDelivery, WebhookSubscription
from memory.services.webhooks import (
    create_subscription,
    delete_subscription,
    redeliver,
    rotate_secret,
    update_subscription,
)

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django.utils.safestring import SafeString


def _show_secret_once(request: HttpRequest, subscription: WebhookSubscription, secret: str, *, what: str) -> None:
    messages.success(
        request,
        format_html(
            "{} for the webhook {} ({}): <code>{}</code> — copy it now: it will not be shown again.",
            what,
            subscription.url,
            subscription.workspace.slug,
            secret,
        ),
    )


class WebhookSubscriptionForm(SameWorkspaceForm):
    url = forms.URLField(
        max_length=2000, assume_scheme="https", help_text=WebhookSubscription._meta.get_field("url").help_text
    )
    events = forms.MultipleChoiceField(
        choices=[(e, e) for e in WEBHOOK_EVENTS], widget=forms.CheckboxSelectMultiple, required=True
    )

    class Meta:
        model = WebhookSubscription
        fields = ("workspace", "url", "events", "active", "description")

    def clean_url(self) -> str:
        url = str(self.cleaned_data.get("url") or "").strip()
        if self.instance.pk is not None and url == self.instance.url:
            return url  # unchanged: pausing a subscription whose host stopped resolving still works
        try:
            webhooks.validate_url(url)
        except webhooks.UnsafeURL as exc:
            raise forms.ValidationError(str(exc), code="unsafe_url") from None
        return url


@admin.register(WebhookSubscription)
class WebhookSubscriptionAdmin(WorkspaceScopedAdmin):
    administered = True
    form = WebhookSubscriptionForm
    list_display = ("id", "url", "workspace", "event_list", "active", "secret_masked", "created_at", "log")
    list_filter = ("active", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace",)
    search_fields = ("url", "description", "workspace__slug")
    ordering = ("workspace__slug", "id")
    readonly_fields = ("secret_masked", "created_by", "created_at", "log")
    actions = ("rotate_secrets",)

    def get_readonly_fields(self, request: HttpRequest, obj: WebhookSubscription | None = None) -> tuple[str, ...]:
        fixed = tuple(super().get_readonly_fields(request, obj))
        return ("workspace", *fixed) if obj is not None else fixed

    def get_fields(self, request: HttpRequest, obj: WebhookSubscription | None = None) -> tuple[str, ...]:
        editable = ("workspace", "url", "events", "active", "description")
        return editable if obj is None else (*editable, "secret_masked", "created_by", "created_at", "log")

    @admin.display(description="events")
    def event_list(self, obj: WebhookSubscription) -> str:
        return ", ".join(obj.events) or EMPTY

    @admin.display(description="secret")
    def secret_masked(self, obj: WebhookSubscription) -> str:
        return obj.masked_secret or EMPTY

    @admin.display(description="deliveries")
    def log(self, obj: WebhookSubscription) -> SafeString | str:
        if obj.pk is None:
            return EMPTY
        url = reverse("admin:memory_webhookdelivery_changelist") + f"?subscription__id__exact={obj.pk}"
        return format_html('<a href="{}">log</a>', url)

    def save_model(self, request: HttpRequest, obj: WebhookSubscription, form: forms.ModelForm, change: bool) -> None:
        by = Actor.of_user(request.user)
        data = form.cleaned_data
        if change:
            adopt_saved(
                obj,
                update_subscription(
                    subscription=obj,
                    by=by,
                    url=data["url"],
                    events=data["events"],
                    active=data["active"],
                    description=data["description"],
                ),
            )
            return
        subscription = create_subscription(
            workspace=data["workspace"],
            url=data["url"],
            events=data["events"],
            active=data["active"],
            description=data["description"],
            by=by,
        )
        adopt_saved(obj, subscription)
        _show_secret_once(request, subscription, subscription.secret, what="Signing secret")

    def delete_model(self, request: HttpRequest, obj: WebhookSubscription) -> None:
        delete_subscription(subscription=obj, by=Actor.of_user(request.user))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        with transaction.atomic():
            for subscription in self.scope_queryset(queryset, request, "administer").order_by("pk"):
                delete_subscription(subscription=subscription, by=by)

    @admin.action(description="Rotate the signing secret (shows each new secret once)", permissions=["change"])
    def rotate_secrets(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        issued: list[tuple[WebhookSubscription, str]] = []
        with transaction.atomic():
            for subscription in self.scope_queryset(queryset, request, "administer").order_by("pk"):
                issued.append((subscription, rotate_secret(subscription=subscription, by=by)))
        for subscription, secret in issued:  # shown only once every rotation committed
            _show_secret_once(request, subscription, secret, what="New signing secret")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    """The delivery log: every event sent to a subscription, its attempts and last answer."""

    list_display = (
        "created_at",
        "event",
        "status",
        "attempts",
        "last_status_code",
        "subscription_link",
        "workspace",
        "next_attempt_at",
        "delivered_at",
    )
    list_filter = ("status", "event", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace", "subscription")
    search_fields = ("event", "last_error")
    search_help_text = "Event or error; a delivery or event id (uuid) finds that delivery."
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    show_full_result_count = False
    fields = (
        "uuid",
        "event_id",
        "workspace",
        "subscription_link",
        "event",
        "status",
        "attempts",
        "last_status_code",
        "last_error",
        "next_attempt_at",
        "last_attempt_at",
        "delivered_at",
        "created_at",
        "payload_json",
    )
    readonly_fields = fields
    actions = ("redeliver_selected",)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        try:
            as_uuid = uuid.UUID(term)
        except ValueError:
            return super().get_search_results(request, queryset, search_term)
        return queryset.filter(uuid=as_uuid) | queryset.filter(event_id=as_uuid), False

    @admin.display(description="subscription", ordering="subscription")
    def subscription_link(self, obj: WebhookDelivery) -> SafeString | str:
        return admin_link(WebhookSubscription, obj.subscription_id, f"#{obj.subscription_id}")

    @admin.display(description="payload")
    def payload_json(self, obj: WebhookDelivery) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(obj.payload, indent=2, sort_keys=True))

    @admin.action(description="Redeliver the selected events (a new delivery each)")
    def redeliver_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        allowed = self.scope_queryset(queryset, request, "administer").order_by("pk")
        sent = 0
        try:
            with transaction.atomic():
                for delivery in allowed:
                    redeliver(delivery=delivery, by=by)
                    sent += 1
        except EngramError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        skipped = queryset.count() - sent
        note = f" ({skipped} skipped: only a workspace's admins redeliver)" if skipped else ""
        self.message_user(request, f"Queued {sent} redelivery(ies){note}.", messages.SUCCESS)
