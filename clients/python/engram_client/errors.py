"""The package's one error class: every failure a caller can catch is an EngramError."""

from __future__ import annotations

from typing import Any

__all__ = ["EngramError", "ReviewTimeout"]


class EngramError(Exception):
    """A non-2xx answer, or no answer at all (status 0, code `connection_error`).

    `status` is the HTTP status, `code` the API's stable error code, `detail` its explanation,
    `fields` the per-field errors of a 400, and `message` the one line `str(exc)` shows."""

    def __init__(self, status: int, code: str, detail: str, fields: dict[str, Any] | None = None) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.fields: dict[str, Any] = fields or {}
        self.message = f"{status} {code}: {detail}"
        super().__init__(self.message)


class ReviewTimeout(EngramError):
    """Nobody resolved the remember review in time; it stays pending on the site."""

    def __init__(self, review_id: int, review_url: str = "") -> None:
        where = f": {review_url}" if review_url else "."
        super().__init__(0, "review_timeout", f"Remember review {review_id} is still pending{where}")
        self.review_id = review_id
        self.review_url = review_url
