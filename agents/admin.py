"""Django admin for agents: identities, key hints, and key lifecycle through agents.services.

A plain key exists only in the return value of a service; the admin shows it once, in a
message, and never stores or shows the hash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents.services import TRUST_FLAGS, create_agent, may_manage_trust, revoke_agent, rotate_key, set_trust_flags
from memory import access
from memory.actors import Actor
from memory.admin import ReadOnlyAdmin, SameWorkspaceForm, WorkspaceScopedAdmin, adopt_saved, excerpt
from memory.models import Agent, BankItem, Candidate, Intervention, MemoryRun

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


class AgentForm(SameWorkspaceForm):
    """Refuses a change of a trust flag by anyone but an admin of the agent's workspace (or a
    superuser), whatever the form was sent with: the flags are read-only for other staff, and this
    check holds even if a crafted POST carries them."""

    trust_actor: Actor | None = None  # set per request by AgentAdmin.get_form

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        changed = [
            name
            for name in TRUST_FLAGS
            if name in cleaned and bool(cleaned[name]) != bool(getattr(self.instance, name, False))
        ]
        if not changed:
            return cleaned
        workspace = cleaned.get("workspace") if self.instance.pk is None else self.instance.workspace
        allowed = (
            self.trust_actor is not None and workspace is not None and may_manage_trust(self.trust_actor, workspace.pk)
        )
        if not allowed:
            for name in changed:
                self.add_error(
                    name,
                    ValidationError(
                        "Only an admin of the agent's workspace may change this flag.", code="not_workspace_admin"
                    ),
                )
        return cleaned


@admin.register(Agent)
class AgentAdmin(WorkspaceScopedAdmin):
    """Agents are created, revoked and re-keyed through agents.services, each audited. Their trust
    flags (relays_human_words, is_verifier) are editable only by admins of the agent's workspace
    and superusers, through agents.services.set_trust_flags (each change audited). Agents and keys
    are administered rows (memory.access): other members see them, only admins change them."""

    administered = True

    list_display = (
        "name",
        "workspace",
        "role_name",
        "key_hint",
        "key_active",
        "created_at",
        "last_used_at",
        "revoked_at",
        "relays_human_words",
        "is_verifier",
    )
    list_filter = (
        KeyStateFilter,
        "relays_human_words",
        "is_verifier",
        ("workspace", admin.RelatedOnlyFieldListFilter),
        ("role", admin.RelatedOnlyFieldListFilter),
    )
    list_select_related = ("workspace", "role")
    search_fields = ("name", "key_hint", "workspace__slug", "role__name")
    ordering = ("workspace__slug", "name")
    autocomplete_fields = ("workspace", "role")
    actions = ("revoke_keys", "rotate_keys")
    str_select_related = ("role",)
    form = AgentForm
    # key_hash is never listed: a form or page shows what is in `fields`, nothing else.
    add_fields = ("workspace", "role", "name", *TRUST_FLAGS)
    fixed_fields = ("workspace", "role", "name", "key_hint", "created_at", "last_used_at", "revoked_at")
    change_fields = (*fixed_fields, *TRUST_FLAGS)

    def get_fields(self, request: HttpRequest, obj: Agent | None = None) -> tuple[str, ...]:
        return self.change_fields if obj else self.add_fields

    def _may_set_trust(self, request: HttpRequest, obj: Agent | None) -> bool:
        if obj is not None:
            return may_manage_trust(Actor.of_user(request.user), obj.workspace_id)
        # Adding: the workspace is chosen in the form, which checks it (AgentForm.clean).
        return access.workspaces(request.user, "administer").exists()

    def get_readonly_fields(self, request: HttpRequest, obj: Agent | None = None) -> tuple[str, ...]:
        # Role changes alter what the agent may read and write, and revocation has its action:
        # both must leave an audit event, which a plain form save would not. The trust flags are
        # read-only to staff who are not admins of the agent's workspace.
        fixed = self.fixed_fields if obj else ()
        return fixed if self._may_set_trust(request, obj) else (*fixed, *TRUST_FLAGS)

    def get_form(self, request: HttpRequest, obj: Agent | None = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        form.trust_actor = Actor.of_user(request.user)  # type: ignore[attr-defined]
        return form

    @admin.display(description="role", ordering="role__name")
    def role_name(self, obj: Agent) -> str:
        return obj.role.name

    @admin.display(description="key active", boolean=True, ordering="revoked_at")
    def key_active(self, obj: Agent) -> bool:
        return not obj.is_revoked

    def save_model(self, request: HttpRequest, obj: Agent, form: forms.ModelForm, change: bool) -> None:
        by = Actor.of_user(request.user)
        # Only flags that were editable are in cleaned_data; set_trust_flags checks the person again.
        flags = {name: bool(form.cleaned_data[name]) for name in TRUST_FLAGS if name in form.cleaned_data}
        if change:
            # Every other field is read-only on change: the flags are all there is to write.
            if flags:
                adopt_saved(obj, set_trust_flags(agent=obj, by=by, **flags))
            return
        agent, key = create_agent(workspace=obj.workspace, name=obj.name, role=obj.role, by=by, **flags)
        adopt_saved(obj, agent)
        _show_key_once(request, agent, key, what="API key")

    @admin.action(description="Revoke keys of selected agents", permissions=["change"])
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        queryset = self.scope_queryset(queryset, request, "administer")  # re-checked per row
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
        queryset = self.scope_queryset(queryset, request, "administer")  # re-checked per row
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

    list_display = (
        "id",
        "task_excerpt",
        "agent",
        "workspace",
        "status",
        "end_reason",
        "created_at",
        "last_activity_at",
        "finished_at",
        "run_page",
    )
    list_filter = ("status", "end_reason", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("agent__role", "workspace")
    search_fields = ("task", "agent__name", "workspace__slug")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    fields = (
        "workspace",
        "agent",
        "task",
        "status",
        "end_reason",
        "episode",
        "created_at",
        "last_activity_at",
        "finished_at",
        "run_page",
    )
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

    def link_targets(self, obj: BankItem) -> list[tuple[type[models.Model], int | None]]:
        return [(MemoryRun, obj.run_id), (Candidate, obj.candidate_id)]

    @admin.display(description="run", ordering="run")
    def run_link(self, obj: BankItem) -> SafeString | str:
        return self.guarded_link(obj, MemoryRun, obj.run_id, f"run #{obj.run_id}")

    @admin.display(description="candidate")
    def candidate_link(self, obj: BankItem) -> SafeString | str:
        # A candidate of a domain the person may not see is named, not linked (its page would bounce).
        return self.guarded_link(obj, Candidate, obj.candidate_id, f"candidate #{obj.candidate_id}")


@admin.register(Intervention)
class InterventionAdmin(ReadOnlyAdmin):
    workspace_lookup = "run__workspace"
    list_display = ("run_link", "step", "decision", "rationale_excerpt", "created_at")
    list_select_related = ("run",)
    search_fields = ("reminder", "rationale", "run__task")
    ordering = ("-created_at", "-id")

    def link_targets(self, obj: Intervention) -> list[tuple[type[models.Model], int | None]]:
        return [(MemoryRun, obj.run_id)]

    @admin.display(description="run", ordering="run")
    def run_link(self, obj: Intervention) -> SafeString | str:
        return self.guarded_link(obj, MemoryRun, obj.run_id, f"run #{obj.run_id}")

    @admin.display(description="decision")
    def decision(self, obj: Intervention) -> str:
        return "silence" if obj.reminder is None else excerpt(obj.reminder, 100)

    @admin.display(description="rationale")
    def rationale_excerpt(self, obj: Intervention) -> str:
        return excerpt(obj.rationale, 80)
