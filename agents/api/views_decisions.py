"""POST decisions/: a meeting's decisions, relayed by an agent that carries people's words."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import operations
from agents.api.schema import declared
from agents.api.views import agent_of, answer, body_of


class MeetingDecisionsView(APIView):
    @extend_schema(**declared("record_meeting_decisions"))
    def post(self, request: Request) -> Response:
        return answer(operations.record_meeting_decisions(agent_of(request), body_of(request)))
