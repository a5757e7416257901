"""Admin for remember reviews and the layer → domain mapping (SPEC §8).

Reviews are decided on their htmx page (linked from each row); here they are read-only, since
state changes must go through the audited services. Layer mappings are edited here, through
`set_layer_mapping`, so every remap leaves an audit event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet
from django.urls import reverse
from django.utils.html import format_html

from memory.actors import Actor
from memory.admin import EMPTY, WorkspaceScopedAdmin, adopt_saved, count_related, excerpt
from review.access import items_for
from review.models import LayerMapping, RememberReview, ReviewItem
from review.services import set_layer_mapping

if TYPE_CHECKING:
    from django import forms
    from django.http import HttpRequest
    from django.utils.safestring import SafeString


class ReviewItemInline(admin.TabularInline):
    model = ReviewItem
    extra = 0
    can_delete = False
    fields = ("order", "path", "bytes", "recommended_layer", "edited_layer", "selected", "source", "stored_fact")
    readonly_fields = fields
    show_change_link = False

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return items_for(request.user, super().get_queryset(request))  # only items of their domains

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RememberReview)
class RememberReviewAdmin(WorkspaceScopedAdmin):
    list_display = (
        "id",
        "review_page",
        "status",
        "workspace",
        "agent",
        "repo",
        "item_count",
        "created_at",
        "resolved_by",
    )
    list_filter = ("status", "used_fallback", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace", "agent__role", "repo__workspace", "resolved_by")
    search_fields = ("session_id", "agent__name", "items__path")
    ordering = ("-created_at",)
    date_hierarchy = "created_at"
    inlines = (ReviewItemInline,)
    readonly_fields = (
        "review_page",
        "workspace",
        "agent",
        "repo",
        "session_id",
        "status",
        "used_fallback",
        "created_at",
        "resolved_at",
        "resolved_by",
        "consumed_at",
        "reviewer_note",
        "resolution",
        "raw_output",
    )
    fields = readonly_fields

    # Which reviews a person sees is the one rule (access.restrict, through the review app's
    # layer → domain rules): WorkspaceScopedAdmin applies it. The sub-agent's raw output and the
    # resolution name every item, so only people who see all of the review's items read them.
    WHOLE_REVIEW_FIELDS = ("raw_output", "resolution")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = tuple(super().get_fields(request, obj))
        if obj is None or self._sees_every_item(request, obj):
            return fields
        return tuple(f for f in fields if f not in self.WHOLE_REVIEW_FIELDS)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is None or self._sees_every_item(request, obj):
            return fields
        return tuple(f for f in fields if f not in self.WHOLE_REVIEW_FIELDS)

    @staticmethod
    def _sees_every_item(request: HttpRequest, review: RememberReview) -> bool:
        return not review.items.exclude(pk__in=items_for(request.user).values("pk")).exists()

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(item_count=count_related(RememberReview, "items"))

    @admin.display(description="items", ordering="item_count")
    def item_count(self, obj: Any) -> int:
        return getattr(obj, "item_count", 0)

    @admin.display(description="review page")
    def review_page(self, obj: RememberReview) -> SafeString | str:
        if obj.pk is None:
            return EMPTY
        label = "Review now" if obj.is_pending else "Open"
        return format_html('<a href="{}">{} #{}</a>', reverse("review:remember-review", args=[obj.pk]), label, obj.pk)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # agents submit reviews through the API

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # decided on the review page, through the services

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the audit trail of what was (not) remembered


@admin.register(ReviewItem)
class ReviewItemAdmin(WorkspaceScopedAdmin):
    workspace_lookup = "review__workspace"
    list_display = ("path", "review", "recommended_layer", "edited_layer", "selected", "note_excerpt", "stored_fact")
    list_filter = ("recommended_layer", "selected", "source")
    list_select_related = ("review",)
    search_fields = ("path", "rationale", "suggested_memory_content")
    raw_id_fields = ("review", "stored_fact")
    readonly_fields = (
        "review",
        "order",
        "path",
        "bytes",
        "recommended_layer",
        "rationale",
        "suggested_memory_content",
        "source",
        "selected",
        "edited_layer",
        "edited_rationale",
        "edited_content",
        "updated_at",
        "stored_fact",
        "file_text",
    )
    fields = readonly_fields

    @admin.display(description="note")
    def note_excerpt(self, obj: ReviewItem) -> str:
        return excerpt(obj.note)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(LayerMapping)
class LayerMappingAdmin(WorkspaceScopedAdmin):
    """Remap a layer to another domain name (per repo or workspace-wide) for one workspace."""

    administered = True

    list_display = ("layer", "workspace", "domain_name", "per_repo", "updated_at")
    list_filter = ("layer", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace",)
    ordering = ("workspace__slug", "layer")
    autocomplete_fields = ("workspace",)
    readonly_fields = ("updated_at",)
    str_select_related = ("workspace",)

    def get_readonly_fields(self, request: HttpRequest, obj: LayerMapping | None = None) -> tuple[str, ...]:
        return ("workspace", "layer", "updated_at") if obj else ("updated_at",)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # set it back to the default instead: a deletion would not be audited

    def save_model(self, request: HttpRequest, obj: LayerMapping, form: forms.ModelForm, change: bool) -> None:
        saved = set_layer_mapping(
            workspace=obj.workspace,
            layer=obj.layer,
            domain_name=obj.domain_name,
            per_repo=obj.per_repo,
            by=Actor.of_user(request.user),
        )
        adopt_saved(obj, saved)
