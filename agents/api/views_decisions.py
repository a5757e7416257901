"""POST decisions/: a meeting's decisions, relayed by an agent that carries people's words."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import operations
from agents.api.views import ERRORS, agent_of, answer, body_of
from agents.operations import serializers as s
from agents.operations import serializers_decisions as sd


class MeetingDecisionsView(APIView):
    @extend_schema(
        request=sd.MeetingDecisionsIn,
        responses={201: sd.MeetingDecisionsOut, 403: s.ErrorSerializer, **ERRORS},
        operation_id="record_meeting_decisions",
    )
    def post(self, request: Request) -> Response:
        """record_meeting_decisions: each decision becomes a `decision` fact (veracity human_stated) in the
        workspace's `decisions` domain (created on first use), written through propose_fact's rules
        (re-mention, conflicts) and linked to one new `meeting` episode with the meeting's title, started at
        its date. All or nothing, in one transaction. 403 `veracity_not_allowed` unless a workspace admin
        marked this agent as relaying people's words; 403 `insufficient_memory_permission` without `write`
        on `decisions`; 400 for a date in the future, no decisions, more than 50, or one too long
        (`fields` names it as `decisions.<n>`, from 1)."""
        return answer(operations.record_meeting_decisions(agent_of(request), body_of(request)))
