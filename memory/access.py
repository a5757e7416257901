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

Where a row's domain is not a lookup, a rule narrows it (`RULES`): an exposure names its fact or
policy by id, an audit event without a domain about a remember review is seen by those who see
all of the review, and a remember review's item lands in a domain through the layer mapping (the
review app registers those rules at start-up with `register_rule`: memory cannot import it).
Nothing outside this module reads `is_superuser`, `is_staff` or `WorkspaceMembership.is_admin`
(tests/test_architecture.py): ask `is_superuser(user)`, `is_staff(user)`, `workspaces(user,
"administer")` here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from django.contrib.auth import get_user_model
from django.db import connection, models
from django.db.models import BigIntegerField, Q, QuerySet
from django.db.models.functions import Cast
from guardian.models import GroupObjectPermission, UserObjectPermission

from memory.models import Fact, MemoryDomain, Policy, Workspace, WorkspaceMembership

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
    "memory.bankitem": ("run__workspace", None),
    "memory.intervention": ("run__workspace", None),
    "review.reviewitem": ("review__workspace", None),  # its domain: the review app's rule (RULES)
    "memory.auditevent": ("workspace", "domain"),
}
# Models whose domain may be empty: a row without one is workspace-level (seen by every member),
# a row with one follows its domain.
OPTIONAL_DOMAIN = {"memory.auditevent"}

# model label → rules applied after the workspace and domain lookups, for view and decide: each
# takes (queryset, user, action) and returns the queryset narrowed. Registered with register_rule.
Rule = Callable[[QuerySet, Any, str], QuerySet]
RULES: dict[str, list[Rule]] = {}


def register_rule(label: str, rule: Rule) -> None:
    """Add a rule for `label` (`app_label.model_name`); registering the same rule twice is a no-op."""
    rules = RULES.setdefault(label, [])
    if rule not in rules:
        rules.append(rule)


def _active(user: Any) -> bool:
    return bool(user is not None and getattr(user, "is_authenticated", False) and getattr(user, "is_active", True))


def _is_superuser(user: Any) -> bool:
    return _active(user) and bool(getattr(user, "is_superuser", False))


def is_superuser(user: Any) -> bool:
    """An active, signed-in superuser: every right everywhere."""
    return _is_superuser(user)


def is_staff(user: Any) -> bool:
    """An active, signed-in staff account: one the admin site lets in (what it then shows is
    still decided by `restrict` and the model permissions)."""
    return _active(user) and bool(getattr(user, "is_staff", False))


def superusers() -> QuerySet:
    """The active superuser accounts (e.g. made admins of the demo workspace by seed_demo)."""
    return get_user_model()._default_manager.filter(is_superuser=True, is_active=True)


# --- Who holds what, read once per request ------------------------------------------------------
# Every rule below filters on the workspaces and domains a person holds. As subqueries, Django
# compiled them again for every list a page reads (a dozen nested subqueries with guardian's
# joins: two thirds of the dashboard's time) and PostgreSQL planned them again. Inside
# `remembering()` (a request: config.middleware.AccessMemoMiddleware) they are read once as ids;
# any change to memberships, domains or reviewer permissions (signals, `forget_rights`) makes the
# next rule read them anew, so a request that changes rights then lists sees the change.
_remembered: ContextVar[dict[tuple[Any, ...], dict[str, list[int]]] | None] = ContextVar(
    "engram_access_ids", default=None
)
_rights_version = 0


@contextmanager
def remembering() -> Iterator[None]:
    """Within this block, each person's workspace and domain ids are read once (see above)."""
    token = _remembered.set({})
    try:
        yield
    finally:
        _remembered.reset(token)


def forget_rights(*args: Any, **kwargs: Any) -> None:
    """Rights changed somewhere (a signal receiver): ids remembered so far are read anew."""
    global _rights_version
    _rights_version += 1


