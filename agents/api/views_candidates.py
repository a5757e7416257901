"""Agent API for the promotion gate (SPEC §7): candidates, replays, decisions.

Each endpoint goes through `agents.operations`, as its MCP tool does. Reads start from
`Candidate.objects.visible_to(agent)` (memory.selectors_candidates): another workspace's or a
`none` domain's candidate answers 404 like a missing one.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import operations
from agents.api.schema import declared
from agents.api.views import agent_of, answer, body_of, page_answer
from agents.operations import serializers as s

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer}
ONE_ERRORS = {**ERRORS, 404: s.ErrorSerializer}
DECIDE_ERRORS = {**ONE_ERRORS, 409: s.ErrorSerializer}


class CandidateListView(APIView):
    @extend_schema(**declared("list_candidates"))
    def get(self, request: Request) -> Response:
        return page_answer(request, operations.list_candidates)

    @extend_schema(**declared("submit_candidate"))
    def post(self, request: Request) -> Response:
        return answer(operations.submit_candidate(agent_of(request), body_of(request)))


class CandidateDetailView(APIView):
    @extend_schema(**declared("get_candidate"))
    def get(self, request: Request, candidate_pk: int) -> Response:
        return answer(operations.get_candidate(agent_of(request), candidate_pk, request.query_params))


class CandidateReplayView(APIView):
    @extend_schema(**declared("record_replay"))
    def post(self, request: Request, candidate_pk: int) -> Response:
        return answer(operations.record_replay(agent_of(request), candidate_pk, body_of(request)))


class CandidatePromoteView(APIView):
    @extend_schema(**declared("promote_candidate"))
    def post(self, request: Request, candidate_pk: int) -> Response:
        return answer(operations.promote_candidate(agent_of(request), candidate_pk, body_of(request)))


class CandidateDenyView(APIView):
    @extend_schema(**declared("deny_candidate"))
    def post(self, request: Request, candidate_pk: int) -> Response:
        return answer(operations.deny_candidate(agent_of(request), candidate_pk, body_of(request)))
