"""Admin for workspaces, memberships, repos, roles, domains and grants (SPEC §1, §2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.contrib.admin.widgets import ForeignKeyRawIdWidget
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404, HttpResponse
from guardian.admin import GuardedModelAdminMixin

from memory import access
from memory.actors import Actor
from memory.admin.base import DomainFilter, WorkspaceScopedAdmin, adopt_saved, count_column, count_related
from memory.admin.portability import download_export
from memory.audit import record_event
from memory.models import AccessGrant, MemoryDomain, Repo, Role, Workspace, WorkspaceMembership
from memory.services.policies import set_policy_budget
from memory.services.tenancy import (
    create_domain,
    get_or_create_repo,
    get_or_create_role,
    get_or_create_workspace,
    set_grant,
)

if TYPE_CHECKING:
    from django.http import HttpRequest


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
    actions = [download_export]

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
        return access.is_superuser(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: Workspace | None = None) -> bool:
        return access.is_superuser(request.user)

    # The policy budget bounds what every agent's dispatch carries: only the workspace's admins
    # (and superusers) change a workspace; other members see it.
    def has_change_permission(self, request: HttpRequest, obj: Workspace | None = None) -> bool:
        if not super().has_change_permission(request, obj):
            return False
        return obj is None or access.is_workspace_admin(request.user, obj)

    def save_model(self, request: HttpRequest, obj: Workspace, form: forms.ModelForm, change: bool) -> None:
        by = Actor.of_user(request.user)
        if not change:
            # Created by the service so the creation is audited; the form's other values follow.
            adopt_saved(obj, get_or_create_workspace(slug=obj.slug, name=obj.name, by=by))
        if "policy_budget_chars" in form.changed_data:
            set_policy_budget(workspace=obj, chars=obj.policy_budget_chars, by=by)  # audited, under the row lock
        super().save_model(request, obj, form, change)


class _AddableRawIdWidget(ForeignKeyRawIdWidget):
    """The person id box, naming only people who may be added: another id typed in (or put in the
    address) is refused without telling whose it is."""

    def __init__(self, rel: Any, admin_site: Any, people: QuerySet, using: str | None = None) -> None:
        super().__init__(rel, admin_site, using=using)
        self.people = people

    def label_and_url_for_value(self, value: Any) -> tuple[str, str]:
        if not str(value).isdecimal() or not self.people.filter(pk=value).exists():
            return "", ""
        return super().label_and_url_for_value(value)


@admin.register(WorkspaceMembership)
class WorkspaceMembershipAdmin(WorkspaceScopedAdmin):
    """Memberships, written by the workspace's admins: a membership is changed or deleted only when
    its person is one they manage (access.may_manage_user), made only for people they may add
    (access.addable_members); the others are shown read-only (issue 32)."""

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
        if obj is not None and obj.user_id == request.user.pk and not access.is_superuser(request.user):
            return tuple(f.name for f in obj._meta.fields if f.editable and not f.primary_key)
        # A membership is one person in one workspace: another pair is another membership, added
        # (and checked) as such.
        if obj is not None:
            return (*super().get_readonly_fields(request, obj), "user", "workspace")
        return tuple(super().get_readonly_fields(request, obj))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name != "user":
            return super().formfield_for_foreignkey(db_field, request, **kwargs)
        people = kwargs["queryset"] = access.addable_members(request.user)
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if field is not None and isinstance(field.widget, ForeignKeyRawIdWidget):
            field.widget = _AddableRawIdWidget(field.widget.rel, self.admin_site, people, field.widget.db)
        return field

    # Demoting or removing someone who holds more than the admin (a superuser, an admin of another
    # workspace) is refused: the page shows their membership read-only.
    def has_change_permission(self, request: HttpRequest, obj: WorkspaceMembership | None = None) -> bool:
        return super().has_change_permission(request, obj) and (
            obj is None or access.may_manage_user(request.user, obj.user)
        )

    def has_delete_permission(self, request: HttpRequest, obj: WorkspaceMembership | None = None) -> bool:
        return super().has_delete_permission(request, obj) and (
            obj is None or access.may_manage_user(request.user, obj.user)
        )

    def save_model(self, request: HttpRequest, obj: WorkspaceMembership, form: forms.ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        record_event(
            actor=Actor.of_user(request.user),
            verb="membership.changed" if change else "membership.created",
            workspace_id=obj.workspace_id,
            target=obj,
            detail={**access.membership_rights(obj), "changed": list(form.changed_data)},
        )

    def delete_model(self, request: HttpRequest, obj: WorkspaceMembership) -> None:
        record_event(
            actor=Actor.of_user(request.user),
            verb="membership.deleted",
            workspace_id=obj.workspace_id,
            target=obj,
            detail=access.membership_rights(obj),
        )
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        manageable = access.manageable_users(request.user).values("pk")
        for obj in queryset.filter(user__in=manageable):
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

    # A reviewer permission is a right of its holder: given or taken only by someone who manages
    # that person (or every member of that group), as on the user and group admins (issue 32).
    def obj_perms_manage_user_view(self, request: HttpRequest, object_pk: Any, user_id: Any) -> HttpResponse:
        domain = self._administered_domain(request, object_pk)
        person = get_user_model()._default_manager.filter(pk=user_id).first() if str(user_id).isdecimal() else None
        if not access.may_manage_user(request.user, person):
            raise Http404("No such person, or not one you manage.")
        with transaction.atomic():
            response = super().obj_perms_manage_user_view(request, object_pk, user_id)
            self._audit_permission_change(request, response, domain, {"user": str(user_id)})
        return response

    def obj_perms_manage_group_view(self, request: HttpRequest, object_pk: Any, group_id: Any) -> HttpResponse:
        domain = self._administered_domain(request, object_pk)
        group = Group.objects.filter(pk=group_id).first() if str(group_id).isdecimal() else None
        if not access.may_manage_group(request.user, group):
            raise Http404("No such group, or not one you manage.")
        with transaction.atomic():
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
