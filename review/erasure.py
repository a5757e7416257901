"""Remember reviews' part of an erasure (issue 21): registered with memory.services.erasure.

A review item that stored an erased fact, or proposed its text, keeps its row (path, layer,
the review's shape the runtime reads) but loses every text it held: the suggestion, the
reviewer's note, the uploaded file, the rationale. Its review keeps its row too; the erased texts
are cut from the sub-agent's raw output, the resolution and the reviewer's note."""

from __future__ import annotations

from django.db.models import Q

from memory.models import Workspace
from memory.services.erasure import Derived, InvalidSelection, Selection, scrub_json, scrub_text
from review.models import RememberReview, ReviewItem

ITEM = "review.reviewitem"
REVIEW = "review.rememberreview"


class RememberReviewErasure:
    def select(self, workspace: Workspace, selection: Selection) -> list[int] | None:
        """`{"kind": "review", "review": id}`: the facts stored from that review's items."""
        if selection.kind != "review" or selection.review is None:
            return None
        review = RememberReview.objects.filter(workspace=workspace, pk=selection.review).first()
        if review is None:
            raise InvalidSelection(
                "The selection is not valid: no such remember review in this workspace.",
                fields={"review": ["No such remember review in this workspace."]},
            )
        return [pk for pk in review.items.values_list("stored_fact_id", flat=True) if pk is not None]

    def derive(self, workspace: Workspace, fact_ids: set[int], texts: list[str]) -> Derived:
        proposed = set(texts)
        items = ReviewItem.objects.filter(review__workspace=workspace).filter(
            Q(stored_fact_id__in=fact_ids) | Q(suggested_memory_content__in=proposed) | Q(edited_content__in=proposed)
        )
        rows = list(items.values_list("pk", "review_id", "suggested_memory_content", "edited_content"))
        held = [t for _, _, suggested, edited in rows for t in (suggested, edited) if t]
        return Derived(
            scrubbed={ITEM: sorted(pk for pk, *_ in rows), REVIEW: sorted({review for _, review, *_ in rows})},
            texts=held,
        )

    def apply(self, derived: Derived, texts: list[str]) -> None:
        ReviewItem.objects.filter(pk__in=derived.scrubbed.get(ITEM, [])).update(
            suggested_memory_content="", edited_content=None, file_text="", rationale="", edited_rationale=None
        )
        for review in RememberReview.objects.filter(pk__in=derived.scrubbed.get(REVIEW, [])).order_by("pk"):
            review.raw_output = scrub_text(review.raw_output, texts)
            review.resolution = scrub_json(review.resolution, texts)
            review.reviewer_note = scrub_text(review.reviewer_note, texts)
            review.save(update_fields=["raw_output", "resolution", "reviewer_note"])