def _remembered_ids(user: Any, kind: str, read: Callable[[], dict[str, list[int]]]) -> dict[str, list[int]] | None:
    """Inside `remembering()`, `read()`'s lists (by action) read once per person and kind; None outside."""
    memo = _remembered.get()
    if memo is None or getattr(user, "pk", None) is None:
        return None
    key = (kind, user.pk, _rights_version)
    if key not in memo:
        memo[key] = read()
    return memo[key]


def _workspace_pks(user: Any, action: str) -> QuerySet | list[int]:
    """Ids of the workspaces an active, non-superuser `user` is a member (or, to administer, an
    admin) of: inside `remembering()` a list (one query for both), otherwise a subquery."""
    memberships = WorkspaceMembership.objects.filter(user=user)

    def read() -> dict[str, list[int]]:
        rows = list(memberships.values_list("workspace_id", "is_admin"))
        return {"view": sorted(w for w, _ in rows), "administer": sorted(w for w, admin in rows if admin)}

    remembered = _remembered_ids(user, "workspaces", read)
    wanted = "administer" if action == "administer" else "view"
    if remembered is not None:
        return remembered[wanted]
    if wanted == "administer":
        memberships = memberships.filter(is_admin=True)
    return memberships.values_list("workspace_id", flat=True)


# domains(user, "decide") as one statement on the remembered workspace ids (its ORM form, with
# guardian's joins and casts, took Django ~9 ms to compile): the domains of workspaces one
# administers, and of workspaces one is a member of where one (or a group of one's) holds `review_domain`.
_DECIDED_DOMAINS_SQL = """
WITH review_permission AS (
    SELECT p.id, p.content_type_id FROM auth_permission p JOIN django_content_type ct ON ct.id = p.content_type_id
    WHERE p.codename = 'review_domain' AND ct.app_label = 'memory' AND ct.model = 'memorydomain'
)
SELECT d.id, d.workspace_id FROM memory_memorydomain d
WHERE d.workspace_id = ANY(%s) OR (d.workspace_id = ANY(%s) AND d.id::text IN (
    SELECT o.object_pk FROM guardian_userobjectpermission o
    WHERE o.user_id = %s AND o.permission_id IN (SELECT id FROM review_permission)
      AND o.content_type_id = (SELECT content_type_id FROM review_permission)
    UNION ALL
    SELECT o.object_pk FROM guardian_groupobjectpermission o JOIN auth_user_groups ug ON ug.group_id = o.group_id
    WHERE ug.user_id = %s AND o.permission_id IN (SELECT id FROM review_permission)
      AND o.content_type_id = (SELECT content_type_id FROM review_permission)
))"""


def _domain_pks(user: Any, action: str) -> QuerySet | list[int]:
    """Ids of the domains an active, non-superuser `user` may `action` (see domains): inside
    `remembering()` a list (one query for every action), otherwise a subquery."""

    def read() -> dict[str, list[int]]:
        # Called inside remembering() only, where the workspaces are lists.
        administered, member_of = list(_workspace_pks(user, "administer")), list(_workspace_pks(user, "view"))
        with connection.cursor() as cursor:
            cursor.execute(_DECIDED_DOMAINS_SQL, [administered, member_of, user.pk, user.pk])
            rows = cursor.fetchall()
        # Every domain of a workspace one administers is one they decide on too.
        return {
            "decide": sorted(d for d, _ in rows),
            "administer": sorted(d for d, w in rows if w in set(administered)),
        }

    remembered = _remembered_ids(user, "domains", read)
    wanted = "administer" if action == "administer" else "decide"
    if remembered is not None:
        return remembered[wanted]
    return domains(user, wanted, remembered=False).values_list("pk", flat=True)


def workspace_pks(user: Any, action: str = "view") -> QuerySet | list[int]:
    """Ids of the workspaces where active, non-superuser `user` may `action`: a list inside
    `remembering()`, a subquery otherwise (for rules written in SQL)."""
    return _workspace_pks(user, action)


