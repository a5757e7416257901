"""Reads for remember reviews: the API's (by agent), the pages' (by person). The long-poll is
review/waiting.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db.models import Count, QuerySet

from memory.models import Fact
from review.access import items_for, reviews_for
from review.errors import ReviewNotFound
from review.models import LAYER_GUIDE, RememberLayer, RememberReview, ReviewItem

if TYPE_CHECKING:
    from memory.models import Agent

MAX_WAIT_SECONDS = 30
POLL_INTERVAL_SECONDS = 0.5


def _with_relations(qs: QuerySet[RememberReview]) -> QuerySet[RememberReview]:
    return qs.select_related("workspace", "agent", "repo", "resolved_by")


def review_for_agent(agent: Agent, review_id: int) -> RememberReview:
    """A review of the agent's workspace with its items; another workspace's is not found.
    What the agent may read of it is in `resolution_for_agent` and each item's
    `stored_fact_id_for_agent` (see `_withhold_hidden`)."""
    review = (
        _with_relations(RememberReview.objects.for_agent(agent)).prefetch_related("items").filter(pk=review_id).first()
    )
    if review is None:
        raise ReviewNotFound(review_id)
    readable_by(agent, [review])
    return review


def session_reviews_for_agent(agent: Agent, *, session_id: str, status: str | None = None) -> QuerySet[RememberReview]:
    """The agent's own reviews of one session (never another agent's, of this workspace or
    another), newest first, optionally of one status. Pass a page of them to `readable_by`."""
    reviews = RememberReview.objects.for_agent(agent).filter(session_id=session_id)
    if status:
        reviews = reviews.filter(status=status)
    return _with_relations(reviews).prefetch_related("items").order_by("-created_at", "-pk")


def readable_by(agent: Agent, reviews: Sequence[RememberReview]) -> Sequence[RememberReview]:
    """`reviews` (with their items prefetched) as the agent may read them (`_withhold_hidden`),
    with one query for the visibility of every fact they stored."""
    ids: set[int] = set()
    for review in reviews:
        ids |= {i.stored_fact_id for i in review.items.all() if i.stored_fact_id}
        ids |= {s["fact_id"] for s in (review.resolution or {}).get("stored") or []}
    visible = set(Fact.objects.visible_to(agent).filter(pk__in=ids).values_list("pk", flat=True)) if ids else set()
    for review in reviews:
        _withhold_hidden(review, visible)
    return reviews


def _withhold_hidden(review: RememberReview, visible: set[int]) -> None:
    """A person may store an item in a domain the submitting agent's role holds `none` on (the
    layer's mapping is theirs to choose). The agent then reads that the file was kept, but not
    the fact's id nor its outcome: a re-mention or a conflict would tell it what hidden memory
    already says. `visible`: the ids of the facts the agent may read."""
    items = list(review.items.all())
    resolution = review.resolution or {}
    stored = list(resolution.get("stored") or [])
    for item in items:
        item.stored_fact_id_for_agent = item.stored_fact_id if item.stored_fact_id in visible else None
    withheld = [s["path"] for s in stored if s["fact_id"] not in visible]
    if not resolution or not withheld:
        review.resolution_for_agent = resolution or None
        return
    from review.services import resolution_note

    shown = [s for s in stored if s["fact_id"] in visible]
    reviewer = review.resolved_by
    review.resolution_for_agent = {
        **resolution,
        "stored": shown,
        "stored_ids": [s["fact_id"] for s in shown],
        "withheld_paths": withheld,
        "note": resolution_note(
            approved=True,
            stored=shown,
            not_stored=[f"{i.path} (deselected)" for i in items if not i.selected]
            + [f"{p} (empty)" for p in resolution.get("skipped_paths") or []],
            withheld=withheld,
            reviewer=f"Reviewer {reviewer.get_username()}" if reviewer is not None else "A reviewer",
            reviewer_note=resolution.get("reviewer_note") or "",
        ),
    }


def review_for_user(user: Any, review_id: int) -> RememberReview:
    """A review the person may see (an admin of its workspace, or someone who may decide one of
    its items: access.restrict); else not found. Which of its items they see: `items_for`."""
    review = _with_relations(reviews_for(user, RememberReview.objects.all())).filter(pk=review_id).first()
    if review is None:
        raise ReviewNotFound(review_id)
    return review


def current_state(review_id: int) -> RememberReview | None:
    """The review as it is now (status, who resolved it, when), for a caller already allowed."""
    return RememberReview.objects.select_related("resolved_by").filter(pk=review_id).first()


def item_for_user(user: Any, review_id: int, item_id: int) -> ReviewItem:
    """One item of a review, if the person may decide the domain it lands in (else not found,
    like an item that does not exist: its notes and file are not theirs to read)."""
    review = review_for_user(user, review_id)
    item = items_for(user, ReviewItem.objects.filter(review=review, pk=item_id)).first()
    if item is None:
        raise ReviewNotFound(review_id)
    item.review = review
    return item


def visible_items(user: Any, review: RememberReview) -> list[ReviewItem]:
    """The review's items the person sees (items_for), in order."""
    items = list(items_for(user, ReviewItem.objects.filter(review=review)).order_by("order"))
    for item in items:
        item.review = review
    return items


def hidden_layers(user: Any, review: RememberReview) -> set[str]:
    """The layers of the review's items the person does not see (they go to domains not theirs)."""
    hidden = ReviewItem.objects.filter(review=review).exclude(pk__in=items_for(user).values("pk"))
    return {item.layer for item in hidden.only("edited_layer", "recommended_layer")}


@dataclass
class LayerGroup:
    layer: str
    guide: str
    target: str
    items: list[ReviewItem] = field(default_factory=list)


def items_by_layer(review: RememberReview, items: list[ReviewItem] | None = None) -> list[LayerGroup]:
    """The items (default: all of the review's) grouped by the layer the sub-agent recommended
    (a stable layout while the reviewer overrides layers), in the order of SPEC §8; empty groups
    left out."""
    from review.services import target_label

    groups = {
        layer.value: LayerGroup(
            layer=layer.value,
            guide=LAYER_GUIDE[layer],
            target=target_label(workspace_id=review.workspace_id, layer=layer.value, repo=review.repo),
        )
        for layer in RememberLayer
    }
    for item in review.items.order_by("order") if items is None else items:
        item.review = review
        groups[item.recommended_layer].items.append(item)
    return [g for g in groups.values() if g.items]


def pending_reviews_for_user(user: Any, *, limit: int = 50) -> QuerySet[RememberReview]:
    """Pending remember reviews of the person's workspaces, oldest first (longest waiting)."""
    return (
        _with_relations(reviews_for(user, RememberReview.objects.pending()))
        .annotate(item_count=Count("items"))
        .order_by("created_at", "pk")[:limit]
    )


def origin_review_ids(facts: Any) -> dict[int, int]:
    """fact id → the remember review whose approval stored it, for the facts among `facts` that a
    review stored (origin `remember_review`; one query, none when there are none). A fact a later
    review only re-mentioned keeps the review that first stored it (the earliest resolved)."""
    ids = [f.pk for f in facts if f.origin == "remember_review"]
    if not ids:
        return {}
    found: dict[int, int] = {}
    rows = (
        ReviewItem.objects.filter(stored_fact_id__in=ids)
        .order_by("review__resolved_at", "review_id")
        .values_list("stored_fact_id", "review_id")
    )
    for fact_id, review_id in rows:
        found.setdefault(fact_id, review_id)
    return found
