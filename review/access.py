"""Who may see and decide what in the review site (SPEC §1, issue 16).

The rule itself lives in memory.access (one rule for people, every surface); this module keeps
the review site's names for it and adds what only the review app knows: which domain a remember
review's item lands in (layer → domain mapping), given to memory.access as rules (`register`), so
`access.restrict` shows a review to the people who may decide at least one of its items, an item
(its notes, its file) only to people who may decide its domain, and an audit event about a whole
review only to people who see all of it. Selectors call these; templates never decide access."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.http import Http404

from memory import access
from memory.models import MemoryDomain, Workspace
from review.models import DEFAULT_LAYER_MAPPING, LayerMapping, RememberReview, ReviewItem


def workspace_for(user: Any, slug: str) -> Workspace:
    """The workspace if the person is a member (or superuser); 404 otherwise (no existence leak)."""
    workspace = access.workspaces(user, "view").filter(slug=slug).first()
    if workspace is None:
        raise Http404("No such workspace.")
    return workspace


def is_workspace_admin(user: Any, workspace: Workspace) -> bool:
    return access.is_workspace_admin(user, workspace)


def reviewable_domains(user: Any, workspace: Workspace) -> QuerySet[MemoryDomain]:
    """The domains of `workspace` this person may see and decide in."""
    return access.domains(user, "decide", workspace).select_related("repo")


def reviewable_domain_ids(user: Any, workspace_ids: list[int] | None = None) -> set[int]:
    """Domain ids across the person's workspaces (or the given ones) that they may review."""
    return access.domain_ids(user, "decide", workspace_ids)


# --- Remember reviews: layer → domain ------------------------------------------------------------
def _layer_targets(workspace_id: int) -> dict[str, tuple[str, bool]]:
    targets = {str(layer): value for layer, value in DEFAULT_LAYER_MAPPING.items()}
    for row in LayerMapping.objects.filter(workspace_id=workspace_id):
        targets[row.layer] = (row.domain_name, row.per_repo)
    return targets


# Where an item lands, in SQL: its layer (the edited one, else the recommended one), the domain name
# that layer maps to in its review's workspace (LayerMapping, else the SPEC §8 default, else the
# layer itself), and the repo: the review's when the mapping is per repo (a workspace domain
# otherwise, or when the review has no repo). Written as one self-contained subquery: the same rule
# as ORM aliases and OuterRefs cost a quarter of every review page in Django's compiler alone.
_DECIDABLE_ITEMS_SQL = """
SELECT i.id FROM review_reviewitem i
JOIN review_rememberreview r ON r.id = i.review_id
CROSS JOIN LATERAL (SELECT CASE WHEN i.edited_layer = '' THEN i.recommended_layer ELSE i.edited_layer END AS layer) t
LEFT JOIN review_layermapping m ON m.workspace_id = r.workspace_id AND m.layer = t.layer
LEFT JOIN (VALUES {defaults}) AS dflt(layer, name, per_repo) ON dflt.layer = t.layer
WHERE r.workspace_id {administered} OR EXISTS (
    SELECT 1 FROM memory_memorydomain d
    WHERE d.id {decidable} AND d.workspace_id = r.workspace_id
      AND d.name = COALESCE(m.domain_name, dflt.name, t.layer)
      AND d.repo_id IS NOT DISTINCT FROM (CASE WHEN COALESCE(m.per_repo, dflt.per_repo, false) THEN r.repo_id END)
)"""


def _among(ids: Any) -> tuple[str, list[Any]]:
    """SQL testing a column against ids: a list (`= ANY`) or a queryset (`IN (subquery)`)."""
    if isinstance(ids, list):
        return "= ANY(%s)", [ids]
    sql, params = ids.query.sql_with_params()
    return f"IN ({sql})", list(params)


def _item_rule(queryset: QuerySet, user: Any, action: str) -> QuerySet:
    """memory.access's rule for review items: an item is seen and decided by the admins of its
    workspace, and by the people who may decide the domain it lands in (which must exist)."""
    defaults = list(DEFAULT_LAYER_MAPPING.items())
    administered, administered_params = _among(access.workspace_pks(user, "administer"))
    decidable, decidable_params = _among(access.domain_pks(user, action))
    sql = _DECIDABLE_ITEMS_SQL.format(
        defaults=", ".join(["(%s, %s, %s::boolean)"] * len(defaults)),
        administered=administered,
        decidable=decidable,
    )
    params = [x for layer, (name, per_repo) in defaults for x in (str(layer), name, per_repo)]
    every = [*params, *administered_params, *decidable_params]
    return queryset.filter(pk__in=RawSQL(sql, every))  # noqa: S611 -- fixed SQL and compiled subqueries; values are bound params


def _review_rule(queryset: QuerySet, user: Any, action: str) -> QuerySet:
    """memory.access's rule for remember reviews: those of the workspaces a person administers,
    and those with at least one item they may see (_item_rule)."""
    items = access.restrict(ReviewItem.objects.all(), user, action).values("review_id")
    return queryset.filter(Q(workspace__in=access.workspaces(user, "administer").values("pk")) | Q(pk__in=items))


def _review_event_rule(queryset: QuerySet, user: Any, action: str) -> QuerySet:
    """memory.access's rule for audit events about a remember review with no one domain (its
    submission, approval, rejection: their details name every item's path and edits): seen by
    those who see every item of the review."""
    hidden = ReviewItem.objects.filter(review_id=OuterRef("target_id")).exclude(
        pk__in=access.restrict(ReviewItem.objects.all(), user, action).values("pk")
    )
    return queryset.exclude(Q(target_type="rememberreview", domain__isnull=True) & Q(Exists(hidden)))


def register() -> None:
    """Give memory.access the review app's rules (called from ReviewConfig.ready)."""
    access.register_rule("review.reviewitem", _item_rule)
    access.register_rule("review.rememberreview", _review_rule)
    access.register_rule("memory.auditevent", _review_event_rule)


def reviews_for(user: Any, queryset: QuerySet[RememberReview] | None = None) -> QuerySet[RememberReview]:
    """Remember reviews a person sees (access.restrict with the rules above): all of the
    workspaces they administer, and those with at least one item landing in a domain they may
    decide (none for non-members)."""
    return access.restrict(RememberReview.objects.all() if queryset is None else queryset, user, "view")


def items_for(user: Any, queryset: QuerySet[ReviewItem] | None = None) -> QuerySet[ReviewItem]:
    """Review items a person sees: those they may decide (see _item_rule)."""
    return access.restrict(ReviewItem.objects.all() if queryset is None else queryset, user, "view")


def target_domain(review: Any, layer: str) -> tuple[str, int | None]:
    """(domain name, repo id or None) an item of `layer` of `review` lands in."""
    name, per_repo = _layer_targets(review.workspace_id).get(layer, (layer, False))
    return name, (review.repo_id if per_repo else None)


def may_decide_layer(user: Any, review: Any, layer: str) -> bool:
    """Whether `user` may decide an item of `review` stored under `layer`: admins always (they
    may create the domain), others when the target domain exists and is theirs to decide."""
    if access.is_workspace_admin(user, review.workspace_id):
        return True
    name, repo_id = target_domain(review, layer)
    repo_q = Q(repo_id=repo_id) if repo_id is not None else Q(repo__isnull=True)
    return access.domains(user, "decide", review.workspace_id).filter(repo_q, name=name).exists()


def undecidable_layers(user: Any, review: Any, layers: set[str]) -> set[str]:
    """The layers among `layers` whose target domain `user` may not decide."""
    return {layer for layer in layers if not may_decide_layer(user, review, layer)}
