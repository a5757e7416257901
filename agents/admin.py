"""Django admin for agents: identities, key hints, and key lifecycle through agents.services.

A plain key exists only in the return value of a service; the admin shows it once, in a
message, and never stores or shows the hash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.db import transaction
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents.models import Agent, BankItem, Intervention, MemoryRun
from agents.services import create_agent, revoke_agent, rotate_key
from memory.actors import Actor
from memory.admin import ReadOnlyAdmin, WorkspaceScopedAdmin, admin_link, adopt_saved, excerpt

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


# --- Memory-agent runs (SPEC §9): written only by agents through agents.runs, read-only here ---
class BankItemInline(admin.TabularInline):
    model = BankItem
    fields = ("kind", "item_id", "content", "tags", "outcome", "candidate", "updated_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: MemoryRun | None = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("candidate")


class InterventionInline(admin.TabularInline):
    model = Intervention
    fields = ("step", "reminder", "rationale", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: MemoryRun | None = None) -> bool:
        return False


@admin.register(MemoryRun)
class MemoryRunAdmin(ReadOnlyAdmin):
    """A run with its memory bank and every decision of the memory agent (silence included)."""

    list_display = ("id", "task_excerpt", "agent", "workspace", "status", "created_at", "finished_at", "run_page")
    list_filter = ("status", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("agent__role", "workspace")
    search_fields = ("task", "agent__name", "workspace__slug")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    fields = ("workspace", "agent", "task", "status", "episode", "created_at", "finished_at", "run_page")
    readonly_fields = fields
    inlines = (BankItemInline, InterventionInline)

    @admin.display(description="task")
    def task_excerpt(self, obj: MemoryRun) -> str:
        return excerpt(obj.task, 80)

    @admin.display(description="run page")
    def run_page(self, obj: MemoryRun) -> SafeString:
        return format_html('<a href="{}">timeline</a>', reverse("review:run", args=[obj.pk]))


@admin.register(BankItem)
class BankItemAdmin(ReadOnlyAdmin):
    workspace_lookup = "run__workspace"
    list_display = ("item_id", "kind", "content_excerpt", "outcome", "run_link", "candidate_link", "updated_at")
    list_filter = ("kind",)
    list_select_related = ("run",)
    search_fields = ("item_id", "content", "outcome", "run__task")
    ordering = ("-updated_at", "-id")

    @admin.display(description="content")
    def content_excerpt(self, obj: BankItem) -> str:
        return excerpt(obj.content, 100)

    @admin.display(description="run", ordering="run")
    def run_link(self, obj: BankItem) -> SafeString | str:
        return admin_link(MemoryRun, obj.run_id, f"run #{obj.run_id}")

    @admin.display(description="candidate")
    def candidate_link(self, obj: BankItem) -> SafeString | str:
        from memory.models import Candidate

        return admin_link(Candidate, obj.candidate_id, f"candidate #{obj.candidate_id}")


@admin.register(Intervention)
class InterventionAdmin(ReadOnlyAdmin):
    workspace_lookup = "run__workspace"
    list_display = ("run_link", "step", "decision", "rationale_excerpt", "created_at")
    list_select_related = ("run",)
    search_fields = ("reminder", "rationale", "run__task")
    ordering = ("-created_at", "-id")

    @admin.display(description="run", ordering="run")
    def run_link(self, obj: Intervention) -> SafeString | str:
        return admin_link(MemoryRun, obj.run_id, f"run #{obj.run_id}")

    @admin.display(description="decision")
    def decision(self, obj: Intervention) -> str:
        return "silence" if obj.reminder is None else excerpt(obj.reminder, 100)

    @admin.display(description="rationale")
    def rationale_excerpt(self, obj: Intervention) -> str:
        return excerpt(obj.rationale, 80)
