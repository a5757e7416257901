"""Input and output serializers of the agent API."""

from __future__ import annotations

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

# `fields` cannot be a declared field name on a DRF Serializer class, hence the inline form.
ErrorSerializer = inline_serializer(
    name="Error",
    fields={
        "code": serializers.CharField(help_text="stable snake_case error code"),
        "detail": serializers.CharField(help_text="a human sentence"),
        "fields": serializers.DictField(help_text="field name → messages, for 400s"),
    },
)


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    role = serializers.CharField(source="role.name")
    workspace = serializers.CharField(source="workspace.slug")
    workspace_name = serializers.CharField(source="workspace.name")
