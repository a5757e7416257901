"""Domain errors. Each carries a stable `code` and an HTTP status; the API maps them to
`{"code", "detail", "fields"}` in one place (agents.api.errors)."""

from __future__ import annotations

from typing import Any


class EngramError(Exception):
    code = "engram_error"
    status = 400

    def __init__(self, detail: str, *, code: str | None = None, fields: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code:
            self.code = code
        self.fields = fields or {}


class InvalidInput(EngramError):
    code = "invalid_input"
    status = 400


class NotFound(EngramError):
    code = "not_found"
    status = 404


class InsufficientPermission(EngramError):
    code = "insufficient_memory_permission"
    status = 403


class StateConflict(EngramError):
    code = "state_conflict"
    status = 409


class FactNotLive(StateConflict):
    code = "fact_not_live"

    def __init__(self, fact_id: int) -> None:
        super().__init__(f"Fact {fact_id} was already superseded or retired; supersede its live successor instead.")