def domain_pks(user: Any, action: str = "decide") -> QuerySet | list[int]:
    """Ids of the domains active, non-superuser `user` may `action`, as workspace_pks."""
    return _domain_pks(user, action)


def workspaces(user: Any, action: str = "view") -> QuerySet[Workspace]:
    """Workspaces where `user` may `action` something: members for view/decide, admins for administer."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    qs = Workspace.objects.all()
    if not _active(user):
        return qs.none()
    if _is_superuser(user):
        return qs
    return qs.filter(pk__in=_workspace_pks(user, action))


def domains(
    user: Any, action: str = "decide", workspace: Workspace | int | None = None, *, remembered: bool = True
) -> QuerySet[MemoryDomain]:
    """Domains on which `user` may `action` (view and decide are the same set for domains).
    `remembered=False` builds them as subqueries even inside `remembering()`: a queryset that
    refers to an outer query's annotations (review.access's item rule) needs that form, as
    Django relabels the aliases of a list form's nesting onto the outer query's."""
    qs = MemoryDomain.objects.all()
    if workspace is not None:
        qs = qs.filter(workspace=workspace)
    if not _active(user):
        return qs.none()
    if _is_superuser(user):
        return qs
    if remembered and _remembered.get() is not None:
        return qs.filter(pk__in=_domain_pks(user, action))
    memberships = WorkspaceMembership.objects.filter(user=user)
    administered = memberships.filter(is_admin=True).values("workspace_id")
    if action == "administer":
        return qs.filter(workspace__in=administered)
    reviewer = Q(pk__in=_reviewer_domain_pks(user, UserObjectPermission)) | Q(
        pk__in=_reviewer_domain_pks(user, GroupObjectPermission)
    )
    return qs.filter(Q(workspace__in=administered) | (Q(workspace__in=memberships.values("workspace_id")) & reviewer))


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
    if workspace_ids is None and _active(user) and not _is_superuser(user):
        pks = _domain_pks(user, action)
        if isinstance(pks, list):  # remembered: no query
            return set(pks)
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
        return queryset.filter(**{f"{ws_lookup}__in": _workspace_pks(user, "administer")})
    queryset = queryset.filter(**{f"{ws_lookup}__in": _workspace_pks(user, "view")})
    label = queryset.model._meta.label_lower
    if dom_lookup is not None:
        in_domains = Q(**{f"{dom_lookup}__in": _domain_pks(user, action)})
        if label in OPTIONAL_DOMAIN:
            in_domains |= Q(**{f"{dom_lookup}__isnull": True})
        queryset = queryset.filter(in_domains)
    for rule in RULES.get(label, ()):
        queryset = rule(queryset, user, action)
    return queryset


def may(user: Any, action: str, obj: models.Model) -> bool:
    """Whether `user` may `action` this one row (the same rule as `restrict`)."""
    if obj.pk is None:
        return False
    return restrict(type(obj)._default_manager.filter(pk=obj.pk), user, action).exists()


def _exposure_rule(queryset: QuerySet, user: Any, action: str) -> QuerySet:
    """An exposure names its fact or policy by id only: a workspace admin sees the workspace's
    whole trail (rows of erased facts included), anyone else the rows of facts and policies in
    domains they may see."""
    seen = _domain_pks(user, action)
    return queryset.filter(
        Q(workspace__in=_workspace_pks(user, "administer"))
        | Q(fact_id__in=Fact.objects.filter(domain__in=seen).values("pk"))
        | Q(policy_id__in=Policy.objects.filter(domain__in=seen).values("pk"))
    )


register_rule("memory.exposure", _exposure_rule)


def may_open_admin(user: Any, obj: models.Model) -> bool:
    """Whether `user` may open the admin's page of this row: staff holding the model's view or
    change permission, and the row within what they may see (a link to anything else bounces)."""
    opts = obj._meta
    return (
        is_staff(user)
        and (
            user.has_perm(f"{opts.app_label}.view_{opts.model_name}")
            or user.has_perm(f"{opts.app_label}.change_{opts.model_name}")
        )
        and may(user, "view", obj)
    )


def membership_rights(membership: WorkspaceMembership) -> dict[str, Any]:
    """What a membership gives, as audit events record it."""
    return {"user": membership.user_id, "is_admin": membership.is_admin}


def is_workspace_admin(user: Any, workspace: Workspace | int) -> bool:
    ws_id = workspace.pk if isinstance(workspace, Workspace) else workspace
    return workspaces(user, "administer").filter(pk=ws_id).exists()


def may_decide_domain(user: Any, domain: MemoryDomain | int | None) -> bool:
    if domain is None:
        return False
    pk = domain.pk if isinstance(domain, MemoryDomain) else domain
    return domains(user, "decide").filter(pk=pk).exists()


# --- People managing people (issue 32) --------------------------------------------------------
# Rights, highest first: a superuser holds every right; a workspace admin administers their
# workspaces; anyone else holds what their memberships, guardian `review_domain` rows, model
# permissions (their own and their groups') and staff status give. A person changes someone (their
# sign-in, status, name, groups or rights) only when everything that someone holds, they hold too,
# and only people of a workspace they administer: only a superuser changes a superuser, nobody the
# admin of a workspace they do not administer, and a staff account with model permissions but no
# workspace to administer nobody but themselves. Everyone may edit their own account, whose rights
# fields stay read-only (USER_RIGHTS_FIELDS). Rights held are read from the rows, active or not:
# re-activating someone must not hand them more than the person re-activating holds. The same
# rule covers the rights given through other pages: memberships (changed for people one manages,
# made for those of addable_members) and reviewer permissions (for people and groups one manages).

# The fields of a person that carry rights: set by superusers only (may_set_user_rights).
USER_RIGHTS_FIELDS: tuple[str, ...] = ("is_superuser", "is_staff", "groups", "user_permissions")


def may_set_user_rights(user: Any) -> bool:
    """Whether `user` sets people's staff or superuser status, groups and model permissions."""
    return _is_superuser(user)


