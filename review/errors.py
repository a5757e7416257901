"""Errors of remember reviews; the API maps them to JSON (409) and the pages to a message."""

from __future__ import annotations

from memory.errors import NotFound, StateConflict


class ReviewNotFound(NotFound):
    code = "review_not_found"

    def __init__(self, review_id: int | str) -> None:
        super().__init__(f"No remember review {review_id} in this workspace.")


class ReviewAlreadyResolved(StateConflict):
    """Approve, reject or edit after someone else resolved it (or it was consumed)."""

    code = "review_already_resolved"

    def __init__(self, review_id: int, status: str) -> None:
        super().__init__(f"Remember review {review_id} was already {status}; nothing was changed.")
        self.status_name = status


class ReviewStillPending(StateConflict):
    code = "review_pending"

    def __init__(self, review_id: int) -> None:
        super().__init__(f"Remember review {review_id} is still pending: wait for a reviewer's decision.")


class ReviewAlreadyConsumed(StateConflict):
    code = "review_already_consumed"

    def __init__(self, review_id: int) -> None:
        super().__init__(f"Remember review {review_id} was already consumed.")
