"""Who may see and decide what in the review site (SPEC §1, issue 16).

The rule itself lives in memory.access (one rule for people, every surface); this module keeps
the review site's names for it and adds what only the review app knows: which domain a remember
review's item lands in (layer → domain mapping), so a review is seen by the people who may decide
at least one of its items, and an item is decided only by people who may decide its domain.
Selectors call these; templates never decide access."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.http import Http404

from memory import access
from memory.models import MemoryDomain, Workspace
from review.models import DEFAULT_LAYER_MAPPING, LayerMapping, RememberReview


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


def reviews_for(user: Any, queryset: QuerySet[RememberReview] | None = None) -> QuerySet[RememberReview]:
    """Remember reviews a person sees: all of the workspaces they administer, and those with at
    least one item landing in a domain they may decide (none for non-members)."""
    qs = RememberReview.objects.all() if queryset is None else queryset
    if access.workspaces(user, "administer").query.is_empty():  # anonymous or inactive
        return qs.none()
    if getattr(user, "is_superuser", False):
        return qs
    return qs.filter(pk__in=RememberReview.objects.filter(review_scope(user)).values("pk"))


def review_scope(user: Any) -> Q:
    """The filter on RememberReview behind `reviews_for` (for callers that cache it per request)."""
    administered = list(access.workspaces(user, "administer").values_list("pk", flat=True))
    visible = Q(workspace_id__in=administered)
    decidable: dict[int, list[tuple[str, int | None]]] = {}
    for ws_id, name, repo_id in (
        access.domains(user, "decide")
        .exclude(workspace_id__in=administered)
        .values_list("workspace_id", "name", "repo_id")
    ):
        decidable.setdefault(ws_id, []).append((name, repo_id))
    for ws_id, held in decidable.items():
        for layer, (name, per_repo) in _layer_targets(ws_id).items():
            for domain_name, domain_repo in held:
                if domain_name != name:
                    continue
                if per_repo:
                    repo_q = Q(repo_id=domain_repo) if domain_repo is not None else Q(repo__isnull=True)
                    visible |= Q(workspace_id=ws_id) & _item_layer(layer) & repo_q
                elif domain_repo is None:
                    visible |= Q(workspace_id=ws_id) & _item_layer(layer)
    return visible


def _item_layer(layer: str) -> Q:
    """Reviews with an item stored under `layer` (the reviewer's override, else the recommendation)."""
    return Q(items__edited_layer=layer) | Q(items__edited_layer="", items__recommended_layer=layer)


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
