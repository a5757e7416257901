"""Input validation shared by every adapter of the agent tools (API views, MCP, in-process)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """The serializer's validated data; raises DRF's ValidationError (a 400 with field errors)."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
