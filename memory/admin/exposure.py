"""Admin for the exposure trail (issue 21): read-only rows written by the recall buffer.

A row names a fact or policy by id only, so the person's domains are applied through those ids:
a workspace admin sees the workspace's whole trail, any other member the rows of facts and
policies in domains they may see (rows of erased facts: admins only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.db import models

from memory.admin.base import ReadOnlyAdmin
from memory.models import Agent, Episode, Exposure, Fact, MemoryRun, Policy

if TYPE_CHECKING:
    from django.utils.safestring import SafeString


@admin.register(Exposure)
class ExposureAdmin(ReadOnlyAdmin):
    list_display = ("served_at", "surface", "agent_link", "fact", "policy", "episode_link", "run", "workspace")
    list_filter = ("surface", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace", "agent__role", "episode")
    search_fields = ("=fact_id", "=policy_id", "=run_id", "agent__name")
    search_help_text = "A fact, policy or run id, or an agent's name."
    ordering = ("-served_at", "-id")
    date_hierarchy = "served_at"
    show_full_result_count = False
    raw_id_fields = ("agent", "episode")

    # Which rows a person sees is the one rule (access.restrict: its exposure rule reads the fact
    # and policy ids); WorkspaceScopedAdmin applies it. Links go only where the person may open.
    fields = ("served_at", "surface", "workspace_name", "agent_link", "fact", "policy", "episode_link", "run")
    readonly_fields = fields

    def link_targets(self, obj: Exposure) -> list[tuple[type[models.Model], int | None]]:
        return [
            (Fact, obj.fact_id),
            (Policy, obj.policy_id),
            (Episode, obj.episode_id),
            (MemoryRun, obj.run_id),
            (Agent, obj.agent_id),
        ]

    @admin.display(description="fact", ordering="fact_id")
    def fact(self, obj: Exposure) -> SafeString | str:
        return self.guarded_link(obj, Fact, obj.fact_id, f"#{obj.fact_id}")

    @admin.display(description="policy", ordering="policy_id")
    def policy(self, obj: Exposure) -> SafeString | str:
        return self.guarded_link(obj, Policy, obj.policy_id, f"#{obj.policy_id}")

    @admin.display(description="episode", ordering="episode_id")
    def episode_link(self, obj: Exposure) -> SafeString | str:
        return self.guarded_link(obj, Episode, obj.episode_id, obj.episode)

    @admin.display(description="run", ordering="run_id")
    def run(self, obj: Exposure) -> SafeString | str:
        return self.guarded_link(obj, MemoryRun, obj.run_id, f"run #{obj.run_id}")

    @admin.display(description="agent", ordering="agent__name")
    def agent_link(self, obj: Exposure) -> SafeString | str:
        return self.guarded_link(obj, Agent, obj.agent_id, obj.agent)

    @admin.display(description="workspace", ordering="workspace__slug")
    def workspace_name(self, obj: Exposure) -> str:
        return str(obj.workspace)
