"""Django's user and group admins, narrowed so nobody raises their own rights or reaches someone
who holds more than they do (issues 16 and 32).

Who may change whom is decided in memory.access (manageable_users, manageable_groups,
grantable_permissions): a person sees in these admins only the people and groups they may change
(and their own groups, read-only), so the change, password, delete and history pages of anyone
else answer 404, and the bulk actions never reach them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import router, transaction
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse

from memory import access
from memory.actors import Actor
from memory.audit import record_event
from memory.models import WorkspaceMembership

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http import HttpRequest, HttpResponse


class _UnknownIs404:
    """Rows outside the admin's queryset are not known: their pages answer 404 (Django would
    redirect to the index), so a refused page never looks like a page that saved."""

    def _known_or_404(self, request: HttpRequest, object_id: str | None) -> None:
        if object_id is not None and self.get_object(request, unquote(object_id)) is None:  # type: ignore[attr-defined]
            raise Http404("No such row, or not one you may manage.")

    def change_view(self, request: HttpRequest, object_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        self._known_or_404(request, object_id)
        return super().change_view(request, object_id, *args, **kwargs)  # type: ignore[misc]

    def delete_view(self, request: HttpRequest, object_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        self._known_or_404(request, object_id)
        return super().delete_view(request, object_id, *args, **kwargs)  # type: ignore[misc]

    def history_view(self, request: HttpRequest, object_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        self._known_or_404(request, object_id)
        return super().history_view(request, object_id, *args, **kwargs)  # type: ignore[misc]


class VisibleGroupsFilter(admin.RelatedFieldListFilter):
    """The user list's group filter, naming only the groups the person sees (access.visible_groups)."""

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> Any:
        ordering = self.field_admin_ordering(field, request, model_admin)
        visible = access.visible_groups(request.user).values("pk")
        return field.get_choices(include_blank=False, ordering=ordering, limit_choices_to={"pk__in": visible})


# Fields of a person whose old and new values a `user.changed` event records (the others by name).
AUDITED_VALUES = ("username", "is_active")

