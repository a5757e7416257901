"""Agent API for the promotion gate (SPEC §7): candidates, replays, decisions.

Writes: input serializer → service → output serializer. Reads start from
`Candidate.objects.visible_to(agent)` (memory.selectors_candidates): another workspace's or a
`none` domain's candidate answers 404 like a missing one.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.api.pagination import BoundedLimitOffsetPagination, page_parameters
from agents.api.views import agent_of
from agents.operations import serializers as s
from agents.operations import serializers_candidates as sc
from agents.operations.inputs import validated
from agents.operations.serializers import paginated
from memory import selectors
from memory.actors import Actor
from memory.errors import NotFound, StateConflict
from memory.models import Agent, Candidate, Fact, PromotionDecision
from memory.selectors_candidates import candidate_for_agent, candidates_for_agent
from memory.services import promotion

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer}
ONE_ERRORS = {**ERRORS, 404: s.ErrorSerializer}
DECIDE_ERRORS = {**ONE_ERRORS, 409: s.ErrorSerializer}


def _candidate_body(agent: Agent, candidate_pk: int) -> dict[str, Any]:
    return sc.CandidateOut(candidate_for_agent(agent, candidate_pk)).data  # type: ignore[return-value]


class CandidateListView(APIView):
    @extend_schema(
        parameters=[sc.CandidateListQuery, *page_parameters()],
        responses={200: paginated(sc.CandidateOut, "PaginatedCandidates"), **ERRORS},
        operation_id="list_candidates",
    )
    def get(self, request: Request) -> Response:
        """Promotion candidates visible to the agent, newest first, each with its gates, replays and decisions."""
        filters = validated(sc.CandidateListQuery, request.query_params)
        qs = candidates_for_agent(agent_of(request), filters)
        paginator = BoundedLimitOffsetPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(sc.CandidateOut(page, many=True).data)

    @extend_schema(
        request=sc.CandidateIn,
        responses={201: sc.CandidateOut, 200: sc.CandidateOut, 409: s.ErrorSerializer, **ERRORS},
        operation_id="submit_candidate",
    )
    def post(self, request: Request) -> Response:
        """Submit an `awtl.memory_candidate.v2` document: 201 with its gates; the same candidate_id again
        answers 200 with the stored candidate, unchanged. Bad documents get 400 naming the field."""
        agent = agent_of(request)
        data = validated(sc.CandidateIn, request.data)
        domain = selectors.domain_for_agent(agent, domain=data["domain"], repo=data.get("repo"))
        document = promotion.parse_candidate_document(sc.document_of(data))
        candidate, created = promotion.submit_candidate(
            domain=domain, topic=data["topic"], document=document, by=Actor.of_agent(agent)
        )
        try:
            body = _candidate_body(agent, candidate.pk)
        except NotFound:
            # The id is taken by a candidate this agent may not see: say so without showing it.
            raise StateConflict(
                "This candidate_id is already used in the workspace.",
                code="candidate_id_taken",
                fields={"candidate_id": ["Already used."]},
            ) from None
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class CandidateDetailView(APIView):
    @extend_schema(responses={200: sc.CandidateOut, **ONE_ERRORS}, operation_id="get_candidate")
    def get(self, request: Request, candidate_pk: int) -> Response:
        """One candidate: its gates now, its replays, and every decision with the scorecard it was made on."""
        return Response(_candidate_body(agent_of(request), candidate_pk))


class CandidateReplayView(APIView):
    @extend_schema(
        request=sc.ReplayIn, responses={201: sc.ReplayCreatedOut, **ONE_ERRORS}, operation_id="record_replay"
    )
    def post(self, request: Request, candidate_pk: int) -> Response:
        """Record a replay of the probe; gates are recomputed. On a promoted candidate a failed replay
        challenges its fact (it leaves recall) and a passing one revalidates it."""
        agent = agent_of(request)
        data = validated(sc.ReplayIn, request.data)
        candidate = candidate_for_agent(agent, candidate_pk)
        replay = promotion.record_replay(
            candidate=candidate,
            by=Actor.of_agent(agent),
            probe=data["probe"],
            passed=data["passed"],
            details=data["details"],
        )
        candidate = candidate_for_agent(agent, candidate_pk)
        fact_status = (
            Fact.objects.filter(pk=candidate.fact_id).values_list("status", flat=True).first()
            if candidate.fact_id is not None
            else None
        )
        body = {
            **sc.ReplayOut(replay).data,
            "candidate": candidate.pk,
            "promotion_status": candidate.promotion_status,
            "gates": promotion.compute_gates(candidate),
            "fact_status": fact_status,
        }
        return Response(body, status=status.HTTP_201_CREATED)


def _decision_body(decision: PromotionDecision, candidate: Candidate) -> dict[str, Any]:
    fact = (
        Fact.objects.select_related("domain__repo").filter(pk=decision.fact_id).first()
        if decision.fact_id is not None
        else None
    )
    return {
        **sc.DecisionOut(decision).data,
        "candidate": candidate.pk,
        "promotion_status": candidate.promotion_status,
        "gates": promotion.compute_gates(candidate),
        "fact": s.FactOut(fact).data if fact is not None else None,
    }


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
        agent = agent_of(request)
        data = validated(sc.PromoteIn, request.data)
        candidate = candidate_for_agent(agent, candidate_pk)
        decision = promotion.promote(
            candidate=candidate, by=Actor.of_agent(agent), write=data["write"], auto=data["auto"]
        )
        body = _decision_body(decision, candidate_for_agent(agent, candidate_pk))
        return Response(body, status=status.HTTP_201_CREATED if decision.pk is not None else status.HTTP_200_OK)


class CandidateDenyView(APIView):
    @extend_schema(request=sc.DenyIn, responses={201: sc.PromoteOut, **DECIDE_ERRORS}, operation_id="deny_candidate")
    def post(self, request: Request, candidate_pk: int) -> Response:
        """Deny a candidate for good, recorded with its gates at that moment; 409 once decided."""
        agent = agent_of(request)
        data = validated(sc.DenyIn, request.data)
        candidate = candidate_for_agent(agent, candidate_pk)
        decision = promotion.deny(candidate=candidate, by=Actor.of_agent(agent), reason=data["reason"])
        body = _decision_body(decision, candidate_for_agent(agent, candidate_pk))
        return Response(body, status=status.HTTP_201_CREATED)
