"""Django admin for agents: identities, key hints, and key lifecycle through agents.services.

A plain key exists only in the return value of a service; the admin shows it once, in a
message, and never stores or shows the hash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.db import transaction
from django.utils.html import format_html

from agents.models import Agent
from agents.services import create_agent, revoke_agent, rotate_key
from memory.actors import Actor
from memory.admin import WorkspaceScopedAdmin, adopt_saved

if TYPE_CHECKING:
    from django import forms
    from django.db.models import QuerySet
    from django.http import HttpRequest


def _show_key_once(request: HttpRequest, agent: Agent, key: str, *, what: str) -> None:
    messages.success(
        request,
        format_html(
            "{} for agent “{}” ({}): <code>{}</code> — copy it now: it will not be shown again.",
            what,
            agent.name,
            agent.workspace.slug,
            key,
        ),
    )


class KeyStateFilter(admin.SimpleListFilter):
    title = "key"
    parameter_name = "key"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in ("active", "revoked"):
            return queryset.filter(revoked_at__isnull=self.value() == "active")
        return queryset


@admin.register(Agent)
class AgentAdmin(WorkspaceScopedAdmin):
    """Agents are created, revoked and re-keyed through agents.services, each audited."""

    list_display = (
        "name",
        "workspace",
        "role_name",
        "key_hint",
        "key_active",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = (
        KeyStateFilter,
        ("workspace", admin.RelatedOnlyFieldListFilter),
        ("role", admin.RelatedOnlyFieldListFilter),
    )
    list_select_related = ("workspace", "role")
    search_fields = ("name", "key_hint", "workspace__slug", "role__name")
    ordering = ("workspace__slug", "name")
    autocomplete_fields = ("workspace", "role")
    actions = ("revoke_keys", "rotate_keys")
    str_select_related = ("role",)
    # key_hash is never listed: a form or page shows what is in `fields`, nothing else.
    add_fields = ("workspace", "role", "name")
    change_fields = ("workspace", "role", "name", "key_hint", "created_at", "last_used_at", "revoked_at")

    def get_fields(self, request: HttpRequest, obj: Agent | None = None) -> tuple[str, ...]:
        return self.change_fields if obj else self.add_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Agent | None = None) -> tuple[str, ...]:
        # Role changes alter what the agent may read and write, and revocation has its action:
        # both must leave an audit event, which a plain form save would not.
        return self.change_fields if obj else ()

    @admin.display(description="role", ordering="role__name")
    def role_name(self, obj: Agent) -> str:
        return obj.role.name

    @admin.display(description="key active", boolean=True, ordering="revoked_at")
    def key_active(self, obj: Agent) -> bool:
        return not obj.is_revoked

    def save_model(self, request: HttpRequest, obj: Agent, form: forms.ModelForm, change: bool) -> None:
        if change:
            return  # every field is read-only on change; nothing to write
        agent, key = create_agent(workspace=obj.workspace, name=obj.name, role=obj.role, by=Actor.of_user(request.user))
        adopt_saved(obj, agent)
        _show_key_once(request, agent, key, what="API key")

    @admin.action(description="Revoke keys of selected agents", permissions=["change"])
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        revoked = 0
        with transaction.atomic():
            for agent in queryset.select_related(None).order_by("pk"):  # lock in pk order
                if agent.revoked_at is None:
                    revoke_agent(agent=agent, by=by)
                    revoked += 1
        self.message_user(request, f"Revoked the keys of {revoked} agent(s).", messages.SUCCESS)

    @admin.action(description="Rotate key of selected agents (shows each new key once)", permissions=["change"])
    def rotate_keys(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        issued: list[tuple[Agent, str]] = []
        with transaction.atomic():
            for agent in queryset.select_related("workspace").order_by("pk"):
                issued.append((agent, rotate_key(agent=agent, by=by)))
        # Shown only after every rotation committed, so no key is displayed that was rolled back.
        for agent, key in issued:
            _show_key_once(request, agent, key, what="New API key")
