"""As-of recall's inputs (issue 21): the two moments search, the preamble and GET facts/{id}/ take.
The rules themselves are memory.search.as_of's."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from rest_framework import serializers

from memory.services.facts import future_date_error

AS_OF_HELP = (
    "transaction time: answer with what Engram believed at this moment (facts recorded by then and not yet "
    "superseded then, with their status then; policies active then). ISO 8601 with a timezone "
    "(2026-05-01T12:00:00Z); not in the future (400 invalid_input); omitted = now"
)
VALID_AT_HELP = (
    "valid time: only facts true at this moment (observed_at ≤ it < valid_until), among those believed at "
    "`as_of` (default now). ISO 8601 with a timezone; not in the future; omitted = no valid-time filter "
    "(facts expired at `as_of` are left out as usual)"
)
# A `+hh:mm` offset in a query string that was not URL-encoded arrives as a space.
_SPACED_OFFSET = re.compile(r"(T[\d:.]+) (\d\d(?::?\d\d)?)$")


class MomentField(serializers.DateTimeField):
    """An ISO 8601 moment with a timezone, not in the future (at most the clock skew ahead).
    A naive value is refused rather than read in the server's timezone: the answer would depend on it."""

    default_error_messages = {
        "naive": "Give a timezone, e.g. 2026-05-01T12:00:00Z or 2026-05-01T14:00:00+02:00.",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, value: Any) -> datetime:
        if isinstance(value, str):
            value = _SPACED_OFFSET.sub(r"\1+\2", value.strip())
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                self.fail("invalid", format="ISO 8601 with a timezone")
            if parsed.tzinfo is None:
                self.fail("naive")
        elif isinstance(value, datetime):
            if value.tzinfo is None:
                self.fail("naive")
        else:
            self.fail("invalid", format="ISO 8601 with a timezone")
        try:
            moment: datetime = super().to_internal_value(value)
        except (OverflowError, ValueError):  # e.g. year 1 with a positive offset: no UTC instant
            self.fail("invalid", format="ISO 8601 with a timezone")
        if (future := future_date_error(moment)) is not None:
            raise serializers.ValidationError(future)
        return moment


class FactDetailQuery(serializers.Serializer):
    """GET facts/{id}/'s query."""

    as_of = MomentField(
        help_text="show the fact, its chain, conflicts and mentions as they were at this moment (entries recorded "
        "later left out, supersession and status as of then); 404 fact_not_found if it was recorded later. "
        "ISO 8601 with a timezone (URL-encode `+` as %2B); not in the future"
    )