# --- People: nobody changes someone who holds more than they do (issues 16, 32) ----------------
_User = get_user_model()
if admin.site.is_registered(_User):
    _BaseUserAdmin = type(admin.site.get_model_admin(_User))

    class EngramUserAdmin(_UnknownIs404, _BaseUserAdmin):  # type: ignore[valid-type, misc]
        """Django's user admin, where a person lists and changes only the people they manage
        (access.manageable_users: themselves and the people of the workspaces they administer who
        hold no right they lack), and only superusers set the rights fields (staff and superuser
        status, groups, model permissions). Workspace rights are memberships
        (WorkspaceMembershipAdmin)."""

        def get_queryset(self, request: HttpRequest) -> QuerySet:
            return super().get_queryset(request).filter(pk__in=access.manageable_users(request.user).values("pk"))

        def get_list_filter(self, request: HttpRequest) -> Any:
            return tuple(
                ("groups", VisibleGroupsFilter) if name == "groups" else name
                for name in super().get_list_filter(request)
            )

        def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
            fields = tuple(super().get_readonly_fields(request, obj))
            return fields if access.may_set_user_rights(request.user) else fields + access.USER_RIGHTS_FIELDS

        # The password page (user_change_password) asks has_change_permission with the person too.
        def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return super().has_change_permission(request, obj) and (
                obj is None or access.may_manage_user(request.user, obj)
            )

        def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return super().has_delete_permission(request, obj) and (
                obj is None or access.may_manage_user(request.user, obj)
            )

        def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
            """The bulk action: only the people the person manages, each deletion audited (user.deleted)."""
            with transaction.atomic(using=router.db_for_write(self.model)):
                doomed = queryset.filter(pk__in=access.manageable_users(request.user).values("pk"))
                for person in doomed:
                    self._audit_deletion(request, person)
                super().delete_queryset(request, doomed)

        def delete_model(self, request: HttpRequest, obj: Any) -> None:
            self._audit_deletion(request, obj)  # delete_view's transaction holds both
            super().delete_model(request, obj)

        def _audit_deletion(self, request: HttpRequest, person: Any) -> None:
            record_event(
                actor=Actor.of_user(request.user),
                verb="user.deleted",
                workspace_id=None,
                target=person,
                detail={"username": person.get_username()},
            )

        def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
            super().save_model(request, obj, form, change)
            if not change:
                record_event(
                    actor=Actor.of_user(request.user),
                    verb="user.created",
                    workspace_id=None,
                    target=obj,
                    detail={"username": obj.get_username()},
                )
            elif form.changed_data:
                record_event(
                    actor=Actor.of_user(request.user),
                    verb="user.changed",
                    workspace_id=None,
                    target=obj,
                    detail={
                        "changed": list(form.changed_data),
                        **{
                            name: [form.initial.get(name), form.cleaned_data.get(name)]
                            for name in AUDITED_VALUES
                            if name in form.changed_data
                        },
                    },
                )

        def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> HttpResponse:
            """Django's password page, audited as `manage.py set_password` is (user.password_set),
            in the transaction that sets it."""
            with transaction.atomic(using=router.db_for_write(self.model)):
                target = self.get_object(request, unquote(id))
                response = super().user_change_password(request, id, form_url)
                if target is not None and request.method == "POST":
                    after = self.model._default_manager.get(pk=target.pk)
                    if after.password != target.password:
                        usable = after.has_usable_password()
                        record_event(
                            actor=Actor.of_user(request.user),
                            verb="user.password_set",
                            workspace_id=None,
                            target=after,
                            detail={} if usable else {"usable": False},
                        )
            return response

        def response_add(self, request: HttpRequest, obj: Any, post_url_continue: str | None = None) -> HttpResponse:
            """Someone just created belongs to no workspace yet, so is nobody's but a superuser's to
            manage: their creator is sent on to add them to a workspace instead of to a 404."""
            if IS_POPUP_VAR in request.POST or access.may_manage_user(request.user, obj):
                return super().response_add(request, obj, post_url_continue)
            self.message_user(
                request,
                f"{obj} was added. Make them a member of a workspace you administer to manage them.",
                messages.SUCCESS,
            )
            if self.admin_site.get_model_admin(WorkspaceMembership).has_add_permission(request):
                url = reverse(f"{self.admin_site.name}:memory_workspacemembership_add")
                return HttpResponseRedirect(f"{url}?{urlencode({'user': obj.pk})}")
            return HttpResponseRedirect(reverse(f"{self.admin_site.name}:index"))

    admin.site.unregister(_User)
    admin.site.register(_User, EngramUserAdmin)


# --- Groups: nobody gives a group a permission they do not hold (issue 32) --------------------
if admin.site.is_registered(Group):
    _BaseGroupAdmin = type(admin.site.get_model_admin(Group))

    class EngramGroupAdmin(_UnknownIs404, _BaseGroupAdmin):  # type: ignore[valid-type, misc]
        """Django's group admin, where a person sees the groups they manage (every permission
        theirs, every member someone they manage: access.manageable_groups) and, read-only, their
        own; the permissions offered, and accepted on save, are those they hold."""

        def get_queryset(self, request: HttpRequest) -> QuerySet:
            return super().get_queryset(request).filter(pk__in=access.visible_groups(request.user).values("pk"))

        def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return super().has_change_permission(request, obj) and (
                obj is None or access.may_manage_group(request.user, obj)
            )

        def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return super().has_delete_permission(request, obj) and (
                obj is None or access.may_manage_group(request.user, obj)
            )

        def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
            super().delete_queryset(
                request, queryset.filter(pk__in=access.manageable_groups(request.user).values("pk"))
            )

        def formfield_for_manytomany(self, db_field: Any, request: Any = None, **kwargs: Any) -> Any:
            if db_field.name == "permissions" and request is not None:
                kwargs["queryset"] = access.grantable_permissions(request.user)
            return super().formfield_for_manytomany(db_field, request, **kwargs)

        def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
            base = super().get_form(request, obj, change, **kwargs)
            user = request.user

            class GroupForm(base):  # type: ignore[valid-type, misc]
                """The save is refused, whatever the widget offered, when a permission is not the
                person's own."""

                def clean_permissions(self) -> Any:
                    chosen = self.cleaned_data.get("permissions")
                    if chosen is not None and not access.may_grant_permissions(user, chosen):
                        raise ValidationError(
                            "You may give a group only permissions you hold yourself.", code="not_yours"
                        )
                    return chosen

            return GroupForm

    admin.site.unregister(Group)
    admin.site.register(Group, EngramGroupAdmin)
