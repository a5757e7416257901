"""The remember review page (SPEC §8): a person reviews what an agent's remember sub-agent
nominated while the agent waits.

Every edit is saved at once through review.services (a refresh loses nothing). POST handlers
answer with the updated partial of the page template; when the review was resolved meanwhile
(e.g. by another reviewer) they answer 409 with the whole review partial and a message, which
htmx swaps in place (see the `htmx-config` meta tag in base.html).
"""

from __future__ import annotations

import posixpath
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from memory.actors import Actor
from memory.errors import InsufficientPermission, InvalidInput
from review import selectors
from review import services as review_services
from review.access import may_decide_layer
from review.errors import ReviewAlreadyResolved, ReviewNotFound
from review.forms import ReviewerNoteForm, ReviewItemForm
from review.models import RememberLayer, RememberReview, ReviewItem

TEMPLATE = "review/remember_review.html"


def _template(request: HttpRequest, partial: str) -> str:
    htmx = getattr(request, "htmx", None)
    return f"{TEMPLATE}#{partial}" if htmx and not htmx.boosted else TEMPLATE


def _review_or_404(request: HttpRequest, review_id: int) -> RememberReview:
    try:
        return selectors.review_for_user(request.user, review_id)
    except ReviewNotFound:
        raise Http404("No such remember review.") from None


def _item_or_404(request: HttpRequest, review_id: int, item_id: int) -> ReviewItem:
    try:
        return selectors.item_for_user(request.user, review_id, item_id)
    except ReviewNotFound:
        raise Http404("No such item.") from None


def _targets(review: RememberReview) -> dict[str, str]:
    return {
        layer.value: review_services.target_label(workspace_id=review.workspace_id, layer=layer.value, repo=review.repo)
        for layer in RememberLayer
    }


def _annotate(item: ReviewItem, targets: dict[str, str]) -> ReviewItem:
    item.target_label = targets[item.layer]  # type: ignore[attr-defined]
    return item


def _stored(review: RememberReview, items: list[ReviewItem]) -> tuple[list[dict[str, Any]], list[str]]:
    """What the resolution says was stored and skipped, limited to the items the person sees,
    each stored fact with the address of its page in the memory browser."""
    resolution = review.resolution or {}
    paths = {item.path for item in items}
    stored = [dict(s) for s in resolution.get("stored") or [] if s.get("path") in paths]
    for entry in stored:
        entry["url"] = reverse("review:fact", args=[review.workspace.slug, entry["fact_id"]])
    return stored, [p for p in resolution.get("skipped_paths") or [] if p in paths]


def _page_context(review: RememberReview, user: Any, **extra: Any) -> dict[str, Any]:
    """The review as this person may see it: only the items landing in domains they may decide
    (access.restrict through review.access); the others are named by their target domain only."""
    targets = _targets(review)
    items = selectors.visible_items(user, review)
    for item in items:
        _annotate(item, targets)
    groups = selectors.items_by_layer(review, items)
    hidden = selectors.hidden_layers(user, review)
    stored, skipped = _stored(review, items)
    return {
        "review": review,
        "groups": groups,
        "layers": RememberLayer.values,
        "item_count": len(items),
        "not_yours": sorted({targets[layer] for layer in hidden}),
        "stored": stored,
        "skipped_paths": skipped,
        **extra,
    }


def _render_review(request: HttpRequest, review: RememberReview, *, status: int = 200, **extra: Any) -> HttpResponse:
    review = selectors.review_for_user(request.user, review.pk)  # fresh state after a write
    response = render(
        request, _template(request, "review"), _page_context(review, request.user, **extra), status=status
    )
    if status == 409:
        # An item form targets its own status line; a resolved review replaces the whole card.
        response["HX-Retarget"] = "#remember-review"
        response["HX-Reswap"] = "outerHTML"
    return response


def _conflict_message(exc: ReviewAlreadyResolved, review: RememberReview) -> str:
    fresh = selectors.current_state(review.pk)
    who = fresh.resolved_by.get_username() if fresh and fresh.resolved_by else "someone else"
    when = fresh.resolved_at.strftime("%Y-%m-%d %H:%M UTC") if fresh and fresh.resolved_at else ""
    return (
        f"This review was already {exc.status_name} by {who}{f' at {when}' if when else ''}. "
        "Nothing was changed by your action; the page now shows the outcome."
    )


def _invalid_edit(form: ReviewItemForm) -> InvalidInput:
    """The refusal update_item would give these fields (same detail, same `fields`)."""
    fields = {name: list(messages) for name, messages in form.errors.items()}
    return InvalidInput("The edit has invalid fields; see `fields`.", code="invalid_review_edit", fields=fields)


