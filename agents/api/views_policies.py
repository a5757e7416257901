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
from agents.api.pagination import page_parameters
from agents.api.views import agent_of, answer, body_of, page_answer
from agents.operations import serializers as s

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer}
WRITE_ERRORS = {**ERRORS, 403: s.ErrorSerializer}


class PolicyListView(APIView):
    @extend_schema(
        parameters=[s.PolicyListQuery, *page_parameters()],
        responses={200: s.paginated(s.PolicyOut, "PaginatedPolicies"), **ERRORS},
        operation_id="list_policies",
    )
    def get(self, request: Request) -> Response:
        """Policies visible to the agent (never another workspace's, never a `none` domain's), newest first."""
        return page_answer(request, operations.list_policies)

    @extend_schema(
        request=s.PolicyProposeIn,
        responses={201: s.PolicyOut, 409: s.ErrorSerializer, **WRITE_ERRORS},
        operation_id="propose_policy",
    )
    def post(self, request: Request) -> Response:
        """propose_policy: a new active policy; 403 `insufficient_memory_permission` without `write` on the domain;
        400 on `rule` past ENGRAM_POLICY_MAX_CHARS; 409 `policy_budget_exceeded` when the active policies would
        cost more than the workspace's budget (the body's `budget`: chars, chars_after, budget)."""
        return answer(operations.propose_policy(agent_of(request), body_of(request)))


class PolicySupersedeView(APIView):
    @extend_schema(
        request=s.PolicySupersedeIn,
        responses={201: s.PolicyOut, 404: s.ErrorSerializer, 409: s.ErrorSerializer, **WRITE_ERRORS},
        operation_id="supersede_policy",
    )
    def post(self, request: Request, policy_id: int) -> Response:
        """supersede_policy: replace a live policy with a new version; 403 without `write`, 409 if already replaced
        (`policy_not_live`) or if the revision takes the active policies past the budget (`policy_budget_exceeded`)."""
        return answer(operations.supersede_policy(agent_of(request), policy_id, body_of(request)))


class ConflictListView(APIView):
    @extend_schema(
        parameters=[s.ConflictListQuery, *page_parameters()],
        responses={200: s.paginated(s.ConflictOut, "PaginatedConflicts"), **ERRORS},
        operation_id="list_memory_conflicts",
    )
    def get(self, request: Request) -> Response:
        """list_memory_conflicts: recorded conflicts outside the agent's `none` domains, newest first."""
        return page_answer(request, operations.list_conflicts)


class MyNotesView(APIView):
    @extend_schema(responses={200: s.NotesOut, 401: s.ErrorSerializer}, operation_id="get_my_notes")
    def get(self, request: Request) -> Response:
        """The calling agent's private scratchpad and its latest observations; no other agent can read them."""
        return answer(operations.get_notes(agent_of(request), request.query_params))

    @extend_schema(request=s.NotesIn, responses={200: s.NotesOut, **ERRORS}, operation_id="update_my_notes")
    def put(self, request: Request) -> Response:
        """update_my_notes: replace the whole scratchpad (verbatim; injected into this agent's dispatches)."""
        return answer(operations.update_notes(agent_of(request), body_of(request)))


class MyObservationsView(APIView):
    @extend_schema(
        request=s.ObservationIn, responses={201: s.ObservationOut, **ERRORS}, operation_id="record_observation"
    )
    def post(self, request: Request) -> Response:
        """record_observation: note something seen; it can be cited as a fact's source."""
        return answer(operations.record_observation(agent_of(request), body_of(request)))
