"""Remember reviews for agent runtimes (SPEC §8): submit, wait for the person, consume.

Each endpoint goes through `agents.operations` (submit_review, get_review, consume_review), as
its MCP tool does. A review of another workspace is not found (404), like any other row of
another workspace.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import operations
from agents.api.views import agent_of, answer, body_of
from agents.operations import serializers as s
from agents.operations import serializers_reviews as rs

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer, 404: s.ErrorSerializer}


class ReviewSubmitView(APIView):
    @extend_schema(
        request=rs.ReviewSubmitIn,
        responses={201: rs.ReviewOut, **ERRORS},
        operation_id="submit_remember_review",
    )
    def post(self, request: Request) -> Response:
        """Submit the remember sub-agent's output for a person's review; answers with the parsed
        items and the page URL to show. 400 `no_review_items` when it nominates no file."""
        return answer(operations.submit_review(agent_of(request), body_of(request), request=request))


class ReviewDetailView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "wait", float, description="seconds to long-poll while the review is pending (0–30)", required=False
            ),
            OpenApiParameter(
                "Retry-After",
                int,
                location=OpenApiParameter.HEADER,
                response=[200],
                description="set when the server holds too many long-polls to wait: seconds before polling again",
            ),
        ],
        responses={200: rs.ReviewOut, **ERRORS},
        operation_id="get_remember_review",
    )
    def get(self, request: Request, review_id: int) -> Response:
        """The review's status and, once resolved, its resolution. With `?wait=N` the call holds
        up to N seconds (max 30) while the review is pending and returns as soon as it is not.
        When the web process already holds its share of long-polls (ENGRAM_MAX_WAITERS), the
        review is returned at once with `Retry-After`: poll again after that many seconds."""
        return answer(operations.get_review(agent_of(request), review_id, request.query_params, request=request))


class ReviewConsumeView(APIView):
    @extend_schema(
        request=None,
        responses={200: rs.ReviewOut, 409: s.ErrorSerializer, **ERRORS},
        operation_id="consume_remember_review",
    )
    def post(self, request: Request, review_id: int) -> Response:
        """Mark the resolution as folded into the final answer: approved|rejected → consumed.
        409 `review_pending` while pending, `review_already_consumed` the second time."""
        return answer(operations.consume_review(agent_of(request), review_id, body_of(request), request=request))
