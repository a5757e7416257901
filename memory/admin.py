"""Django admin for Engram's memory models (SPEC §10).

Non-superusers only ever see and pick rows of the workspaces they are members of
(`WorkspaceScopedAdmin`, SPEC §1). Writes with rules or an audit trail go through
memory.services; list pages select their relations up front so they stay free of N+1 queries.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.exceptions import NotRegistered
from django.contrib.auth import get_user_model
from django.contrib.postgres.search import SearchQuery
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.db.models import Count, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from guardian.admin import GuardedModelAdminMixin

from memory import access
from memory.actors import Actor
from memory.audit import record_event
from memory.errors import EngramError
from memory.models import (
    AccessGrant,
    AuditEvent,
    Candidate,
    Conflict,
    DecayProfile,
    Episode,
    EpisodeFact,
    Fact,
    FactMention,
    FactStatus,
    HotMemory,
    Job,
    MemoryDomain,
    Observation,
    Policy,
    PromotionDecision,
    Replay,
    Repo,
    Role,
    WorkingMemory,
    Workspace,
    WorkspaceMembership,
)
from memory.services import promotion
from memory.services.lifecycle import archive_fact, set_fact_status
from memory.services.policies import (
    PolicyBudgetExceeded,
    activate_policy,
    check_budget_for_proposal,
    deactivate_policy,
    propose_policy,
    rule_max,
    set_policy_budget,
)
from memory.services.tenancy import (
    create_domain,
    get_or_create_repo,
    get_or_create_role,
    get_or_create_workspace,
    set_grant,
)

if TYPE_CHECKING:
    from django.db.models.fields.related import ForeignKey, ManyToManyField
    from django.forms import ModelChoiceField, ModelMultipleChoiceField
    from django.http import HttpRequest
    from django.utils.safestring import SafeString

EMPTY = "—"


# --- Small display helpers ----------------------------------------------------------------
def admin_link(model: type[models.Model], pk: int | None, text: object) -> SafeString | str:
    """A link to the admin change page of `model` #pk, built from the id alone (no query)."""
    if pk is None:
        return EMPTY
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[pk])
    return format_html('<a href="{}">{}</a>', url, text)


def excerpt(text: str, chars: int = 80) -> str:
    return Truncator(text).chars(chars)


def count_column(annotation: str, description: str) -> Callable[[Any, Any], int]:
    """A sortable changelist column showing a count annotated by get_queryset (count_related)."""

    @admin.display(description=description, ordering=annotation)
    def column(self: Any, obj: Any) -> int:
        return int(getattr(obj, annotation))

    column.__name__ = annotation
    return column


