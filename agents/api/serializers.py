"""Input and output serializers of the agent API."""

from __future__ import annotations

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    detail = serializers.CharField()
    fields = serializers.DictField()


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    role = serializers.CharField(source="role.name")
    workspace = serializers.CharField(source="workspace.slug")
    workspace_name = serializers.CharField(source="workspace.name")