def grantable_permissions(user: Any) -> QuerySet:
    """The model permissions `user` holds (their own and their groups'): the only ones they give."""
    from django.contrib.auth.models import Permission

    qs = Permission.objects.all()
    if not _active(user):
        return qs.none()
    if _is_superuser(user):
        return qs
    held = Permission.objects.filter(Q(user=user) | Q(group__user=user)).values("pk")
    return qs.filter(pk__in=held)


def may_grant_permissions(user: Any, permissions: Any) -> bool:
    """Whether `user` holds every one of `permissions` (Permission rows or ids), so may give them."""
    ids = {p if isinstance(p, int) else p.pk for p in permissions}
    if _is_superuser(user):
        return True
    if not ids:
        return _active(user)
    return grantable_permissions(user).filter(pk__in=ids).count() == len(ids)


def manageable_users(user: Any) -> QuerySet:
    """The people `user` may change: themselves, and people of a workspace they administer whose
    rights are all theirs too (see above); a superuser everyone."""
    from django.contrib.auth import get_user_model

    people = get_user_model()._default_manager.all()
    if not _active(user):
        return people.none()
    if _is_superuser(user):
        return people
    administered = workspaces(user, "administer").values("pk")
    theirs = WorkspaceMembership.objects.filter(user=models.OuterRef("pk"))
    # Someone of a workspace `user` administers, with no membership or admin role elsewhere, and
    # holding no other right `user` lacks (_holding_no_more_than).
    within = [
        models.Exists(theirs.filter(workspace__in=administered)),
        ~models.Exists(theirs.exclude(workspace__in=workspaces(user, "view").values("pk"))),
        ~models.Exists(theirs.filter(is_admin=True).exclude(workspace__in=administered)),
        *_holding_no_more_than(user),
    ]
    return people.filter(Q(pk=user.pk) | Q(pk__in=people.filter(*within).values("pk")))