def count_related(model: type[models.Model], accessor: str) -> Coalesce:
    """Annotation counting `model.<accessor>` rows per row, as a correlated subquery.

    A subquery rather than Count() over joins: several counts on one page must not multiply
    each other, and the page's LIMIT still applies before counting."""
    relation = model._meta.get_field(accessor)  # a reverse relation, e.g. Workspace.facts
    related_model = relation.related_model
    fk_name = relation.field.name  # type: ignore[union-attr]
    rows = (
        related_model._default_manager.filter(**{fk_name: OuterRef("pk")})  # type: ignore[union-attr]
        .order_by()
        .values(fk_name)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


def _workspace_ids_of(value: object) -> set[int]:
    """The workspaces a cleaned form value belongs to (a row, or the rows of a many-to-many)."""
    if isinstance(value, Workspace):
        return {value.pk}
    if isinstance(value, models.Model):
        ws_id = getattr(value, "workspace_id", None)
        return {ws_id} if ws_id is not None else set()
    if isinstance(value, QuerySet) and any(f.name == "workspace" for f in value.model._meta.get_fields()):
        return set(value.order_by().values_list("workspace_id", flat=True).distinct())
    return set()


class SameWorkspaceForm(forms.ModelForm):
    """Refuses a row whose related rows come from different workspaces (SPEC §1).

    Choices are already limited to the user's workspaces; this catches a person (or a superuser)
    who belongs to several and mixes them, e.g. a role of one with a domain of another."""

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        seen: dict[int, list[str]] = {}
        for name, value in cleaned.items():
            for ws_id in _workspace_ids_of(value):
                seen.setdefault(ws_id, []).append(name)
        # A workspace shown read-only (on change) still binds the editable relations.
        own_ws = getattr(self.instance, "workspace_id", None)
        if "workspace" not in cleaned and own_ws is not None and seen:
            seen.setdefault(own_ws, []).append("workspace")
        if len(seen) > 1:
            names = sorted({name for group in seen.values() for name in group})
            raise ValidationError(
                "%(fields)s must all belong to the same workspace.",
                code="mixed_workspaces",
                params={"fields": ", ".join(names)},
            )
        return cleaned


def adopt_saved(obj: models.Model, saved: models.Model) -> None:
    """Make the admin's unsaved instance stand for the row a service created.

    The admin logs, messages and redirects with `obj`, so it needs the service's row values."""
    for field in obj._meta.concrete_fields:
        if not field.generated:
            setattr(obj, field.attname, getattr(saved, field.attname))
    obj._state.adding = False
    obj._state.db = saved._state.db


# --- Workspace scoping ----------------------------------------------------------------------
class WorkspaceScopedAdmin(admin.ModelAdmin):
    """Superusers see every row; other staff only rows of workspaces they are members of.

    Each admin names the lookup from its model to the workspace (`workspace_lookup`). The same
    scope applies to the list, the change pages, the actions and to the rows offered in
    foreign-key and many-to-many fields of any admin (so nothing can be attached across)."""

    workspace_lookup: str = "workspace"
    # Relations that __str__ follows: selected with every row so choices and lists stay flat.
    str_select_related: tuple[str, ...] = ()
    form = SameWorkspaceForm

    # Rows that hold rights (grants, memberships, agents, mappings): changed by admins only.
    administered: bool = False

    def scope_queryset(self, queryset: QuerySet, request: HttpRequest, action: str = "view") -> QuerySet:
        """`queryset` limited by the one rule for people (memory.access.restrict)."""
        return access.restrict(queryset, request.user, action, workspace_lookup=self.workspace_lookup)

    def _may_write(self, request: HttpRequest, obj: models.Model | None) -> bool:
        """Administered rows: an admin of the row's workspace (any workspace for the list/add)."""
        if not self.administered or request.user.is_superuser:
            return True
        if obj is None:  # asked for every model of the sidebar: once per request
            cached = getattr(request, "_engram_administers", None)
            if cached is None:
                cached = access.workspaces(request.user, "administer").exists()
                request._engram_administers = cached  # type: ignore[attr-defined]
            return bool(cached)
        return access.may(request.user, "administer", obj)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return super().has_add_permission(request, *args) and self._may_write(request, None)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) and self._may_write(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_delete_permission(request, obj) and self._may_write(request, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        qs = super().get_queryset(request)
        # The changelist skips list_select_related once the queryset selects anything, so both
        # sets are applied here.
        extra = self.list_select_related if isinstance(self.list_select_related, (list, tuple)) else ()
        related = (*self.str_select_related, *extra)
        if related:
            qs = qs.select_related(*related)
        return self.scope_queryset(qs, request)

    def choices_queryset(self, request: HttpRequest, action: str = "decide") -> QuerySet:
        """Rows another admin may offer in a relation field: scoped, ordered, no annotations."""
        qs = self.model._default_manager.select_related(*self.str_select_related)
        ordering = self.get_ordering(request)
        if ordering:
            qs = qs.order_by(*ordering)
        return self.scope_queryset(qs, request, action)

    def _related_choices(self, db_field: models.Field, request: HttpRequest) -> QuerySet | None:
        try:
            related_admin = self.admin_site.get_model_admin(db_field.related_model)  # type: ignore[arg-type]
        except NotRegistered:
            return None
        if isinstance(related_admin, WorkspaceScopedAdmin):
            # Rows offered are those the person may act on: administered workspaces for rights,
            # decidable domains for memory.
            return related_admin.choices_queryset(request, "administer" if self.administered else "decide")
        return None

    def formfield_for_foreignkey(
        self, db_field: ForeignKey, request: HttpRequest, **kwargs: Any
    ) -> ModelChoiceField | None:
        if "queryset" not in kwargs:
            choices = self._related_choices(db_field, request)
            if choices is not None:
                kwargs["queryset"] = choices
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(
        self, db_field: ManyToManyField, request: HttpRequest, **kwargs: Any
    ) -> ModelMultipleChoiceField | None:
        if "queryset" not in kwargs:
            choices = self._related_choices(db_field, request)
            if choices is not None:
                kwargs["queryset"] = choices
        return super().formfield_for_manytomany(db_field, request, **kwargs)


class ReadOnlyAdmin(WorkspaceScopedAdmin):
    """Rows written only by services (the audit trail): viewable, never added, changed or deleted."""

    def has_add_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return False


class DomainFilter(admin.SimpleListFilter):
    """Filter by domain, listing only domains of the user's workspaces, labelled as agents see them."""

    title = "domain"
    parameter_name = "domain"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        domains = access.restrict(
            MemoryDomain.objects.select_related("workspace", "repo").order_by("workspace__slug", "repo__slug", "name"),
            request.user,
            "view",
        )
        return [(str(d.pk), f"{d.workspace.slug}: {d.label}") for d in domains]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(domain_id=int(value)) if value and value.isdecimal() else queryset


# --- Tenancy --------------------------------------------------------------------------------
@admin.register(Workspace)
class WorkspaceAdmin(WorkspaceScopedAdmin):
    workspace_lookup = "pk"
    list_display = (
        "slug",
        "name",
        "policy_budget_chars",
        "member_count",
        "agent_count",
        "domain_count",
        "fact_count",
        "created_at",
    )
    search_fields = ("slug", "name")
    ordering = ("slug",)
    readonly_fields = ("created_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .annotate(
                member_count=count_related(Workspace, "memberships"),
                agent_count=count_related(Workspace, "agents"),
                domain_count=count_related(Workspace, "domains"),
                fact_count=count_related(Workspace, "facts"),
            )
        )

    member_count = count_column("member_count", "members")
    agent_count = count_column("agent_count", "agents")
    domain_count = count_column("domain_count", "domains")
    fact_count = count_column("fact_count", "facts")

    # A workspace created by someone who is not a member would vanish from their own view.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Workspace | None = None) -> bool:
        return request.user.is_superuser

    # The policy budget bounds what every agent's dispatch carries: only the workspace's admins
    # (and superusers) change a workspace; other members see it.
    def has_change_permission(self, request: HttpRequest, obj: Workspace | None = None) -> bool:
        if not super().has_change_permission(request, obj):
            return False
        user: Any = request.user
        if obj is None or user.is_superuser:
            return True
        return WorkspaceMembership.objects.filter(user=user, workspace=obj, is_admin=True).exists()

    def save_model(self, request: HttpRequest, obj: Workspace, form: forms.ModelForm, change: bool) -> None:
        by = Actor.of_user(request.user)
        if not change:
            # Created by the service so the creation is audited; the form's other values follow.
            adopt_saved(obj, get_or_create_workspace(slug=obj.slug, name=obj.name, by=by))
        if "policy_budget_chars" in form.changed_data:
            set_policy_budget(workspace=obj, chars=obj.policy_budget_chars, by=by)  # audited, under the row lock
        super().save_model(request, obj, form, change)


@admin.register(WorkspaceMembership)
class WorkspaceMembershipAdmin(WorkspaceScopedAdmin):
    administered = True
    list_display = ("user", "workspace", "is_admin")
    list_filter = ("is_admin", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("user", "workspace")
    search_fields = ("user__username", "user__email", "workspace__slug")
    ordering = ("workspace__slug", "user__username")
    raw_id_fields = ("user",)
    autocomplete_fields = ("workspace",)
    str_select_related = ("user", "workspace")

    def get_readonly_fields(self, request: HttpRequest, obj: WorkspaceMembership | None = None) -> tuple[str, ...]:
        # Nobody raises their own rights: one's own membership is read-only (another admin or a
        # superuser changes it).
        if obj is not None and obj.user_id == request.user.pk and not request.user.is_superuser:
            return ("user", "workspace", "is_admin")
        return tuple(super().get_readonly_fields(request, obj))

    def save_model(self, request: HttpRequest, obj: WorkspaceMembership, form: forms.ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        record_event(
            actor=Actor.of_user(request.user),
            verb="membership.changed" if change else "membership.created",
            workspace_id=obj.workspace_id,
            target=obj,
            detail={"user": obj.user_id, "is_admin": obj.is_admin, "changed": list(form.changed_data)},
        )

    def delete_model(self, request: HttpRequest, obj: WorkspaceMembership) -> None:
        record_event(
            actor=Actor.of_user(request.user),
            verb="membership.deleted",
            workspace_id=obj.workspace_id,
            target=obj,
            detail={"user": obj.user_id, "is_admin": obj.is_admin},
        )
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for obj in queryset:
            if access.may(request.user, "administer", obj):
                self.delete_model(request, obj)


@admin.register(Repo)
class RepoAdmin(WorkspaceScopedAdmin):
    administered = True
    list_display = ("slug", "name", "workspace", "domain_count", "created_at")
    list_filter = (("workspace", admin.RelatedOnlyFieldListFilter),)
    list_select_related = ("workspace",)
    search_fields = ("slug", "name", "workspace__slug")
    ordering = ("workspace__slug", "slug")
    autocomplete_fields = ("workspace",)
    readonly_fields = ("created_at",)
    str_select_related = ("workspace",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(domain_count=count_related(Repo, "domains"))

    domain_count = count_column("domain_count", "domains")

    def get_readonly_fields(self, request: HttpRequest, obj: Repo | None = None) -> tuple[str, ...]:
        # Moving a repo would carry its domains and facts into another workspace.
        return ("workspace", "created_at") if obj else ("created_at",)

    def save_model(self, request: HttpRequest, obj: Repo, form: forms.ModelForm, change: bool) -> None:
        if not change:
            adopt_saved(obj, get_or_create_repo(workspace=obj.workspace, slug=obj.slug, by=Actor.of_user(request.user)))
        super().save_model(request, obj, form, change)


@admin.register(Role)
class RoleAdmin(WorkspaceScopedAdmin):
    administered = True
    list_display = ("name", "workspace", "description", "agent_count")
    list_filter = (("workspace", admin.RelatedOnlyFieldListFilter),)
    list_select_related = ("workspace",)
    search_fields = ("name", "description", "workspace__slug")
    ordering = ("workspace__slug", "name")
    autocomplete_fields = ("workspace",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(agent_count=count_related(Role, "agents"))

    agent_count = count_column("agent_count", "agents")

    def get_readonly_fields(self, request: HttpRequest, obj: Role | None = None) -> tuple[str, ...]:
        # Grants and agents hang off the role inside its workspace.
        return ("workspace",) if obj else ()

    def save_model(self, request: HttpRequest, obj: Role, form: forms.ModelForm, change: bool) -> None:
        if not change:
            adopt_saved(obj, get_or_create_role(workspace=obj.workspace, name=obj.name, by=Actor.of_user(request.user)))
        super().save_model(request, obj, form, change)


# --- Domains and grants (SPEC §2) -----------------------------------------------------------
@admin.register(MemoryDomain)
class MemoryDomainAdmin(GuardedModelAdminMixin, WorkspaceScopedAdmin):  # type: ignore[misc]
    """Domains, with guardian's object permissions page to give reviewers `review_domain` per domain."""

    administered = True

    list_display = ("label", "workspace", "repo", "fact_count", "policy_count", "created_at")

    # guardian's pages check only the model-wide change permission: reviewer permissions of a
    # domain are managed by an admin of its workspace (memory.access), and each change is audited.
    def _administered_domain(self, request: HttpRequest, object_pk: Any) -> MemoryDomain:
        domain = MemoryDomain.objects.filter(pk=object_pk).first() if str(object_pk).isdecimal() else None
        if domain is None or not access.may(request.user, "view", domain):
            raise Http404("No such domain.")
        if not access.may(request.user, "administer", domain):
            raise PermissionDenied("Only an admin of the domain's workspace manages its reviewers.")
        return domain

    def obj_perms_manage_view(self, request: HttpRequest, object_pk: Any) -> HttpResponse:
        self._administered_domain(request, object_pk)
        return super().obj_perms_manage_view(request, object_pk)

    def obj_perms_manage_user_view(self, request: HttpRequest, object_pk: Any, user_id: Any) -> HttpResponse:
        domain = self._administered_domain(request, object_pk)
        response = super().obj_perms_manage_user_view(request, object_pk, user_id)
        self._audit_permission_change(request, response, domain, {"user": str(user_id)})
        return response

    def obj_perms_manage_group_view(self, request: HttpRequest, object_pk: Any, group_id: Any) -> HttpResponse:
        domain = self._administered_domain(request, object_pk)
        response = super().obj_perms_manage_group_view(request, object_pk, group_id)
        self._audit_permission_change(request, response, domain, {"group": str(group_id)})
        return response

    @staticmethod
    def _audit_permission_change(
        request: HttpRequest, response: HttpResponse, domain: MemoryDomain, who: dict[str, str]
    ) -> None:
        """guardian saves and redirects; a redirect after a POST is a change worth auditing."""
        if request.method == "POST" and response.status_code in (301, 302):
            record_event(
                actor=Actor.of_user(request.user),
                verb="reviewer_permission.changed",
                workspace_id=domain.workspace_id,
                target=domain,
                detail={**who, "permissions": request.POST.getlist("permissions")},
            )

    list_filter = (("workspace", admin.RelatedOnlyFieldListFilter), ("repo", admin.EmptyFieldListFilter))
    list_select_related = ("workspace", "repo__workspace")  # the repo column prints workspace/slug
    search_fields = ("name", "description", "repo__slug", "workspace__slug")
    ordering = ("workspace__slug", "repo__slug", "name")
    autocomplete_fields = ("workspace", "repo")
    str_select_related = ("workspace", "repo")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .annotate(
                fact_count=count_related(MemoryDomain, "facts"), policy_count=count_related(MemoryDomain, "policies")
            )
        )

    @admin.display(description="domain", ordering="name")
    def label(self, obj: MemoryDomain) -> str:
        return obj.label

    fact_count = count_column("fact_count", "facts")
    policy_count = count_column("policy_count", "policies")

    def get_readonly_fields(self, request: HttpRequest, obj: MemoryDomain | None = None) -> tuple[str, ...]:
        # Facts and grants belong to the domain where it is: its scope is fixed at creation.
        return ("workspace", "repo", "created_at") if obj else ("created_at",)

    def save_model(self, request: HttpRequest, obj: MemoryDomain, form: forms.ModelForm, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        # The service also gives `write` to every existing role (SPEC §2) and audits the creation.
        domain = create_domain(
            workspace=obj.workspace,
            repo=obj.repo,
            name=obj.name,
            description=obj.description,
            by=Actor.of_user(request.user),
        )
        adopt_saved(obj, domain)


@admin.register(AccessGrant)
class AccessGrantAdmin(WorkspaceScopedAdmin):
    administered = True
    workspace_lookup = "role__workspace"
    list_display = ("role", "domain_label", "workspace", "level", "updated_at")
    list_filter = ("level", ("role__workspace", admin.RelatedOnlyFieldListFilter), DomainFilter)
    list_select_related = ("role__workspace", "domain__repo")
    search_fields = ("role__name", "domain__name", "domain__repo__slug")
    ordering = ("role__workspace__slug", "role__name", "domain__name")
    autocomplete_fields = ("role", "domain")
    str_select_related = ("role", "domain__repo")

    @admin.display(description="domain", ordering="domain__name")
    def domain_label(self, obj: AccessGrant) -> str:
        return obj.domain.label

    @admin.display(description="workspace", ordering="role__workspace__slug")
    def workspace(self, obj: AccessGrant) -> Workspace:
        return obj.role.workspace

    def get_readonly_fields(self, request: HttpRequest, obj: AccessGrant | None = None) -> tuple[str, ...]:
        # A grant is the level of one (role, domain) pair; another pair is another grant.
        return ("role", "domain", "updated_at") if obj else ("updated_at",)

    # No row and `read` mean the same (SPEC §2); deleting would change access without an audit
    # event, so lower or raise the level instead.
    def has_delete_permission(self, request: HttpRequest, obj: AccessGrant | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: AccessGrant, form: forms.ModelForm, change: bool) -> None:
        grant = set_grant(role=obj.role, domain=obj.domain, level=obj.level, by=Actor.of_user(request.user))
        adopt_saved(obj, grant)


@admin.register(DecayProfile)
class DecayProfileAdmin(admin.ModelAdmin):
    """Global Weibull curves (SPEC §3): every staff member may read them, only superusers tune them."""

    list_display = ("memory_type", "scale_days", "shape", "half_life", "stale_after_days")
    ordering = ("memory_type",)

    @admin.display(description="half-life (days)")
    def half_life(self, obj: DecayProfile) -> str:
        # The age at which weight exp(-(t/λ)^k) falls to 0.5: easier to judge than λ and k.
        return f"{obj.scale_days * math.log(2) ** (1 / obj.shape):.0f}"

    def has_view_permission(self, request: HttpRequest, obj: DecayProfile | None = None) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: DecayProfile | None = None) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: DecayProfile | None = None) -> bool:
        return request.user.is_superuser


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
    list_filter = (
        "status",
        "memory_type",
        "veracity",
        LiveFilter,
        "validated_by",
        "human_edited",
        ("workspace", admin.RelatedOnlyFieldListFilter),
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
    actions = ("archive_selected",)
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
                    "created_by_agent",
                    "created_by_user",
                    "source_observations",
                    "embedded_at",
                )
            },
        ),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The vector and tsvector are large and never displayed.
        return super().get_queryset(request).defer("embedding", "search_vector")

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
        ("workspace", admin.RelatedOnlyFieldListFilter),
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
            .defer(*(f"{side}__{f}" for side in ("existing", "proposed") for f in ("embedding", "search_vector")))
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


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    """Consolidate and harmonize runs, one unfinished per scope (memory.services.jobs): read-only."""

    list_display = ("id", "kind", "scope", "state", "workspace", "requested_by_agent", "created_at", "finished_at")
    list_filter = ("kind", "state", ("workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("workspace", "requested_by_agent__role")
    search_fields = ("task_id", "scope")
    ordering = ("-created_at", "-id")
    show_full_result_count = False


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
        return super().get_queryset(request).defer("fact__embedding", "fact__search_vector", "fact__content")

    @admin.display(description="fact", ordering="fact_id")
    def fact_link(self, obj: FactMention) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id} {excerpt(obj.fact.topic, 60)}")

    @admin.display(description="text")
    def text_excerpt(self, obj: FactMention) -> str:
        return excerpt(obj.text, 80)


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
            .defer("fact__embedding", "fact__search_vector", "fact__content")
        )

    @admin.display(description="episode", ordering="episode_id")
    def episode_link(self, obj: EpisodeFact) -> SafeString | str:
        return admin_link(Episode, obj.episode_id, obj.episode)

    @admin.display(description="fact", ordering="fact_id")
    def fact_link(self, obj: EpisodeFact) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id} {excerpt(obj.fact.topic, 60)}")


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


