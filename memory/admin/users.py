"""Django's user admin, narrowed so nobody raises their own rights through Engram (issue 16)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.auth import get_user_model

if TYPE_CHECKING:
    from django.http import HttpRequest

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
