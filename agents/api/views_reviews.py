"""Remember reviews for agent runtimes (SPEC §8): submit, wait for the person, consume, and list
a session's reviews (a restarted runtime finds the one it waited on).

Each endpoint goes through `agents.operations` (submit_review, list_reviews, get_review,
consume_review), as its MCP tool does. A review of another workspace is not found (404), like any
other row of another workspace; another agent's is not listed.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import operations
from agents.api.schema import declared
from agents.api.views import agent_of, answer, body_of
from agents.operations import serializers as s

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer, 404: s.ErrorSerializer}


class ReviewListView(APIView):
    @extend_schema(**declared("list_remember_reviews"))
    def get(self, request: Request) -> Response:
        query = request.query_params
        return answer(
            operations.list_reviews(
                agent_of(request),
                query,
                limit=query.get("limit"),
                offset=query.get("offset"),
                url=request.build_absolute_uri(),
                request=request,
            )
        )

    @extend_schema(**declared("submit_remember_review"))
    def post(self, request: Request) -> Response:
        return answer(operations.submit_review(agent_of(request), body_of(request), request=request))


class ReviewDetailView(APIView):
    @extend_schema(**declared("get_remember_review"))
    def get(self, request: Request, review_id: int) -> Response:
        return answer(operations.get_review(agent_of(request), review_id, request.query_params, request=request))


class ReviewConsumeView(APIView):
    @extend_schema(**declared("consume_remember_review"))
    def post(self, request: Request, review_id: int) -> Response:
        return answer(operations.consume_review(agent_of(request), review_id, body_of(request), request=request))
