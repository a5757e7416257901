"""Agent API for policies, conflicts and the agent's private notes (SPEC §4).

Every endpoint goes through `agents.operations`, as its MCP tool does. Reads start from
selectors, i.e. from `visible_to(agent)`; the grant check on policy writes lives in the
service, not here.
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
WRITE_ERRORS = {**ERRORS, 403: s.ErrorSerializer}


class PolicyListView(APIView):
    @extend_schema(**declared("list_policies"))
    def get(self, request: Request) -> Response:
        return page_answer(request, operations.list_policies)

    @extend_schema(**declared("propose_policy"))
    def post(self, request: Request) -> Response:
        return answer(operations.propose_policy(agent_of(request), body_of(request)))


class PolicySupersedeView(APIView):
    @extend_schema(**declared("supersede_policy"))
    def post(self, request: Request, policy_id: int) -> Response:
        return answer(operations.supersede_policy(agent_of(request), policy_id, body_of(request)))


class ConflictListView(APIView):
    @extend_schema(**declared("list_memory_conflicts"))
    def get(self, request: Request) -> Response:
        return page_answer(request, operations.list_conflicts)


class MyNotesView(APIView):
    @extend_schema(**declared("get_my_notes"))
    def get(self, request: Request) -> Response:
        return answer(operations.get_notes(agent_of(request), request.query_params))

    @extend_schema(**declared("update_my_notes"))
    def put(self, request: Request) -> Response:
        return answer(operations.update_notes(agent_of(request), body_of(request)))


class MyObservationsView(APIView):
    @extend_schema(**declared("record_observation"))
    def post(self, request: Request) -> Response:
        return answer(operations.record_observation(agent_of(request), body_of(request)))