def _holding_no_more_than(user: Any) -> list[Any]:
    """Filters on people holding no right besides memberships that active, non-superuser `user`
    lacks: no superuser status, no model or review permission of their own or their groups' that
    `user` does not hold, no staff status unless `user` has it."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    decided = domains(user, "decide").values("pk")
    held = grantable_permissions(user).values("pk")
    own_permissions = get_user_model().user_permissions.through.objects.filter(user=models.OuterRef("pk"))
    group_permissions = Group.permissions.through.objects.filter(group__user=models.OuterRef("pk"))
    conditions: list[Any] = [
        Q(is_superuser=False),
        ~models.Exists(own_permissions.exclude(permission__in=held)),
        ~models.Exists(group_permissions.exclude(permission__in=held)),
        ~models.Exists(
            _reviewer_domain_pks(models.OuterRef("pk"), UserObjectPermission).exclude(domain_pk__in=decided)
        ),
        ~models.Exists(
            _reviewer_domain_pks(models.OuterRef("pk"), GroupObjectPermission).exclude(domain_pk__in=decided)
        ),
    ]
    if not getattr(user, "is_staff", False):
        conditions.append(Q(is_staff=False))
    return conditions


def may_manage_user(user: Any, target: Any) -> bool:
    """Whether `user` may change `target`'s sign-in, status, name, or delete them (manageable_users)."""
    if target is None or target.pk is None:
        return False
    return manageable_users(user).filter(pk=target.pk).exists()


def addable_members(user: Any) -> QuerySet:
    """The people `user` may make members or admins of a workspace they administer: people they
    manage, and people of no workspace yet who hold no right they lack (an account just made).
    So every membership they write is one they may change or delete again."""
    # Not someone of another workspace only: the membership would make that person theirs to
    # manage (password, name, status), a claim on another workspace's people. Not anyone who holds
    # more than they do: a membership they could not undo, an admin role they could not take back.
    from django.contrib.auth import get_user_model

    people = get_user_model()._default_manager.all()
    if _is_superuser(user):
        return people
    if not workspaces(user, "administer").exists():
        return people.none()
    unaffiliated = people.filter(
        ~models.Exists(WorkspaceMembership.objects.filter(user=models.OuterRef("pk"))), *_holding_no_more_than(user)
    )
    return people.filter(Q(pk__in=manageable_users(user).values("pk")) | Q(pk__in=unaffiliated.values("pk")))


def manageable_groups(user: Any) -> QuerySet:
    """Groups `user` may change or delete: every permission of the group is theirs, and every
    member is someone they manage (a group's permissions are its members' rights)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    groups = Group.objects.all()
    if not _active(user):
        return groups.none()
    if _is_superuser(user):
        return groups
    permissions = Group.permissions.through.objects.filter(group=models.OuterRef("pk"))
    members = get_user_model().groups.through.objects.filter(group=models.OuterRef("pk"))
    return groups.exclude(
        models.Exists(permissions.exclude(permission__in=grantable_permissions(user).values("pk")))
    ).exclude(models.Exists(members.exclude(user__in=manageable_users(user).values("pk"))))


def visible_groups(user: Any) -> QuerySet:
    """Groups `user` sees: those they manage and their own."""
    from django.contrib.auth.models import Group

    if not _active(user):
        return Group.objects.none()
    if _is_superuser(user):
        return Group.objects.all()
    return Group.objects.filter(Q(pk__in=manageable_groups(user).values("pk")) | Q(pk__in=user.groups.values("pk")))


def may_manage_group(user: Any, group: Any) -> bool:
    if group is None or group.pk is None:
        return False
    return manageable_groups(user).filter(pk=group.pk).exists()