@login_required
@require_GET
def remember_review(request: HttpRequest, review_id: int) -> HttpResponse:
    review = _review_or_404(request, review_id)
    return render(request, TEMPLATE, _page_context(review, request.user))


@login_required
@require_POST
def remember_item(request: HttpRequest, review_id: int, item_id: int) -> HttpResponse:
    """Save one item's selection and overrides; answer with its status line (diff included)."""
    item = _item_or_404(request, review_id, item_id)
    form = ReviewItemForm(request.POST, item_id=item.pk)
    errors: dict[str, Any] = {}
    try:
        if form.included and not form.is_valid():
            raise _invalid_edit(form)
        item = review_services.update_item(item=item, by=Actor.of_user(request.user), **form.changes())
        saved = True
    except ReviewAlreadyResolved as exc:
        return _render_review(request, item.review, status=409, conflict_message=_conflict_message(exc, item.review))
    except InvalidInput as exc:
        errors, saved = exc.fields, False
        item.refresh_from_db()
    except InsufficientPermission as exc:
        return HttpResponse(exc.detail, status=403, content_type="text/plain; charset=utf-8")
    item.review = selectors.review_for_user(request.user, review_id)
    _annotate(item, _targets(item.review))
    context = {"review": item.review, "item": item, "saved": saved, "errors": errors, "layers": RememberLayer.values}
    return render(request, f"{TEMPLATE}#item_status", context, status=422 if errors else 200)


@login_required
@require_POST
def remember_note(request: HttpRequest, review_id: int) -> HttpResponse:
    """Save the reviewer's note to the agent as it is typed."""
    review = _review_or_404(request, review_id)
    form = ReviewerNoteForm(request.POST)
    note = form.cleaned_data["reviewer_note"] if form.is_valid() else ""
    try:
        review = review_services.set_reviewer_note(review=review, by=Actor.of_user(request.user), note=note)
    except ReviewAlreadyResolved as exc:
        return _render_review(request, review, status=409, conflict_message=_conflict_message(exc, review))
    except InvalidInput as exc:
        return render(request, f"{TEMPLATE}#note_status", {"review": review, "errors": exc.fields}, status=422)
    return render(request, f"{TEMPLATE}#note_status", {"review": review, "saved": True})


def _save_included_items(request: HttpRequest, review: RememberReview, by: Actor) -> None:
    """Apply the item forms sent along with Approve/Reject, so an edit typed a moment before
    the click is not lost to a race with its own autosave."""
    for item in review.items.order_by("order"):
        form = ReviewItemForm(request.POST, item_id=item.pk)
        if form.included and may_decide_layer(by.user, review, item.layer):
            if not form.is_valid():
                raise _invalid_edit(form)
            item.review = review
            review_services.update_item(item=item, by=by, **form.changes())
    note = ReviewerNoteForm(request.POST)
    if note.included and note.is_valid():
        review_services.set_reviewer_note(review=review, by=by, note=note.cleaned_data["reviewer_note"])


def _decide(request: HttpRequest, review_id: int, *, approve: bool) -> HttpResponse:
    review = _review_or_404(request, review_id)
    by = Actor.of_user(request.user)
    try:
        _save_included_items(request, review, by)
        if approve:
            review_services.approve_review(review=review, by=by)
        else:
            review_services.reject_review(review=review, by=by)
    except ReviewAlreadyResolved as exc:
        return _render_review(request, review, status=409, conflict_message=_conflict_message(exc, review))
    except InvalidInput as exc:
        return _render_review(request, review, status=422, error_message=exc.detail, error_fields=exc.fields)
    except InsufficientPermission as exc:
        return _render_review(request, review, status=403, error_message=exc.detail)
    return _render_review(request, review, just_resolved=True)


@login_required
@require_POST
def remember_approve(request: HttpRequest, review_id: int) -> HttpResponse:
    return _decide(request, review_id, approve=True)


@login_required
@require_POST
def remember_reject(request: HttpRequest, review_id: int) -> HttpResponse:
    return _decide(request, review_id, approve=False)


@login_required
@require_GET
def remember_item_file(request: HttpRequest, review_id: int, item_id: int) -> HttpResponse:
    """The uploaded file text, as a download (or shown in the browser with `?inline=1`)."""
    item = _item_or_404(request, review_id, item_id)
    filename = posixpath.basename(item.path.replace("\\", "/")) or "file.txt"
    response = HttpResponse(item.file_text, content_type="text/plain; charset=utf-8")
    disposition = content_disposition_header(as_attachment=request.GET.get("inline") != "1", filename=filename)
    response["Content-Disposition"] = disposition or "attachment"
    response["X-Content-Type-Options"] = "nosniff"
    return response
