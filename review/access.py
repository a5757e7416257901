"""Who may see and decide what in the review site (SPEC §1, issue 16).

The rule itself lives in memory.access (one rule for people, every surface); this module keeps
the review site's names for it and adds what only the review app knows: which domain a remember
review's item lands in (layer → domain mapping), given to memory.access as rules (`register`), so
`access.restrict` shows a review to the people who may decide at least one of its items, an item
(its notes, its file) only to people who may decide its domain, and an audit event about a whole
review only to people who see all of it. Selectors call these; templates never decide access."""

from __future__ import annotations

from typing import Any

from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    CharField,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce
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


def with_targets(items: QuerySet[ReviewItem]) -> QuerySet[ReviewItem]:
    """Items with where each lands, in SQL (aliases, not selected): `target_name`, the domain
    name its layer maps to in its workspace (LayerMapping, else the SPEC §8 default), and
    `target_repo`, the review's repo when that mapping is per repo (else null)."""
    layer = Case(When(edited_layer="", then=F("recommended_layer")), default=F("edited_layer"))
    mapping = LayerMapping.objects.filter(
        workspace_id=OuterRef("review__workspace_id"), layer=OuterRef("target_layer")
    ).order_by()
    default_name = Case(
        *(When(target_layer=str(key), then=Value(name)) for key, (name, _) in DEFAULT_LAYER_MAPPING.items()),
        default=F("target_layer"),
    )
    default_per_repo = Case(
        *(When(target_layer=str(key), then=Value(per_repo)) for key, (_, per_repo) in DEFAULT_LAYER_MAPPING.items()),
        default=Value(False),
    )
    return (
        items.alias(target_layer=layer)
        .alias(
            target_name=Coalesce(Subquery(mapping.values("domain_name")[:1]), default_name, output_field=CharField()),
            target_per_repo=Coalesce(
                Subquery(mapping.values("per_repo")[:1]), default_per_repo, output_field=BooleanField()
            ),
        )
        .alias(
            target_repo=Case(
                When(target_per_repo=True, then=F("review__repo_id")), default=None, output_field=BigIntegerField()
            )
        )
    )


def _item_rule(queryset: QuerySet, user: Any, action: str) -> QuerySet:
    """memory.access's rule for review items: an item is seen and decided by the admins of its
    workspace, and by the people who may decide the domain it lands in (which must exist)."""
    decidable = access.domains(user, action).filter(
        workspace_id=OuterRef("review__workspace_id"), name=OuterRef("target_name")
    )
    return with_targets(queryset).filter(
        Q(review__workspace__in=access.workspaces(user, "administer").values("pk"))
        | Q(Exists(decidable.filter(repo_id=OuterRef("target_repo"))))
        | Q(target_repo__isnull=True) & Q(Exists(decidable.filter(repo__isnull=True)))
    )


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
