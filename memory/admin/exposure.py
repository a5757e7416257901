"""Admin for the exposure trail (issue 21): read-only rows written by the recall buffer.

A row names a fact or policy by id only, so the person's domains are applied through those ids:
a workspace admin sees the workspace's whole trail, any other member the rows of facts and
policies in domains they may see (rows of erased facts: admins only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.db.models import Q, QuerySet

from memory import access
from memory.admin.base import EMPTY, ReadOnlyAdmin, admin_link
from memory.models import Episode, Exposure, Fact, MemoryRun, Policy

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django.utils.safestring import SafeString


@admin.register(Exposure)
class ExposureAdmin(ReadOnlyAdmin):
    list_display = ("served_at", "surface", "agent", "fact", "policy", "episode_link", "run", "workspace")
    list_filter = ("surface", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace", "agent__role", "episode")
    search_fields = ("=fact_id", "=policy_id", "=run_id", "agent__name")
    search_help_text = "A fact, policy or run id, or an agent's name."
    ordering = ("-served_at", "-id")
    date_hierarchy = "served_at"
    show_full_result_count = False
    raw_id_fields = ("agent", "episode")

    def scope_queryset(self, queryset: QuerySet, request: HttpRequest, action: str = "view") -> QuerySet:
        queryset = super().scope_queryset(queryset, request, action)
        user = request.user
        if getattr(user, "is_superuser", False):
            return queryset
        seen = access.domains(user, action).values("pk")
        return queryset.filter(
            Q(workspace__in=access.workspaces(user, "administer").values("pk"))
            | Q(fact_id__in=Fact.objects.filter(domain__in=seen).values("pk"))
            | Q(policy_id__in=Policy.objects.filter(domain__in=seen).values("pk"))
        )

    @admin.display(description="fact", ordering="fact_id")
    def fact(self, obj: Exposure) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id}") if obj.fact_id is not None else EMPTY

    @admin.display(description="policy", ordering="policy_id")
    def policy(self, obj: Exposure) -> SafeString | str:
        return admin_link(Policy, obj.policy_id, f"#{obj.policy_id}") if obj.policy_id is not None else EMPTY

    @admin.display(description="episode", ordering="episode_id")
    def episode_link(self, obj: Exposure) -> SafeString | str:
        return admin_link(Episode, obj.episode_id, obj.episode) if obj.episode_id is not None else EMPTY

    @admin.display(description="run", ordering="run_id")
    def run(self, obj: Exposure) -> SafeString | str:
        return admin_link(MemoryRun, obj.run_id, f"run #{obj.run_id}") if obj.run_id is not None else EMPTY
