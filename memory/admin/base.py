"""Shared pieces of the memory admin: workspace scoping (SPEC §1), forms and display helpers.

Non-superusers only ever see and pick rows of the workspaces they are members of
(`WorkspaceScopedAdmin`). Writes with rules or an audit trail go through memory.services; list
pages select their relations up front so they stay free of N+1 queries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.contrib.admin.exceptions import NotRegistered
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import Http404
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from memory import access
from memory.models import MemoryDomain, Workspace

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


def openable(request: HttpRequest, wanted: dict[type[models.Model], set[int]]) -> set[tuple[type[models.Model], int]]:
    """The (model, id) pairs among `wanted` whose admin change page the person may open: a
    registered admin that lets them view or change the model, and the row within that admin's
    scope. One query for every model at once (none for a superuser, who may open every row)."""
    checks: list[tuple[type[models.Model], QuerySet]] = []
    for model, ids in wanted.items():
        model_admin = admin.site._registry.get(model)
        ids = {pk for pk in ids if pk is not None}
        if not ids or model_admin is None or not model_admin.has_view_or_change_permission(request):
            continue
        checks.append((model, model_admin.get_queryset(request).filter(pk__in=ids)))
    if access.is_superuser(request.user):
        return {(model, pk) for model, qs in checks for pk in wanted[model] if pk is not None}
    if not checks:
        return set()
    parts = [qs.order_by().annotate(_kind=Value(n)).values_list("_kind", "pk") for n, (_, qs) in enumerate(checks)]
    rows = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    return {(checks[kind][0], pk) for kind, pk in rows}


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
        if not self.administered or access.is_superuser(request.user):
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

    # --- Links to other admin pages: only those the person may open (issue 32) ---------------
    def link_targets(self, obj: Any) -> list[tuple[type[models.Model], int | None]]:
        """(model, id) of the rows this row's columns link to; their links are checked per page."""
        return []

    def _mark_openable(self, request: HttpRequest, rows: list[Any]) -> None:
        wanted: dict[type[models.Model], set[int]] = {}
        for row in rows:
            for model, pk in self.link_targets(row):
                if pk is not None:
                    wanted.setdefault(model, set()).add(pk)
        found = openable(request, wanted)
        for row in rows:
            row._engram_openable = found

    def guarded_link(self, obj: Any, model: type[models.Model], pk: int | None, text: object) -> SafeString | str:
        """A link to `model` #pk's change page when the person may open it, else the text alone."""
        if pk is None:
            return EMPTY
        if (model, pk) in getattr(obj, "_engram_openable", set()):
            return admin_link(model, pk, text)
        return str(text)

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        if type(self).link_targets is not WorkspaceScopedAdmin.link_targets:
            self._mark_openable(request, list(changelist.result_list))
        return changelist

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is not None and type(self).link_targets is not WorkspaceScopedAdmin.link_targets:
            self._mark_openable(request, [obj])
        return obj

    def _get_obj_does_not_exist_redirect(self, request: HttpRequest, opts: Any, object_id: str) -> Any:
        """A row outside what the person may see is not found (404), as on the review pages:
        not a redirect that tells "perhaps it was deleted"."""
        raise Http404(f"No {opts.verbose_name} with this id.")

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
