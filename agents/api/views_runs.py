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
from agents.api.views import agent_of, answer, body_of
from agents.operations import serializers as s
from agents.operations import serializers_runs as sr

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer}
RUN_ERRORS = {**ERRORS, 404: s.ErrorSerializer}
WRITE_ERRORS = {**RUN_ERRORS, 409: s.ErrorSerializer}


class RunCreateView(APIView):
    @extend_schema(request=sr.RunIn, responses={201: sr.RunOut, **ERRORS}, operation_id="create_memory_run")
    def post(self, request: Request) -> Response:
        """Open a run for a long task: an empty memory bank and a `run` episode."""
        return answer(ops.create_run(agent_of(request), body_of(request), request=request))


class RunBankView(APIView):
    @extend_schema(responses={200: sr.BankOut, **RUN_ERRORS}, operation_id="memory_get_bank")
    def get(self, request: Request, run_id: int) -> Response:
        """The run's memory bank: status (progress, for the memory agent only), knowledge, procedural."""
        return answer(ops.get_bank(agent_of(request), run_id, request.query_params))


class RunStatusView(APIView):
    @extend_schema(
        request=sr.StatusIn, responses={200: sr.StatusOut, **WRITE_ERRORS}, operation_id="memory_update_status"
    )
    def post(self, request: Request, run_id: int) -> Response:
        """memory_update_status: replace the progress note."""
        return answer(ops.update_status(agent_of(request), run_id, body_of(request)))


class RunKnowledgeView(APIView):
    @extend_schema(
        request=sr.KnowledgeIn,
        responses={201: sr.SavedItemOut, 200: sr.SavedItemOut, **WRITE_ERRORS},
        operation_id="memory_save_knowledge",
    )
    def post(self, request: Request, run_id: int) -> Response:
        """memory_save_knowledge: a stable fact (requirement, path, constraint); 201 when new, 200 when
        an item with this id was replaced."""
        return answer(ops.save_knowledge(agent_of(request), run_id, body_of(request)))


class RunProceduralView(APIView):
    @extend_schema(
        request=sr.ProceduralIn,
        responses={201: sr.SavedItemOut, 200: sr.SavedItemOut, **WRITE_ERRORS},
        operation_id="memory_save_procedural",
    )
    def post(self, request: Request, run_id: int) -> Response:
        """memory_save_procedural: an attempt and its outcome (a command that failed or worked, a
        diagnosis); 201 when new, 200 when an item with this id was replaced."""
        return answer(ops.save_procedural(agent_of(request), run_id, body_of(request)))


class RunItemView(APIView):
    @extend_schema(
        parameters=[sr.DeleteQuery],
        responses={200: sr.DeletedOut, **WRITE_ERRORS},
        operation_id="memory_delete",
    )
    def delete(self, request: Request, run_id: int, item_id: str) -> Response:
        """memory_delete: remove the knowledge and procedural items with this id (`?kind=` narrows
        it); 404 `bank_item_not_found` when there is none. The status note is updated, not deleted."""
        return answer(ops.delete_item(agent_of(request), run_id, item_id, request.query_params))


class RunInterventionView(APIView):
    @extend_schema(
        request=sr.InterventionIn,
        responses={201: sr.InterventionOut, **WRITE_ERRORS},
        operation_id="memory_log_decision",
    )
    def post(self, request: Request, run_id: int) -> Response:
        """Log one decision of the memory agent before step `step`: a reminder, or `null` for
        selective silence (logged too)."""
        return answer(ops.intervene(agent_of(request), run_id, body_of(request)))


class RunFinishView(APIView):
    @extend_schema(
        request=sr.FinishIn,
        responses={200: sr.FinishOut, **WRITE_ERRORS},
        operation_id="finish_memory_run",
    )
    def post(self, request: Request, run_id: int) -> Response:
        """Finish the run. With `offer_candidates: true` the knowledge and procedural items become
        promotion candidates (origin memory_agent, human review required) — never facts. 409 the
        second time."""
        return answer(ops.finish_run(agent_of(request), run_id, body_of(request), request=request))
