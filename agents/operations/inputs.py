"""Input validation shared by every adapter of the agent tools (API views, MCP, in-process)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """The serializer's validated data; raises DRF's ValidationError (a 400 with field errors)."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class Validator:
    """`validated` for many inputs of one serializer class (the items of a batch): one serializer
    is built and reused, so its fields are deep-copied once instead of once per input (about half
    of the per-item cost of a batch write). Each input still goes through the same `is_valid`, with
    the serializer's per-input state cleared first: the same validated data, and the same
    ValidationError (fields, messages, codes) as `validated(serializer_class, data)` raises.
    Not thread-safe: one per batch."""

    _STATE = ("initial_data", "_validated_data", "_errors", "_data")

    def __init__(self, serializer_class: type[serializers.Serializer]) -> None:
        self.serializer = serializer_class()

    def __call__(self, data: Any) -> dict[str, Any]:
        serializer = self.serializer
        for name in self._STATE:
            serializer.__dict__.pop(name, None)
        serializer.initial_data = data
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)