# --- Promotion gate (SPEC §7) ------------------------------------------------------------------
GATE_STYLE = {"passed": ("✓", "#1a7f37"), "failed": ("✗", "#cf222e"), "pending": ("…", "#9a6700")}


def gate_badge(gate: dict[str, str]) -> SafeString:
    """A gate as a coloured mark with its status; the reason is the hover title."""
    mark, colour = GATE_STYLE.get(gate["status"], ("?", "inherit"))
    return format_html(
        '<span title="{}" style="color:{};white-space:nowrap">{} {}</span>',
        gate["reason"],
        colour,
        mark,
        gate["status"],
    )


def _gate_column(gate: str, description: str) -> Callable[[Any, Candidate], SafeString]:
    """A changelist column showing one gate of the candidate's scorecard as a badge."""

    @admin.display(description=description)
    def column(self: Any, obj: Candidate) -> SafeString:
        return gate_badge(self._gates(obj)[gate])

    column.__name__ = f"gate_{gate}"
    return column


def scorecard_table(scorecard: dict[str, dict[str, str]]) -> SafeString | str:
    if not scorecard:
        return EMPTY
    rows = format_html_join(
        "",
        "<tr><th>{}</th><td>{}</td><td>{}</td></tr>",
        ((n, gate_badge(g), g["reason"]) for n, g in scorecard.items()),
    )
    return format_html("<table>{}</table>", rows)


