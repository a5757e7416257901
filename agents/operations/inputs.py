"""Input validation shared by every adapter of the agent tools (API views, MCP, in-process).

An argument an operation does not declare is refused (400 `unknown_argument`, naming it) before
anything is read or written, on every surface: a misspelt or unsupported filter that was silently
dropped answered more, or other, than the caller asked for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.http import QueryDict
from rest_framework import serializers

from memory.errors import InvalidInput

UNKNOWN_ARGUMENT = "unknown_argument"
# An unknown name is echoed in the error; a hostile one may be megabytes long, or one of thousands.
_NAMES_SHOWN = 20
_NAME_CHARS = 100


def unknown_argument(names: list[str]) -> InvalidInput:
    """The error for arguments no operation declares: `fields` names each one (the first 20)."""
    shown = [name if len(name) <= _NAME_CHARS else name[:_NAME_CHARS] + "…" for name in names[:_NAMES_SHOWN]]
    more = f" and {len(names) - len(shown)} more" if len(names) > len(shown) else ""
    return InvalidInput(
        f"Unknown argument{'s' if len(names) > 1 else ''}: {', '.join(shown)}{more}; nothing was done.",
        code=UNKNOWN_ARGUMENT,
        fields={name: ["Unknown argument."] for name in shown},
    )


def undeclared(serializer: serializers.BaseSerializer, data: Any, prefix: str = "") -> list[str]:
    """The names in `data` that `serializer` does not declare, nested objects and list items
    included (`scope.x`, `window.0.x`), in the order given. Data of the wrong shape is left to
    the serializer's own validation."""
    if isinstance(serializer, serializers.ListSerializer):
        child = serializer.child
        if not isinstance(data, list) or not isinstance(child, serializers.BaseSerializer):
            return []
        return [name for i, item in enumerate(data) for name in undeclared(child, item, f"{prefix}{i}.")]
    if not isinstance(serializer, serializers.Serializer) or not isinstance(data, Mapping):
        return []
    fields = serializer.fields
    names = [f"{prefix}{key}" for key in data if key not in fields]
    for key, field in fields.items():
        if key in data and isinstance(field, serializers.BaseSerializer):
            names += undeclared(field, data[key], f"{prefix}{key}.")
    return names


def refuse_unknown(data: Any, *, allowed: Iterable[str] = ()) -> None:
    """Raise `unknown_argument` when `data` (a body or query) holds any name outside `allowed`:
    the check of an operation that takes no input of its own."""
    allowed = set(allowed)
    if isinstance(data, Mapping) and (names := [str(key) for key in data if key not in allowed]):
        raise unknown_argument(names)


def validated(serializer_class: type[serializers.Serializer], data: Any, *, also: Iterable[str] = ()) -> dict[str, Any]:
    """The serializer's validated data; raises `unknown_argument` for a name it does not declare
    (nor `also`: names the caller reads itself, such as a page's `limit`), else DRF's
    ValidationError (a 400 with field errors)."""
    skip = set(also)
    if isinstance(data, QueryDict) and skip:
        data = data.copy()  # still a QueryDict, whose repeated names DRF reads as lists
        for name in skip:
            data.pop(name, None)
    elif isinstance(data, Mapping) and skip:
        data = {key: value for key, value in data.items() if key not in skip}
    serializer = serializer_class(data=data)
    if names := undeclared(serializer, data):
        raise unknown_argument(names)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class Validator:
    """`validated` for many inputs of one serializer class (the items of a batch): one serializer
    is built and reused, so its fields are deep-copied once instead of once per input (about half
    of the per-item cost of a batch write). Each input still goes through the same checks, with
    the serializer's per-input state cleared first: the same validated data, and the same errors
    (`unknown_argument`, or DRF's ValidationError with its fields, messages, codes) as
    `validated(serializer_class, data)` raises. Not thread-safe: one per batch."""

    _STATE = ("initial_data", "_validated_data", "_errors", "_data")

    def __init__(self, serializer_class: type[serializers.Serializer]) -> None:
        self.serializer = serializer_class()

    def __call__(self, data: Any) -> dict[str, Any]:
        serializer = self.serializer
        if names := undeclared(serializer, data):
            raise unknown_argument(names)
        for name in self._STATE:
            serializer.__dict__.pop(name, None)
        serializer.initial_data = data
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)
