"""Admin for the records services write: the audit trail and consolidate/harmonize jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import models
from django.db.models import QuerySet
from django.urls import NoReverseMatch

from memory.admin.base import EMPTY, ReadOnlyAdmin, excerpt
from memory.models import Agent, AuditEvent, Job, MemoryDomain

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django.utils.safestring import SafeString


# --- Audit ---------------------------------------------------------------------------------
@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    """The audit trail, as services wrote it: read-only. A person sees the events of their
    workspaces whose domain they may see (events of no domain are workspace-level) — the one
    rule, access.restrict, applied by WorkspaceScopedAdmin — and a link only to pages they may
    open (the target, the actor, the domain); anything else is plain text."""

    list_display = ("created_at", "actor", "verb", "target", "workspace", "domain_label", "detail_excerpt")
    list_filter = ("verb", "target_type", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace", "domain__repo")
    search_fields = ("actor_label", "verb", "target_type")
    search_help_text = "Actor, verb or target type; a number also finds events about that target id."
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    show_full_result_count = False
    # The change page shows these (display methods, not the raw relations, whose links Django
    # renders without asking whether the person may open them).
    fields = ("created_at", "actor", "verb", "target", "workspace_name", "domain_label", "detail")
    readonly_fields = fields

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if term.isdecimal():  # isdigit() also says yes to "²", which int() refuses
            found = found | queryset.filter(target_id=int(term))
        return found, may_have_duplicates

    def link_targets(self, obj: AuditEvent) -> list[tuple[type[models.Model], int | None]]:
        targets: list[tuple[type[models.Model], int | None]] = [(MemoryDomain, obj.domain_id)]
        model = _registered_models_by_name(self.admin_site).get(obj.target_type)
        if model is not None:
            targets.append((model, obj.target_id))
        if obj.actor_agent_id is not None:
            targets.append((Agent, obj.actor_agent_id))
        if obj.actor_user_id is not None:
            targets.append((get_user_model(), obj.actor_user_id))
        return targets

    @admin.display(description="target", ordering="target_type")
    def target(self, obj: AuditEvent) -> SafeString | str:
        if obj.target_id is None:
            return obj.target_type or EMPTY
        text = f"{obj.target_type}#{obj.target_id}"
        model = _registered_models_by_name(self.admin_site).get(obj.target_type)
        if model is None:
            return text
        try:
            return self.guarded_link(obj, model, obj.target_id, text)
        except NoReverseMatch:
            return text

    @admin.display(description="actor", ordering="actor_label")
    def actor(self, obj: AuditEvent) -> SafeString | str:
        if obj.actor_agent_id is not None:
            return self.guarded_link(obj, Agent, obj.actor_agent_id, obj.actor_label)
        if obj.actor_user_id is not None:
            return self.guarded_link(obj, get_user_model(), obj.actor_user_id, obj.actor_label)
        return obj.actor_label

    @admin.display(description="workspace", ordering="workspace__slug")
    def workspace_name(self, obj: AuditEvent) -> str:
        return str(obj.workspace) if obj.workspace_id is not None else EMPTY

    @admin.display(description="domain", ordering="domain__name")
    def domain_label(self, obj: AuditEvent) -> SafeString | str:
        if obj.domain is None:
            return EMPTY
        return self.guarded_link(obj, MemoryDomain, obj.domain_id, obj.domain.label)

    @admin.display(description="detail")
    def detail_excerpt(self, obj: AuditEvent) -> str:
        return excerpt(", ".join(f"{k}={v}" for k, v in obj.detail.items()), 100) if obj.detail else ""


def _registered_models_by_name(site: admin.AdminSite) -> dict[str, type[models.Model]]:
    """Audit targets are stored as model names; map them back to models that have admin pages."""
    return {model._meta.model_name: model for model in site._registry if model._meta.model_name}


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    """Consolidate and harmonize runs, one unfinished per scope (memory.services.jobs): read-only."""

    list_display = ("id", "kind", "scope", "state", "workspace", "requested_by_agent", "created_at", "finished_at")
    list_filter = ("kind", "state", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace", "requested_by_agent__role")
    search_fields = ("task_id", "scope")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
