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
from agents.api.pagination import page_parameters
from agents.api.views import agent_of, answer, body_of, page_answer
from agents.operations import serializers as s
from agents.operations import serializers_candidates as sc
from agents.operations.serializers import paginated

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer}
ONE_ERRORS = {**ERRORS, 404: s.ErrorSerializer}
DECIDE_ERRORS = {**ONE_ERRORS, 409: s.ErrorSerializer}


class CandidateListView(APIView):
    @extend_schema(
        parameters=[sc.CandidateListQuery, *page_parameters()],
        responses={200: paginated(sc.CandidateOut, "PaginatedCandidates"), **ERRORS},
        operation_id="list_candidates",
    )
    def get(self, request: Request) -> Response:
        """Promotion candidates visible to the agent, newest first, each with its gates, replays and decisions."""
        return page_answer(request, operations.list_candidates)

    @extend_schema(
        request=sc.CandidateIn,
        responses={201: sc.CandidateOut, 200: sc.CandidateOut, 409: s.ErrorSerializer, **ERRORS},
        operation_id="submit_candidate",
    )
    def post(self, request: Request) -> Response:
        """Submit an `awtl.memory_candidate.v2` document: 201 with its gates; the same candidate_id again
        answers 200 with the stored candidate, unchanged. Bad documents get 400 naming the field."""
        return answer(operations.submit_candidate(agent_of(request), body_of(request)))


class CandidateDetailView(APIView):
    @extend_schema(responses={200: sc.CandidateOut, **ONE_ERRORS}, operation_id="get_candidate")
    def get(self, request: Request, candidate_pk: int) -> Response:
        """One candidate: its gates now, its replays, and every decision with the scorecard it was made on."""
        return answer(operations.get_candidate(agent_of(request), candidate_pk, request.query_params))


class CandidateReplayView(APIView):
    @extend_schema(
        request=sc.ReplayIn, responses={201: sc.ReplayCreatedOut, **ONE_ERRORS}, operation_id="record_replay"
    )
    def post(self, request: Request, candidate_pk: int) -> Response:
        """Record a replay of the probe; gates are recomputed. On a promoted candidate a failed replay
        challenges its fact (it leaves recall) and a passing one revalidates it."""
        return answer(operations.record_replay(agent_of(request), candidate_pk, body_of(request)))


class CandidatePromoteView(APIView):
    @extend_schema(
        request=sc.PromoteIn,
        responses={200: sc.PromoteOut, 201: sc.PromoteOut, **DECIDE_ERRORS},
        operation_id="promote_candidate",
    )
    def post(self, request: Request, candidate_pk: int) -> Response:
        """Decide a candidate. Without `write: true` a dry run: 200 with the decision it would make, nothing
        written. With it: 201 with the recorded decision and its scorecard, and the fact only when every
        gate passed (else the decision is `refused` and the candidate stays open). 409 once decided."""
        return answer(operations.promote_candidate(agent_of(request), candidate_pk, body_of(request)))


class CandidateDenyView(APIView):
    @extend_schema(request=sc.DenyIn, responses={201: sc.PromoteOut, **DECIDE_ERRORS}, operation_id="deny_candidate")
    def post(self, request: Request, candidate_pk: int) -> Response:
        """Deny a candidate for good, recorded with its gates at that moment; 409 once decided."""
        return answer(operations.deny_candidate(agent_of(request), candidate_pk, body_of(request)))
