"""Agent API views: input serializer → service → output serializer; reads via selectors."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.api.serializers import ErrorSerializer, MeSerializer

ERRORS = {401: ErrorSerializer, 400: ErrorSerializer}


class MeView(APIView):
    @extend_schema(responses={200: MeSerializer, 401: ErrorSerializer}, operation_id="me")
    def get(self, request: Request) -> Response:
        """The calling agent: its name, role and workspace."""
        return Response(MeSerializer(request.user).data)
