"""Admin for the records services write: the audit trail and consolidate/harmonize jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.db import models
from django.db.models import QuerySet
from django.urls import NoReverseMatch

from memory.admin.base import EMPTY, ReadOnlyAdmin, admin_link, excerpt
from memory.models import AuditEvent, Job

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django.utils.safestring import SafeString


# --- Audit ---------------------------------------------------------------------------------
@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    """The audit trail, as services wrote it: read-only."""

    list_display = ("created_at", "actor_label", "verb", "target", "workspace", "detail_excerpt")
    list_filter = ("verb", "target_type", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace",)
    search_fields = ("actor_label", "verb", "target_type")
    search_help_text = "Actor, verb or target type; a number also finds events about that target id."
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    show_full_result_count = False
    raw_id_fields = ("actor_agent", "actor_user")

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if term.isdecimal():  # isdigit() also says yes to "²", which int() refuses
            found = found | queryset.filter(target_id=int(term))
        return found, may_have_duplicates

    @admin.display(description="target", ordering="target_type")
    def target(self, obj: AuditEvent) -> SafeString | str:
        if obj.target_id is None:
            return obj.target_type or EMPTY
        text = f"{obj.target_type}#{obj.target_id}"
        model = _registered_models_by_name(self.admin_site).get(obj.target_type)
        if model is None:
            return text
        try:
            return admin_link(model, obj.target_id, text)
        except NoReverseMatch:
            return text

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
