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
        # Extra top-level keys of the error body beside code, detail and fields (e.g. the numbers
        # of a refused policy budget); never used to replace those three.
        self.extra: dict[str, Any] = {}


class InvalidInput(EngramError):
    code = "invalid_input"
    status = 400


class NotFound(EngramError):
    code = "not_found"
    status = 404


class InsufficientPermission(EngramError):
    code = "insufficient_memory_permission"
    status = 403


class ProtectedFact(InsufficientPermission):
    """An agent tried to supersede a fact only a person (or the review gate) may replace."""

    code = "fact_protected"

    def __init__(self, fact_id: int, why: str) -> None:
        super().__init__(
            f"Fact {fact_id} cannot be superseded by an agent: {why}. Propose a fact on the same topic instead; "
            "the conflict rules keep the person's version, and a reviewer can replace it.",
            fields={"fact": [f"Fact {fact_id} is protected."]},
        )


class VeracityNotAllowed(InsufficientPermission):
    """An agent claimed a veracity it may not state (human_stated without relaying people's words)."""

    code = "veracity_not_allowed"

    def __init__(self, veracity: str) -> None:
        super().__init__(
            f"An agent may not state {veracity!r}: agents propose agent_inferred, tool_generated or imported. "
            "human_stated comes from people (review pages, approvals) or from an agent a workspace admin "
            "marked as relaying people's words.",
            fields={"veracity": [f"{veracity!r} is not allowed for this agent."]},
        )


class StateConflict(EngramError):
    code = "state_conflict"
    status = 409


class FactNotLive(StateConflict):
    code = "fact_not_live"

    def __init__(self, fact_id: int) -> None:
        super().__init__(f"Fact {fact_id} was already superseded or retired; supersede its live successor instead.")
