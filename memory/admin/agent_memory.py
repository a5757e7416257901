"""Admin for agents' own memory: observations, working memory, hot memory, episodes (SPEC §4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.db.models import QuerySet

from memory.admin.base import EMPTY, WorkspaceScopedAdmin, admin_link, count_column, count_related, excerpt
from memory.models import Episode, EpisodeFact, Fact, HotMemory, Observation, WorkingMemory, Workspace

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django.utils.safestring import SafeString


@admin.register(Observation)
class ObservationAdmin(WorkspaceScopedAdmin):
    list_display = ("id", "text_excerpt", "agent", "workspace", "created_at")
    list_filter = (("workspace", admin.RelatedOnlyFieldListFilter),)
    list_select_related = ("workspace", "agent__role")
    search_fields = ("text", "agent__name")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    autocomplete_fields = ("workspace",)
    raw_id_fields = ("agent",)

    @admin.display(description="text")
    def text_excerpt(self, obj: Observation) -> str:
        return excerpt(obj.text, 100)


@admin.register(WorkingMemory)
class WorkingMemoryAdmin(WorkspaceScopedAdmin):
    workspace_lookup = "agent__workspace"
    list_display = ("agent", "workspace", "notes_excerpt", "notes_chars", "updated_at")
    list_filter = (("agent__workspace", admin.RelatedOnlyFieldListFilter),)
    list_select_related = ("agent__workspace", "agent__role")
    search_fields = ("agent__name", "notes")
    ordering = ("agent__workspace__slug", "agent__name")
    raw_id_fields = ("agent",)

    @admin.display(description="workspace", ordering="agent__workspace__slug")
    def workspace(self, obj: WorkingMemory) -> Workspace:
        return obj.agent.workspace

    @admin.display(description="notes")
    def notes_excerpt(self, obj: WorkingMemory) -> str:
        return excerpt(obj.notes, 100)

    @admin.display(description="characters")
    def notes_chars(self, obj: WorkingMemory) -> int:
        # The notes go verbatim into every dispatch of the agent: their size is their cost.
        return len(obj.notes)


@admin.register(HotMemory)
class HotMemoryAdmin(WorkspaceScopedAdmin):
    list_display = (
        "id",
        "session_id",
        "agent",
        "workspace",
        "content_excerpt",
        "domain_label",
        "topic",
        "consolidated",
        "created_at",
    )
    list_filter = (("consolidated_at", admin.EmptyFieldListFilter), ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace", "agent__role", "domain__repo")
    search_fields = ("session_id", "content", "topic", "agent__name")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    autocomplete_fields = ("workspace", "domain")
    raw_id_fields = ("agent", "consolidated_fact")

    @admin.display(description="content")
    def content_excerpt(self, obj: HotMemory) -> str:
        return excerpt(obj.content)

    @admin.display(description="domain", ordering="domain__name")
    def domain_label(self, obj: HotMemory) -> str:
        return obj.domain.label if obj.domain is not None else EMPTY

    @admin.display(description="consolidated", boolean=True, ordering="consolidated_at")
    def consolidated(self, obj: HotMemory) -> bool:
        return obj.consolidated_at is not None


# --- Episodes (SPEC §4) ---------------------------------------------------------------------
@admin.register(Episode)
class EpisodeAdmin(WorkspaceScopedAdmin):
    list_display = ("id", "kind", "title", "workspace", "agent", "fact_count", "started_at")
    list_filter = ("kind", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace", "agent__role")
    search_fields = ("title", "kind")
    ordering = ("-started_at", "-id")
    date_hierarchy = "started_at"
    show_full_result_count = False
    autocomplete_fields = ("workspace",)
    raw_id_fields = ("agent",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(fact_count=count_related(Episode, "links"))

    fact_count = count_column("fact_count", "facts")


@admin.register(EpisodeFact)
class EpisodeFactAdmin(WorkspaceScopedAdmin):
    workspace_lookup = "episode__workspace"
    list_display = ("id", "episode_link", "fact_link", "relation", "created_at")
    list_filter = ("relation", ("episode__workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("episode", "fact")
    search_fields = ("episode__title", "fact__topic")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    raw_id_fields = ("episode", "fact")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .select_related("episode", "fact")
            .defer("fact__embedding", "fact__content_embedding", "fact__search_vector", "fact__content")
        )

    @admin.display(description="episode", ordering="episode_id")
    def episode_link(self, obj: EpisodeFact) -> SafeString | str:
        return admin_link(Episode, obj.episode_id, obj.episode)

    @admin.display(description="fact", ordering="fact_id")
    def fact_link(self, obj: EpisodeFact) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id} {excerpt(obj.fact.topic, 60)}")
