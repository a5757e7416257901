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
from agents.api.pagination import page_parameters
from agents.api.throttling import AgentRateThrottle
from agents.operations import serializers as s
from agents.operations.inputs import refuse_unknown
from agents.operations.serializers_as_of import FactDetailQuery
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
    @extend_schema(responses={200: s.MeSerializer, 401: s.ErrorSerializer}, operation_id="whoami")
    def get(self, request: Request) -> Response:
        """The calling agent: its name, role and workspace."""
        return answer(operations.me(agent_of(request), request.query_params))


class FactListView(APIView):
    @extend_schema(
        parameters=[s.FactListQuery, *page_parameters()],
        responses={200: s.paginated(s.FactOut, "PaginatedFacts"), **ERRORS},
        operation_id="list_facts",
    )
    def get(self, request: Request) -> Response:
        """Facts visible to the agent (never another workspace's, never a `none` domain's)."""
        return page_answer(request, operations.list_facts)

    @extend_schema(request=s.FactProposeIn, responses={201: s.ProposalOut, **ERRORS}, operation_id="propose_fact")
    def post(self, request: Request) -> Response:
        """propose_fact: write through re-mention and conflict detection (SPEC §3). 403 `veracity_not_allowed`
        for `human_stated` from an agent that does not relay people's words; 400 for an `observed_at` in the
        future or an `episode_id` this agent did not open (`unknown_episode`)."""
        return answer(operations.propose_fact(agent_of(request), body_of(request)))


class FactBatchView(APIView):
    @extend_schema(request=s.FactBatchIn, responses={200: s.FactBatchOut, **ERRORS}, operation_id="propose_facts")
    def post(self, request: Request) -> Response:
        """propose_facts: up to ENGRAM_BATCH_MAX_ITEMS (100) facts, each with the fields of POST facts/
        and written exactly as POST facts/ would write it, in order: a later item restating an earlier
        one re-mentions it, one contradicting it is a conflict. Vectors for the batch are computed
        together first; the writes then commit together, a refused item undone alone (a 500 writes none).
        Always 200 once the batch is accepted, with one result per item in order: `status` 201 and POST facts/'s answer, or the
        item's error status and `error` body (400, 403 `veracity_not_allowed`…; nothing written for
        it, the other items are). 400 `batch_empty` / `batch_too_large` (or no `items` list) writes
        nothing. Counts as one request per item against the agent's rate limit (429 writes nothing)."""
        items = request.data.get("items") if isinstance(request.data, Mapping) else None
        if isinstance(items, list) and len(items) <= settings.ENGRAM_BATCH_MAX_ITEMS:
            for throttle in self.get_throttles():
                if isinstance(throttle, AgentRateThrottle):
                    throttle.charge(request, self, len(items) - 1)
        return answer(operations.propose_facts_batch(agent_of(request), body_of(request)))


class FactDetailView(APIView):
    @extend_schema(parameters=[FactDetailQuery], responses={200: s.FactDetailOut, **ERRORS}, operation_id="get_fact")
    def get(self, request: Request, fact_id: int) -> Response:
        """One fact with its whole supersession chain, its conflicts (possible ones included) and what
        was said each time it was stated again (`mentions`, newest first, at most 50 of `mentions_total`).
        `?as_of=` shows all of it as it was at that moment."""
        return answer(operations.get_fact(agent_of(request), fact_id, request.query_params))


class FactSupersedeView(APIView):
    @extend_schema(
        request=s.FactSupersedeIn,
        responses={201: s.FactOut, 409: s.ErrorSerializer, **ERRORS},
        operation_id="supersede_fact",
    )
    def post(self, request: Request, fact_id: int) -> Response:
        """supersede_fact: replace a live fact with a new version and a reason; 409 if already replaced."""
        return answer(operations.supersede_fact(agent_of(request), fact_id, body_of(request)))


class EpisodeCreateView(APIView):
    @extend_schema(request=s.EpisodeIn, responses={201: s.EpisodeOut, **ERRORS}, operation_id="create_episode")
    def post(self, request: Request) -> Response:
        """Start an episode; facts proposed with its id are linked to it (the knowledge graph)."""
        return answer(operations.create_episode(agent_of(request), body_of(request)))


class RememberView(APIView):
    @extend_schema(request=s.RememberIn, responses={201: s.HotEntryOut, **ERRORS}, operation_id="remember")
    def post(self, request: Request) -> Response:
        """remember: keep a session-scoped entry in the hot tier until consolidation."""
        return answer(operations.remember(agent_of(request), body_of(request)))


class ConsolidateView(APIView):
    @extend_schema(
        request=s.ConsolidateIn,
        responses={200: s.ConsolidateOut, 202: s.ConsolidateOut, **ERRORS},
        operation_id="consolidate_memory",
    )
    def post(self, request: Request) -> Response:
        """consolidate_memory: promote hot-tier entries to facts and merge near-duplicates. One job at a
        time per agent and session: while one is queued or running, the answer is 202 with its `task_id`
        and `joined: true` instead of a second job."""
        return answer(operations.consolidate(agent_of(request), body_of(request)))


class HarmonizeView(APIView):
    @extend_schema(
        request=s.HarmonizeIn,
        responses={200: s.HarmonizeOut, 202: s.HarmonizeOut, **ERRORS},
        operation_id="harmonize_memory",
    )
    def post(self, request: Request) -> Response:
        """harmonize_memory: resolve contradicting facts written by different agents. One job at a time
        per workspace: while one is queued or running, the answer is 202 with its `task_id` and
        `joined: true` instead of a second job."""
        return answer(operations.harmonize(agent_of(request), body_of(request)))


class PreambleView(APIView):
    @extend_schema(request=s.PreambleIn, responses={200: s.PreambleOut, **ERRORS}, operation_id="get_preamble")
    def post(self, request: Request) -> Response:
        """The dispatch preamble (SPEC §5): policies, working memory, up to 5 keyword facts, closing line."""
        return answer(operations.get_preamble(agent_of(request), body_of(request)))


class SearchView(APIView):
    @extend_schema(request=s.SearchIn, responses={200: s.SearchOut, **ERRORS}, operation_id="search_memory")
    def post(self, request: Request) -> Response:
        """search_memory (SPEC §6): keyword, semantic or the four-voice hybrid (default)."""
        return answer(operations.search(agent_of(request), body_of(request)))
