"""Reads for remember reviews: the API's (by agent), the pages' (by person), the long-poll."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db.models import Count, QuerySet

from review.errors import ReviewNotFound
from review.models import LAYER_GUIDE, RememberLayer, RememberReview, ReviewItem, ReviewStatus

if TYPE_CHECKING:
    from agents.models import Agent

MAX_WAIT_SECONDS = 30
POLL_INTERVAL_SECONDS = 0.5


def _with_relations(qs: QuerySet[RememberReview]) -> QuerySet[RememberReview]:
    return qs.select_related("workspace", "agent", "repo", "resolved_by")


def review_for_agent(agent: Agent, review_id: int) -> RememberReview:
    """A review of the agent's workspace with its items; another workspace's is not found."""
    review = (
        _with_relations(RememberReview.objects.for_agent(agent)).prefetch_related("items").filter(pk=review_id).first()
    )
    if review is None:
        raise ReviewNotFound(review_id)
    return review


def wait_for_resolution(agent: Agent, review_id: int, *, wait: float) -> RememberReview:
    """The review, once it left pending or after `wait` seconds (at most 30), polling the
    database every half second: state lives there, so any web process may answer."""
    review = review_for_agent(agent, review_id)
    deadline = time.monotonic() + min(max(wait, 0.0), MAX_WAIT_SECONDS)
    while review.status == ReviewStatus.PENDING:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(POLL_INTERVAL_SECONDS, remaining))
        status = RememberReview.objects.filter(pk=review.pk).values_list("status", flat=True).first()
        if status != ReviewStatus.PENDING:
            return review_for_agent(agent, review_id)
    return review


def review_for_user(user: Any, review_id: int) -> RememberReview:
    """A review the person may see (member of its workspace, or superuser); else not found."""
    review = _with_relations(RememberReview.objects.for_user(user)).filter(pk=review_id).first()
    if review is None:
        raise ReviewNotFound(review_id)
    return review


def current_state(review_id: int) -> RememberReview | None:
    """The review as it is now (status, who resolved it, when), for a caller already allowed."""
    return RememberReview.objects.select_related("resolved_by").filter(pk=review_id).first()


def item_for_user(user: Any, review_id: int, item_id: int) -> ReviewItem:
    review = review_for_user(user, review_id)
    item = ReviewItem.objects.filter(review=review, pk=item_id).first()
    if item is None:
        raise ReviewNotFound(review_id)
    item.review = review
    return item


@dataclass
class LayerGroup:
    layer: str
    guide: str
    target: str
    items: list[ReviewItem] = field(default_factory=list)


def items_by_layer(review: RememberReview) -> list[LayerGroup]:
    """The items grouped by the layer the sub-agent recommended (a stable layout while the
    reviewer overrides layers), in the order of SPEC §8; empty groups left out."""
    from review.services import target_label

    groups = {
        layer.value: LayerGroup(
            layer=layer.value,
            guide=LAYER_GUIDE[layer],
            target=target_label(workspace_id=review.workspace_id, layer=layer.value, repo=review.repo),
        )
        for layer in RememberLayer
    }
    for item in review.items.order_by("order"):
        item.review = review
        groups[item.recommended_layer].items.append(item)
    return [g for g in groups.values() if g.items]


def pending_reviews_for_user(user: Any, *, limit: int = 50) -> QuerySet[RememberReview]:
    """Pending remember reviews of the person's workspaces, oldest first (longest waiting)."""
    return (
        _with_relations(RememberReview.objects.for_user(user).pending())
        .annotate(item_count=Count("items"))
        .order_by("created_at", "pk")[:limit]
    )
