"""`{% nav_workspaces as workspaces %}`: the top bar's per-workspace links (review.selectors_activity).
A tag rather than a context processor, so htmx partials (which never render base.html) pay nothing."""

from __future__ import annotations

from typing import Any

from django import template

from memory import access
from review.selectors_activity import NavWorkspace, nav_workspaces

register = template.Library()


@register.simple_tag(takes_context=True, name="nav_workspaces")
def nav_workspaces_tag(context: Any) -> list[NavWorkspace]:
    request = context.get("request")
    return nav_workspaces(getattr(request, "user", None))


@register.filter(name="opens_admin")
def opens_admin(user: Any) -> bool:
    """`{% if user|opens_admin %}`: the admin link, for the people the admin site lets in."""
    return access.is_staff(user)


@register.simple_tag(takes_context=True, name="may_record_decisions")
def may_record_decisions(context: Any, workspace: Any) -> bool:
    """`{% may_record_decisions workspace as show %}`: the meeting-decisions tab, only for the people
    the page would let record (memory.services.decisions.check_may_record)."""
    from memory.actors import Actor, ActorRequired
    from memory.errors import InsufficientPermission
    from memory.services.decisions import check_may_record

    request = context.get("request")
    try:
        check_may_record(workspace=workspace, by=Actor.of_user(getattr(request, "user", None)))
    except (ActorRequired, InsufficientPermission):
        return False
    return True
