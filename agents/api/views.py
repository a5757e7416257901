"""Agent API views. Every endpoint is parse → `agents.operations` → render: the operation its
MCP tool calls too (tests/agents/test_operations_parity.py holds each endpoint to one tool)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import operations
from agents.api.schema import declared
from agents.api.throttling import AgentRateThrottle
from agents.operations import serializers as s
from agents.operations.inputs import refuse_unknown
from memory.models import Agent

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer, 404: s.ErrorSerializer}


def agent_of(request: Request) -> Agent:
    agent = request.user
    assert isinstance(agent, Agent)  # guaranteed by IsAgent
    return agent


def answer(result: operations.Result) -> Response:
    """An operation's result as the HTTP response (agents.operations is shared with the MCP server)."""
    return Response(result.body, status=result.status, headers=dict(result.headers) or None)


def body_of(request: Request) -> Any:
    """The JSON body of a POST or PUT. Its operation takes its arguments there only: a query
    string beside it names arguments it does not take (400 `unknown_argument`)."""
    refuse_unknown(request.query_params)
    return request.data


def page_answer(request: Request, list_operation: Callable[..., operations.Result], *args: Any) -> Response:
    """A list operation's page, asked with the request's filters, `limit`/`offset` and own address."""
    query = request.query_params
    return answer(
        list_operation(
            agent_of(request),
            *args,
            query,
            limit=query.get("limit"),
            offset=query.get("offset"),
            url=request.build_absolute_uri(),
        )
    )


class MeView(APIView):
    @extend_schema(**declared("whoami"))
    def get(self, request: Request) -> Response:
        return answer(operations.me(agent_of(request), request.query_params))


class FactListView(APIView):
    @extend_schema(**declared("list_facts"))
    def get(self, request: Request) -> Response:
        return page_answer(request, operations.list_facts)

    @extend_schema(**declared("propose_fact"))
    def post(self, request: Request) -> Response:
        return answer(operations.propose_fact(agent_of(request), body_of(request)))


class FactBatchView(APIView):
    @extend_schema(**declared("propose_facts"))
    def post(self, request: Request) -> Response:
        items = request.data.get("items") if isinstance(request.data, Mapping) else None
        if isinstance(items, list) and len(items) <= settings.ENGRAM_BATCH_MAX_ITEMS:
            for throttle in self.get_throttles():
                if isinstance(throttle, AgentRateThrottle):
                    throttle.charge(request, self, len(items) - 1)
        return answer(operations.propose_facts_batch(agent_of(request), body_of(request)))


class FactDetailView(APIView):
    @extend_schema(**declared("get_fact"))
    def get(self, request: Request, fact_id: int) -> Response:
        return answer(operations.get_fact(agent_of(request), fact_id, request.query_params))


class FactSupersedeView(APIView):
    @extend_schema(**declared("supersede_fact"))
    def post(self, request: Request, fact_id: int) -> Response:
        return answer(operations.supersede_fact(agent_of(request), fact_id, body_of(request)))


class EpisodeCreateView(APIView):
    @extend_schema(**declared("create_episode"))
    def post(self, request: Request) -> Response:
        return answer(operations.create_episode(agent_of(request), body_of(request)))


class RememberView(APIView):
    @extend_schema(**declared("remember"))
    def post(self, request: Request) -> Response:
        return answer(operations.remember(agent_of(request), body_of(request)))


class ConsolidateView(APIView):
    @extend_schema(**declared("consolidate_memory"))
    def post(self, request: Request) -> Response:
        return answer(operations.consolidate(agent_of(request), body_of(request)))


class HarmonizeView(APIView):
    @extend_schema(**declared("harmonize_memory"))
    def post(self, request: Request) -> Response:
        return answer(operations.harmonize(agent_of(request), body_of(request)))


class PreambleView(APIView):
    @extend_schema(**declared("get_preamble"))
    def post(self, request: Request) -> Response:
        return answer(operations.get_preamble(agent_of(request), body_of(request)))


class SearchView(APIView):
    @extend_schema(**declared("search_memory"))
    def post(self, request: Request) -> Response:
        return answer(operations.search(agent_of(request), body_of(request)))
