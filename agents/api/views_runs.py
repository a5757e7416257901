"""Agent API for proactive memory-agent runs (SPEC §9): the run, its memory bank, each decision,
and the end of the run. A run belongs to the agent that opened it: for any other agent, even in
the same workspace, it does not exist (404 `run_not_found`). A finished run is read-only (409).

Each view is input serializer → service → output serializer, through `agents.operations`,
which the MCP server calls too.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import operations as ops
from agents.api.schema import declared
from agents.api.views import agent_of, answer, body_of
from agents.operations import serializers as s

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer}
RUN_ERRORS = {**ERRORS, 404: s.ErrorSerializer}
WRITE_ERRORS = {**RUN_ERRORS, 409: s.ErrorSerializer}


class RunCreateView(APIView):
    @extend_schema(**declared("create_memory_run"))
    def post(self, request: Request) -> Response:
        return answer(ops.create_run(agent_of(request), body_of(request), request=request))


class RunBankView(APIView):
    @extend_schema(**declared("memory_get_bank"))
    def get(self, request: Request, run_id: int) -> Response:
        return answer(ops.get_bank(agent_of(request), run_id, request.query_params))


class RunStatusView(APIView):
    @extend_schema(**declared("memory_update_status"))
    def post(self, request: Request, run_id: int) -> Response:
        return answer(ops.update_status(agent_of(request), run_id, body_of(request)))


class RunKnowledgeView(APIView):
    @extend_schema(**declared("memory_save_knowledge"))
    def post(self, request: Request, run_id: int) -> Response:
        return answer(ops.save_knowledge(agent_of(request), run_id, body_of(request)))


class RunProceduralView(APIView):
    @extend_schema(**declared("memory_save_procedural"))
    def post(self, request: Request, run_id: int) -> Response:
        return answer(ops.save_procedural(agent_of(request), run_id, body_of(request)))


class RunItemView(APIView):
    @extend_schema(**declared("memory_delete"))
    def delete(self, request: Request, run_id: int, item_id: str) -> Response:
        return answer(ops.delete_item(agent_of(request), run_id, item_id, request.query_params))


class RunInterventionView(APIView):
    @extend_schema(**declared("memory_log_decision"))
    def post(self, request: Request, run_id: int) -> Response:
        return answer(ops.intervene(agent_of(request), run_id, body_of(request)))


class RunFinishView(APIView):
    @extend_schema(**declared("finish_memory_run"))
    def post(self, request: Request, run_id: int) -> Response:
        return answer(ops.finish_run(agent_of(request), run_id, body_of(request), request=request))