class ReplayInline(admin.TabularInline):
    model = Replay
    extra = 0
    can_delete = False
    fields = ("created_at", "probe", "passed", "details", "recorded_by_label", "standing")
    readonly_fields = fields
    ordering = ("created_at", "id")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("candidate", "recorded_by_agent")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="counts as evidence?")
    def standing(self, obj: Replay) -> str:
        standing = promotion.replay_standing(obj.candidate, obj)
        return f"{'yes' if standing.counts else 'no'}: {standing.reason}"


class PromotionDecisionInline(admin.TabularInline):
    model = PromotionDecision
    extra = 0
    can_delete = False
    fields = ("created_at", "decision", "decided_by_label", "auto", "write", "fact_link", "reason", "scorecard_view")
    readonly_fields = fields
    ordering = ("created_at", "id")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="fact")
    def fact_link(self, obj: PromotionDecision) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id}")

    @admin.display(description="scorecard")
    def scorecard_view(self, obj: PromotionDecision) -> SafeString | str:
        return scorecard_table(obj.scorecard)


@admin.register(Candidate)
class CandidateAdmin(WorkspaceScopedAdmin):
    """Promotion candidates with their gates. Rows change only through the gate's services: the
    actions approve (a person's approval), deny, dry-run promote (writes nothing) and promote."""

    list_display = (
        "id",
        "candidate_id",
        "memory_excerpt",
        "domain_label",
        "failure_class",
        "promotion_status",
        "requires_human_review",
        "gate_failure_class",
        "gate_evidence",
        "gate_provenance",
        "gate_scope",
        "gate_human_review",
        "fact_link",
        "created_at",
    )
    list_display_links = ("id", "candidate_id")
    list_filter = (
        "promotion_status",
        "failure_class",
        "requires_human_review",
        "origin",
        ("workspace", admin.RelatedOnlyFieldListFilter),
        DomainFilter,
    )
    list_select_related = ("workspace", "domain__repo", "human_approved_by")
    search_fields = ("candidate_id", "topic", "proposed_memory", "failure_type")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    inlines = (ReplayInline, PromotionDecisionInline)
    actions = ("approve_selected", "deny_selected", "dry_run_selected", "promote_selected")
    fieldsets = (
        (None, {"fields": ("workspace", "domain", "topic", "candidate_id", "schema_version", "proposed_memory")}),
        (
            "Failure",
            {"fields": ("failure_class", "failure_type", "root_cause_summary", "source_action_ids", "evidence_refs")},
        ),
        ("Scope", {"fields": ("applies_to", "does_not_apply_to", "verification_probe_candidate", "memory_type")}),
        (
            "Gate",
            {
                "fields": (
                    "gates_view",
                    "promotion_status",
                    "requires_human_review",
                    "origin",
                    "human_approved_by",
                    "human_approved_at",
                    "human_approval_note",
                    "fact_link",
                )
            },
        ),
        ("Provenance", {"fields": ("submitted_by_agent", "submitted_by_label", "created_at", "updated_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        replays = Replay.objects.select_related("recorded_by_agent")  # gate standing reads the recorder
        return super().get_queryset(request).prefetch_related(Prefetch("replays", queryset=replays))

    def get_readonly_fields(self, request: HttpRequest, obj: Candidate | None = None) -> list[str]:
        return [name for _, options in self.fieldsets for name in options["fields"]]  # type: ignore[misc]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # candidates come from agents (POST candidates/) or runs, through submit_candidate

    def has_delete_permission(self, request: HttpRequest, obj: Candidate | None = None) -> bool:
        return False  # decisions and replays are the audit trail

    def save_model(self, request: HttpRequest, obj: Candidate, form: forms.ModelForm, change: bool) -> None:
        return  # every field is read-only: state moves only through the actions

    def _gates(self, obj: Candidate) -> dict[str, dict[str, str]]:
        cached = getattr(obj, "_admin_gates", None)
        if cached is None:
            cached = promotion.compute_gates(obj)
            obj._admin_gates = cached  # type: ignore[attr-defined]
        return cached

    @admin.display(description="proposed memory")
    def memory_excerpt(self, obj: Candidate) -> str:
        return excerpt(obj.proposed_memory)

    @admin.display(description="domain", ordering="domain__name")
    def domain_label(self, obj: Candidate) -> str:
        return obj.domain.label

    gate_failure_class = _gate_column("failure_class", "class gate")
    gate_evidence = _gate_column("evidence", "evidence")
    gate_provenance = _gate_column("provenance", "provenance")
    gate_scope = _gate_column("scope", "scope")
    gate_human_review = _gate_column("human_review", "human review")

    @admin.display(description="fact")
    def fact_link(self, obj: Candidate) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id}")

    @admin.display(description="gates now")
    def gates_view(self, obj: Candidate) -> SafeString | str:
        return scorecard_table(self._gates(obj))

    def _each(self, request: HttpRequest, queryset: QuerySet, act: Any, done_verb: str) -> None:
        """Run `act(candidate)` on each selected candidate in pk order; report refusals by name."""
        done = 0
        for candidate in queryset.select_related(None).order_by("pk"):
            if not access.may(request.user, "decide", candidate):  # re-checked per row
                self.message_user(request, f"{candidate.candidate_id}: not yours to decide.", messages.WARNING)
                continue
            try:
                message = act(candidate)
            except EngramError as exc:
                self.message_user(request, f"{candidate.candidate_id}: {exc.detail}", messages.WARNING)
                continue
            done += 1
            if message:
                self.message_user(request, f"{candidate.candidate_id}: {message}", messages.INFO)
        if done:
            self.message_user(request, f"{done_verb} {done} candidate(s).", messages.SUCCESS)

    @admin.action(description="Approve selected candidates (as human approval)", permissions=["change"])
    def approve_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)

        def act(candidate: Candidate) -> str:
            approved = promotion.approve_candidate(candidate=candidate, by=by, note="approved in the admin")
            blocking = promotion.failing(promotion.compute_gates(approved, write=True, auto=False))
            return f"approved; still open: {', '.join(blocking)}" if blocking else "approved; every gate passes"

        self._each(request, queryset, act, "Approved")

    @admin.action(description="Deny selected candidates", permissions=["change"])
    def deny_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        self._each(
            request,
            queryset,
            lambda c: promotion.deny(candidate=c, by=by, reason=f"Denied in the admin by {by.label}.") and "",
            "Denied",
        )

    @admin.action(description="Dry-run promote selected candidates (writes nothing)", permissions=["change"])
    def dry_run_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        self._each(request, queryset, lambda c: promotion.promote(candidate=c, by=by, write=False).reason, "Dry-ran")

    @admin.action(
        description="Promote selected candidates (write the fact when every gate passes)", permissions=["change"]
    )
    def promote_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        self._each(request, queryset, lambda c: promotion.promote(candidate=c, by=by, write=True).reason, "Decided")


@admin.register(Replay)
class ReplayAdmin(ReadOnlyAdmin):
    workspace_lookup = "candidate__workspace"
    list_display = ("id", "candidate", "probe", "passed", "recorded_by_label", "created_at")
    list_filter = ("passed", ("candidate__workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("candidate",)
    search_fields = ("probe", "candidate__candidate_id")
    ordering = ("-created_at", "-id")
    show_full_result_count = False


@admin.register(PromotionDecision)
class PromotionDecisionAdmin(ReadOnlyAdmin):
    """Every decision with the scorecard it was made on: read-only."""

    workspace_lookup = "candidate__workspace"
    list_display = ("id", "candidate", "decision", "decided_by_label", "auto", "write", "fact_link", "created_at")
    list_filter = ("decision", "auto", ("candidate__workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("candidate",)
    search_fields = ("candidate__candidate_id", "decided_by_label", "reason")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    fields = (
        "candidate",
        "decision",
        "decided_by_label",
        "auto",
        "write",
        "fact_link",
        "outcome",
        "reason",
        "scorecard_view",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description="fact")
    def fact_link(self, obj: PromotionDecision) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id}")

    @admin.display(description="scorecard")
    def scorecard_view(self, obj: PromotionDecision) -> SafeString | str:
        return scorecard_table(obj.scorecard)


# --- People: nobody raises their own rights through Engram (issue 16) ------------------------
_User = get_user_model()
if admin.site.is_registered(_User):
    _BaseUserAdmin = type(admin.site.get_model_admin(_User))

    class EngramUserAdmin(_BaseUserAdmin):  # type: ignore[valid-type, misc]
        """Django's user admin, where only superusers set staff/superuser status, groups and model
        permissions: a staff account holding `change_user` cannot raise anyone's rights (its own
        included). Workspace rights are memberships (WorkspaceMembershipAdmin)."""

        RIGHTS = ("is_superuser", "is_staff", "groups", "user_permissions")

        def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
            fields = tuple(super().get_readonly_fields(request, obj))
            return fields if request.user.is_superuser else fields + self.RIGHTS

    admin.site.unregister(_User)
    admin.site.register(_User, EngramUserAdmin)
