"""Admin for facts, their mentions and conflicts, policies and decay curves (SPEC §3, §4, §7)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import PAGE_VAR
from django.contrib.postgres.search import SearchQuery
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html_join

from memory import access
from memory.actors import Actor
from memory.admin.base import (
    EMPTY,
    DomainFilter,
    ReadOnlyAdmin,
    SameWorkspaceForm,
    WorkspaceScopedAdmin,
    admin_link,
    excerpt,
)
from memory.errors import EngramError
from memory.models import Conflict, DecayProfile, Fact, FactMention, FactStatus, Policy, Workspace
from memory.pagination import BoundedPaginator
from memory.services.lifecycle import archive_fact, set_fact_status
from memory.services.policies import (
    PolicyBudgetExceeded,
    activate_policy,
    check_budget_for_proposal,
    deactivate_policy,
    propose_policy,
    rule_max,
)

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django.utils.functional import _StrPromise
    from django.utils.safestring import SafeString


@admin.register(DecayProfile)
class DecayProfileAdmin(admin.ModelAdmin):
    """Global Weibull curves (SPEC §3): every staff member may read them, only superusers tune them."""

    list_display = ("memory_type", "scale_days", "shape", "half_life", "floor", "stale_after_days")
    ordering = ("memory_type",)

    @admin.display(description="half-life (days)")
    def half_life(self, obj: DecayProfile) -> str:
        # The age at which weight exp(-(t/λ)^k) falls to 0.5: easier to judge than λ and k.
        return f"{obj.scale_days * math.log(2) ** (1 / obj.shape):.0f}"

    def has_view_permission(self, request: HttpRequest, obj: DecayProfile | None = None) -> bool:
        return access.is_staff(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return access.is_superuser(request.user)

    def has_change_permission(self, request: HttpRequest, obj: DecayProfile | None = None) -> bool:
        return access.is_superuser(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: DecayProfile | None = None) -> bool:
        return access.is_superuser(request.user)


# --- Facts (SPEC §3, §7) --------------------------------------------------------------------
class LiveFilter(admin.SimpleListFilter):
    title = "superseded"
    parameter_name = "superseded"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("no", "not superseded"), ("yes", "superseded")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in ("no", "yes"):
            return queryset.filter(superseded_by__isnull=self.value() == "no")
        return queryset


class FactWorkspaceFilter(admin.RelatedOnlyFieldListFilter):
    """The workspaces holding a fact the person sees, as RelatedOnlyFieldListFilter lists them,
    asked workspace by workspace (EXISTS on the workspace's index) instead of a DISTINCT over
    every fact."""

    def field_choices(
        self, field: Any, request: HttpRequest, model_admin: admin.ModelAdmin
    ) -> list[tuple[str, str | _StrPromise]]:
        holding = Workspace.objects.filter(
            Exists(model_admin.get_queryset(request).filter(workspace=OuterRef("pk")))
        ).values("pk")
        ordering = self.field_admin_ordering(field, request, model_admin)
        return field.get_choices(include_blank=False, limit_choices_to={"pk__in": holding}, ordering=ordering)


@admin.register(Fact)
class FactAdmin(WorkspaceScopedAdmin):
    """Facts are never edited in place (SPEC §3): only the status moves, through the lifecycle
    service; no hard delete either — archiving keeps the history that supersession relies on."""

    list_display = (
        "id",
        "topic",
        "content_excerpt",
        "domain_label",
        "workspace",
        "memory_type",
        "veracity",
        "status",
        "is_live",
        "confidence_display",
        "mention_count",
        "recall_count",
        "created_at",
    )
    list_display_links = ("id", "topic")
    # Half the admin's default: rendering 100 rows of 13 columns was most of the page (issue 38;
    # at 10k facts 130 ms p50, of which ~60 % rendering the rows).
    list_per_page = 50
    list_filter = (
        "status",
        "memory_type",
        "veracity",
        LiveFilter,
        "validated_by",
        "human_edited",
        ("workspace", FactWorkspaceFilter),
        DomainFilter,
    )
    list_select_related = ("workspace", "domain__repo")
    # The search box runs the full-text index (see get_search_results), not these LIKE scans.
    search_fields = ("topic", "content")
    search_help_text = "Full-text search over topic and content; a number finds that fact id."
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    show_full_result_count = False  # a second COUNT over every fact costs more than it tells
    raw_id_fields = ("domain", "superseded_by", "created_by_agent", "created_by_user", "source_observations")
    actions = ("archive_selected", "erase_selected")
    fieldsets = (
        (None, {"fields": ("workspace", "domain", "topic", "content", "memory_type", "veracity", "confidence")}),
        (
            "Lifecycle",
            {
                "fields": (
                    "status",
                    "status_changed_at",
                    "origin",
                    "origin_candidate",
                    "validated_by",
                    "valid_for",
                    "not_valid_for",
                    "verification",
                    "last_validated_at",
                    "verification_contract_version",
                )
            },
        ),
        (
            "History",
            {
                "fields": (
                    "superseded_by_link",
                    "superseded_at",
                    "supersede_reason",
                    "replaces",
                    "observed_at",
                    "valid_until",
                    "created_at",
                    "last_mentioned_at",
                    "mention_count",
                    "recall_count",
                    "last_recalled_at",
                )
            },
        ),
        (
            "Provenance",
            {
                "fields": (
                    "human_edited",
                    "source",
                    "source_file",
                    "source_layer",
                    "rationale",
                    "session_key",
                    "created_by_agent",
                    "created_by_user",
                    "source_observations",
                    "embedded_at",
                )
            },
        ),
    )

    def get_paginator(
        self,
        request: HttpRequest,
        queryset: QuerySet,
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
    ) -> BoundedPaginator:
        """Counts up to 10,000 facts past the page asked for ("10,000+ facts"), not every fact."""
        paginator = BoundedPaginator(queryset, per_page, orphans=orphans, allow_empty_first_page=allow_empty_first_page)
        paginator.reach(request.GET.get(PAGE_VAR, 1))
        return paginator

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The vector and tsvector are large and never displayed.
        return super().get_queryset(request).defer("embedding", "content_embedding", "search_vector")

    def get_readonly_fields(self, request: HttpRequest, obj: Fact | None = None) -> list[str]:
        shown: list[str] = [name for _, options in self.fieldsets for name in options["fields"]]  # type: ignore[misc]
        return [name for name in shown if name != "status"]

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(search_vector=SearchQuery(term, config="english", search_type="websearch"))
        if term.isdecimal():  # isdigit() also says yes to "²", which int() refuses
            match |= Q(pk=int(term))
        return queryset.filter(match), False

    @admin.display(description="content")
    def content_excerpt(self, obj: Fact) -> str:
        return excerpt(obj.content)

    @admin.display(description="domain", ordering="domain__name")
    def domain_label(self, obj: Fact) -> str:
        return obj.domain.label

    @admin.display(description="live", boolean=True)
    def is_live(self, obj: Fact) -> bool:
        return obj.is_live

    @admin.display(description="confidence", ordering="confidence")
    def confidence_display(self, obj: Fact) -> str:
        return f"{obj.confidence:.2f}"

    @admin.display(description="superseded by")
    def superseded_by_link(self, obj: Fact) -> SafeString | str:
        return admin_link(Fact, obj.superseded_by_id, f"#{obj.superseded_by_id}")

    @admin.display(description="replaces")
    def replaces(self, obj: Fact) -> SafeString | str:
        older = list(obj.supersedes.order_by("pk").values_list("pk", flat=True))
        if not older:
            return EMPTY
        return format_html_join(", ", "{}", ((admin_link(Fact, pk, f"#{pk}"),) for pk in older))

    def has_add_permission(self, request: HttpRequest) -> bool:
        # New facts go through the write path (re-mention and conflict detection), not a form.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Fact | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Fact, form: forms.ModelForm, change: bool) -> None:
        # Status is the only editable field. obj.save() would also write back counters and
        # confidence read when the page loaded, undoing re-mentions that happened since.
        if change and "status" in form.changed_data:
            set_fact_status(fact=obj, status=obj.status, by=Actor.of_user(request.user), reason="admin change form")

    @admin.action(description="Archive selected facts", permissions=["change"])
    def archive_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        archived = skipped = 0
        with transaction.atomic():
            # Locks are taken in pk order so two archiving admins cannot deadlock.
            for fact in queryset.select_related(None).only("pk", "status").order_by("pk"):
                if fact.status == FactStatus.ARCHIVED:
                    skipped += 1
                    continue
                archive_fact(fact=fact, by=by)
                archived += 1
        self.message_user(request, f"Archived {archived} fact(s).", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"{skipped} fact(s) were already archived.", messages.INFO)

    @admin.action(description="Erase selected facts for good… (preview first)", permissions=["change"])
    def erase_selected(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        """Leads to the erasure page's preview of these facts (issue 21); nothing is erased here.
        Only a workspace admin of their (single) workspace gets there."""
        rows = list(queryset.order_by("pk").values_list("pk", "workspace__slug", "workspace_id"))
        workspaces = {(slug, ws_id) for _, slug, ws_id in rows}
        if len(workspaces) != 1:
            self.message_user(request, "Erase facts of one workspace at a time.", messages.ERROR)
            return None
        [(slug, ws_id)] = workspaces
        if not access.is_workspace_admin(request.user, ws_id):
            self.message_user(request, "Only a workspace admin may erase.", messages.ERROR)
            return None
        ids = ",".join(str(pk) for pk, _, _ in rows)
        # The page lives in the review app (above memory): reached by its URL name, not imported.
        return HttpResponseRedirect(f"{reverse('review:erase', args=[slug])}?{urlencode({'kind': 'ids', 'ids': ids})}")


# --- Policies, conflicts, agents' private memory (SPEC §4) ---------------------------------
class PolicyAdminForm(SameWorkspaceForm):
    def clean_rule(self) -> str:
        rule = " ".join(self.cleaned_data["rule"].split())
        if not rule or len(rule) > rule_max():
            raise ValidationError(f"A rule has 1 to {rule_max()} characters.")
        return rule

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        domain, rule = cleaned.get("domain"), cleaned.get("rule")
        if self.instance.pk is None and domain is not None and rule and not self.errors:
            try:
                check_budget_for_proposal(domain=domain, rule=rule, required_role=cleaned.get("required_role"))
            except PolicyBudgetExceeded as exc:
                raise ValidationError(exc.detail, code=exc.code) from None
        return cleaned


@admin.register(Policy)
class PolicyAdmin(WorkspaceScopedAdmin):
    form = PolicyAdminForm
    list_display = (
        "id",
        "rule_excerpt",
        "domain_label",
        "workspace",
        "active",
        "required_role",
        "superseded_by_link",
        "created_at",
    )
    list_display_links = ("id", "rule_excerpt")
    list_filter = ("active", ("workspace", admin.RelatedOnlyFieldListFilter), DomainFilter)
    list_select_related = ("workspace", "domain__repo", "required_role")
    search_fields = ("rule", "domain__name")
    ordering = ("workspace__slug", "domain__name", "created_at")
    autocomplete_fields = ("workspace", "domain", "required_role")
    raw_id_fields = ("derived_from", "superseded_by", "created_by_agent", "created_by_user")
    readonly_fields = ("created_at", "superseded_at")
    str_select_related = ("domain__repo",)

    actions = ("activate_selected", "deactivate_selected")

    def get_readonly_fields(self, request: HttpRequest, obj: Policy | None = None) -> list[str] | tuple[str, ...]:
        # An existing policy is never edited in place: change it by superseding (review pages) and
        # switch it with the actions, which go through the audited services.
        if obj is not None:
            return [f.name for f in Policy._meta.fields] + ["derived_from"]
        return self.readonly_fields

    def save_model(self, request: HttpRequest, obj: Policy, form: Any, change: bool) -> None:
        if change:
            return
        created = propose_policy(
            domain=obj.domain, rule=obj.rule, required_role=obj.required_role, by=Actor.of_user(request.user)
        )
        obj.pk = created.pk

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        if change:
            return
        form.instance = Policy.objects.get(pk=form.instance.pk)
        super().save_related(request, form, formsets, change)

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        # The form checks the budget early; a concurrent proposal can still fill the room before
        # the service's locked check, which then refuses: say so instead of a server error.
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except PolicyBudgetExceeded as exc:
            self.message_user(request, exc.detail, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    @admin.action(description="Activate selected policies (add them to every dispatch)")
    def activate_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, activate_policy, "Activated")

    @admin.action(description="Deactivate selected policies (keep them for the record)")
    def deactivate_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, deactivate_policy, "Deactivated")

    def _switch(self, request: HttpRequest, queryset: QuerySet, service: Any, verb: str) -> None:
        by = Actor.of_user(request.user)
        done = refused = 0
        for policy in queryset.select_related("domain").order_by("pk"):
            try:
                service(policy=policy, by=by)
                done += 1
            except PolicyBudgetExceeded as exc:
                self.message_user(request, f"Policy {policy.pk} was not activated: {exc.detail}", messages.ERROR)
            except EngramError:
                refused += 1
        self.message_user(request, f"{verb} {done} polic{'y' if done == 1 else 'ies'}.", messages.SUCCESS)
        if refused:
            self.message_user(
                request,
                f"{refused} superseded polic{'y was' if refused == 1 else 'ies were'} left alone.",
                messages.WARNING,
            )

    @admin.display(description="rule")
    def rule_excerpt(self, obj: Policy) -> str:
        return excerpt(obj.rule, 100)

    @admin.display(description="domain", ordering="domain__name")
    def domain_label(self, obj: Policy) -> str:
        return obj.domain.label

    @admin.display(description="superseded by")
    def superseded_by_link(self, obj: Policy) -> SafeString | str:
        return admin_link(Policy, obj.superseded_by_id, f"#{obj.superseded_by_id}")


@admin.register(Conflict)
class ConflictAdmin(ReadOnlyAdmin):
    """The conflict log is part of the audit trail (SPEC §3): read-only."""

    list_display = (
        "id",
        "topic",
        "domain_label",
        "status",
        "resolution",
        "winner_display",
        "loser_display",
        "rule",
        "similarity_display",
        "detected_by",
        "detected_at",
        "reviewed_at",
    )
    list_filter = (
        "status",
        "resolution",
        "rule",
        "detected_by",
        ("reviewed_at", admin.EmptyFieldListFilter),
        ("workspace", FactWorkspaceFilter),
        DomainFilter,
    )
    list_select_related = ("domain__repo", "existing", "proposed")
    search_fields = ("topic",)
    ordering = ("-detected_at", "-id")
    show_full_result_count = False
    raw_id_fields = ("existing", "proposed", "winner", "loser", "domain", "decided_by", "reviewed_by")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The pair's text is shown (the winner and loser are of the pair); their vectors are not.
        return (
            super()
            .get_queryset(request)
            .select_related("existing", "proposed")
            .defer(
                *(
                    f"{side}__{f}"
                    for side in ("existing", "proposed")
                    for f in ("embedding", "content_embedding", "search_vector")
                )
            )
        )

    @admin.display(description="domain", ordering="domain__name")
    def domain_label(self, obj: Conflict) -> str:
        return obj.domain.label

    def _side(self, obj: Conflict, fact_id: int | None) -> SafeString | str:
        if fact_id is None:  # open, or resolved without a winner
            return "—"
        fact = obj.existing if fact_id == obj.existing_id else obj.proposed
        return admin_link(Fact, fact_id, f"#{fact_id} {excerpt(fact.content, 60)}")

    @admin.display(description="winner (or existing)")
    def winner_display(self, obj: Conflict) -> SafeString | str:
        return self._side(obj, obj.winner_id if obj.winner_id else obj.existing_id)

    @admin.display(description="loser (or proposed)")
    def loser_display(self, obj: Conflict) -> SafeString | str:
        return self._side(obj, obj.loser_id if obj.loser_id else obj.proposed_id)

    @admin.display(description="similarity", ordering="similarity")
    def similarity_display(self, obj: Conflict) -> str:
        return f"{obj.similarity:.2f}"


@admin.register(FactMention)
class FactMentionAdmin(ReadOnlyAdmin):
    """What was said each time a fact was stated again: part of the fact's history, read-only."""

    workspace_lookup = "fact__workspace"
    list_display = ("id", "fact_link", "text_excerpt", "via", "veracity", "agent", "observed_at", "created_at")
    list_filter = ("via", "veracity", ("fact__workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("fact", "agent")
    search_fields = ("text", "fact__topic")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    raw_id_fields = ("fact", "merged_fact", "agent", "user", "episode")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .defer("fact__embedding", "fact__content_embedding", "fact__search_vector", "fact__content")
        )

    @admin.display(description="fact", ordering="fact_id")
    def fact_link(self, obj: FactMention) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id} {excerpt(obj.fact.topic, 60)}")

    @admin.display(description="text")
    def text_excerpt(self, obj: FactMention) -> str:
        return excerpt(obj.text, 80)
