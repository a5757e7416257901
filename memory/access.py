"""What a person may do: the one rule for people, as `visible_to(agent)` is for agents (issue 16).

Three actions, per workspace and per domain:

- `view`: see the rows. Workspace-level rows (observations, runs, memberships, grants, …) of
  every workspace the person is a member of; domain rows (facts, candidates, policies,
  conflicts) only of the domains they may `decide` — a member without any `review_domain`
  permission sees the workspace but none of its domains' memory (as the review pages always did).
- `decide`: approve, deny, edit, revalidate, deprecate domain rows.
- `administer`: change grants, memberships, agents and keys, layer mappings, reviewer
  permissions — workspace admins (`WorkspaceMembership.is_admin`) only.

Who holds what: a superuser everything; a workspace admin everything in that workspace; a member
holding guardian's object permission `memory.review_domain` on some domains `view` + `decide`
of those domains; anyone else nothing. Every surface (admin, pages, services) asks here:
`restrict(queryset, user, action)` for lists, `may(user, action, obj)` for one row.
"""

from __future__ import annotations

from typing import Any, Literal

from django.db import models
from django.db.models import BigIntegerField, Q, QuerySet
from django.db.models.functions import Cast
from guardian.models import GroupObjectPermission, UserObjectPermission

from memory.models import MemoryDomain, Workspace, WorkspaceMembership

Action = Literal["view", "decide", "administer"]
ACTIONS: tuple[str, ...] = ("view", "decide", "administer")
REVIEW_PERMISSION = "memory.review_domain"

# model label → (lookup to its workspace, lookup to its domain or None). Models not named here
# are read as (`workspace`, `domain` if the model has that field).
SCOPES: dict[str, tuple[str, str | None]] = {
    "memory.workspace": ("pk", None),
    "memory.memorydomain": ("workspace", "pk"),
    "memory.accessgrant": ("role__workspace", None),
    "memory.hotmemory": ("workspace", None),
    "memory.factmention": ("fact__workspace", "fact__domain"),
    "memory.episodefact": ("episode__workspace", "fact__domain"),
    "memory.replay": ("candidate__workspace", "candidate__domain"),
    "memory.promotiondecision": ("candidate__workspace", "candidate__domain"),
    "memory.workingmemory": ("agent__workspace", None),
    "agents.bankitem": ("run__workspace", None),
    "agents.intervention": ("run__workspace", None),
    "review.reviewitem": ("review__workspace", None),
}


def _active(user: Any) -> bool:
    return bool(user is not None and getattr(user, "is_authenticated", False) and getattr(user, "is_active", True))


def _is_superuser(user: Any) -> bool:
    return _active(user) and bool(getattr(user, "is_superuser", False))


def workspaces(user: Any, action: str = "view") -> QuerySet[Workspace]:
    """Workspaces where `user` may `action` something: members for view/decide, admins for administer."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    qs = Workspace.objects.all()
    if not _active(user):
        return qs.none()
    if _is_superuser(user):
        return qs
    memberships = WorkspaceMembership.objects.filter(user=user)
    if action == "administer":
        memberships = memberships.filter(is_admin=True)
    return qs.filter(pk__in=memberships.values("workspace_id"))


def domains(user: Any, action: str = "decide", workspace: Workspace | int | None = None) -> QuerySet[MemoryDomain]:
    """Domains on which `user` may `action` (view and decide are the same set for domains)."""
    qs = MemoryDomain.objects.all()
    if workspace is not None:
        qs = qs.filter(workspace=workspace)
    if not _active(user):
        return qs.none()
    if _is_superuser(user):
        return qs
    administered = workspaces(user, "administer").values("pk")
    if action == "administer":
        return qs.filter(workspace__in=administered)
    member_of = workspaces(user, "view").values("pk")
    reviewer = Q(pk__in=_reviewer_domain_pks(user, UserObjectPermission)) | Q(
        pk__in=_reviewer_domain_pks(user, GroupObjectPermission)
    )
    return qs.filter(Q(workspace__in=administered) | (Q(workspace__in=member_of) & reviewer))


def _reviewer_domain_pks(user: Any, model: type[models.Model]) -> QuerySet:
    """Ids of the domains on which guardian gives `user` (or one of their groups) `review_domain`:
    guardian's own tables read as a subquery (get_objects_for_user costs two more queries a call)."""
    app_label, codename = REVIEW_PERMISSION.split(".")
    who = {"user": user} if model is UserObjectPermission else {"group__user": user}
    return (
        model._default_manager.filter(
            **who,
            permission__codename=codename,
            permission__content_type__app_label=app_label,
            permission__content_type__model="memorydomain",
            content_type__app_label=app_label,
            content_type__model="memorydomain",
        )
        .annotate(domain_pk=Cast("object_pk", BigIntegerField()))
        .values("domain_pk")
    )


def domain_ids(user: Any, action: str = "decide", workspace_ids: list[int] | None = None) -> set[int]:
    qs = domains(user, action)
    if workspace_ids is not None:
        qs = qs.filter(workspace_id__in=workspace_ids)
    return set(qs.values_list("pk", flat=True))


def scope_of(model: type[models.Model]) -> tuple[str, str | None]:
    """(workspace lookup, domain lookup) of a model (see SCOPES)."""
    label = model._meta.label_lower
    if label in SCOPES:
        return SCOPES[label]
    names = {f.name for f in model._meta.get_fields()}
    return "workspace", ("domain" if "domain" in names else None)


def restrict(
    queryset: QuerySet,
    user: Any,
    action: str = "view",
    *,
    workspace_lookup: str | None = None,
    domain_lookup: str | None = "",
) -> QuerySet:
    """`queryset` limited to the rows `user` may `action` (NetBox's `restrict(user, action)`).

    Lookups default to the model's scope (SCOPES); pass `domain_lookup=None` to scope a
    domain-carrying model by workspace only."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    if not _active(user):
        return queryset.none()
    if _is_superuser(user):
        return queryset
    default_ws, default_domain = scope_of(queryset.model)
    ws_lookup = workspace_lookup or default_ws
    dom_lookup = default_domain if domain_lookup == "" else domain_lookup
    if action == "administer":
        return queryset.filter(**{f"{ws_lookup}__in": workspaces(user, "administer").values("pk")})
    queryset = queryset.filter(**{f"{ws_lookup}__in": workspaces(user, "view").values("pk")})
    if dom_lookup is not None:
        queryset = queryset.filter(**{f"{dom_lookup}__in": domains(user, action).values("pk")})
    return queryset


def may(user: Any, action: str, obj: models.Model) -> bool:
    """Whether `user` may `action` this one row (the same rule as `restrict`)."""
    if obj.pk is None:
        return False
    return restrict(type(obj)._default_manager.filter(pk=obj.pk), user, action).exists()


def is_workspace_admin(user: Any, workspace: Workspace | int) -> bool:
    ws_id = workspace.pk if isinstance(workspace, Workspace) else workspace
    return workspaces(user, "administer").filter(pk=ws_id).exists()


def may_decide_domain(user: Any, domain: MemoryDomain | int | None) -> bool:
    if domain is None:
        return False
    pk = domain.pk if isinstance(domain, MemoryDomain) else domain
    return domains(user, "decide").filter(pk=pk).exists()
