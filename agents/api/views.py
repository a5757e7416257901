"""Agent API views. An endpoint with an MCP tool is parse → `agents.operations` → render, the
operation the tool calls; the others are input serializer → service → output serializer, and
reads start from selectors."""

from __future__ import annotations

from collections.abc import Mapping

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import operations
from agents.api.pagination import BoundedLimitOffsetPagination, page_parameters
from agents.api.throttling import AgentRateThrottle
from agents.operations import serializers as s
from agents.operations.inputs import validated
from memory import selectors
from memory.actors import Actor
from memory.models import Agent
from memory.services import facts as fact_services

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer, 404: s.ErrorSerializer}


def agent_of(request: Request) -> Agent:
    agent = request.user
    assert isinstance(agent, Agent)  # guaranteed by IsAgent
    return agent


def answer(result: operations.Result) -> Response:
    """An operation's result as the HTTP response (agents.operations is shared with the MCP server)."""
    return Response(result.body, status=result.status)


class MeView(APIView):
    @extend_schema(responses={200: s.MeSerializer, 401: s.ErrorSerializer}, operation_id="me")
    def get(self, request: Request) -> Response:
        """The calling agent: its name, role and workspace."""
        return Response(s.MeSerializer(request.user).data)


class FactListView(APIView):
    @extend_schema(
        parameters=[s.FactListQuery, *page_parameters()],
        responses={200: s.paginated(s.FactOut, "PaginatedFacts"), **ERRORS},
        operation_id="facts_list",
    )
    def get(self, request: Request) -> Response:
        """Facts visible to the agent (never another workspace's, never a `none` domain's)."""
        filters = validated(s.FactListQuery, request.query_params)
        qs = selectors.facts_for_agent(agent_of(request), filters)
        paginator = BoundedLimitOffsetPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(s.FactOut(page, many=True).data)

    @extend_schema(request=s.FactProposeIn, responses={201: s.ProposalOut, **ERRORS}, operation_id="propose_fact")
    def post(self, request: Request) -> Response:
        """propose_fact: write through re-mention and conflict detection (SPEC §3). 403 `veracity_not_allowed`
        for `human_stated` from an agent that does not relay people's words; 400 for an `observed_at` in the
        future or an `episode_id` this agent did not open (`unknown_episode`)."""
        return answer(operations.propose_fact(agent_of(request), request.data))


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
        return answer(operations.propose_facts_batch(agent_of(request), request.data))


class FactDetailView(APIView):
    @extend_schema(responses={200: s.FactDetailOut, **ERRORS}, operation_id="facts_retrieve")
    def get(self, request: Request, fact_id: int) -> Response:
        """One fact with its whole supersession chain, its conflicts (possible ones included) and what
        was said each time it was stated again (`mentions`, newest first, at most 50 of `mentions_total`)."""
        fact = selectors.fact_for_agent(agent_of(request), fact_id)
        history = selectors.fact_history(fact)
        conflicts = list(selectors.conflicts_of([f.pk for f in history]))
        mentions, mentions_total = selectors.mentions_of(fact)
        context = {"history": history, "conflicts": conflicts, "mentions": mentions, "mentions_total": mentions_total}
        return Response(s.FactDetailOut(fact, context=context).data)


class FactSupersedeView(APIView):
    @extend_schema(
        request=s.FactSupersedeIn,
        responses={201: s.FactOut, 409: s.ErrorSerializer, **ERRORS},
        operation_id="supersede_fact",
    )
    def post(self, request: Request, fact_id: int) -> Response:
        """supersede_fact: replace a live fact with a new version and a reason; 409 if already replaced."""
        return answer(operations.supersede_fact(agent_of(request), fact_id, request.data))


class EpisodeCreateView(APIView):
    @extend_schema(request=s.EpisodeIn, responses={201: s.EpisodeOut, **ERRORS}, operation_id="create_episode")
    def post(self, request: Request) -> Response:
        """Start an episode; facts proposed with its id are linked to it (the knowledge graph)."""
        agent = agent_of(request)
        data = validated(s.EpisodeIn, request.data)
        episode = fact_services.create_episode(
            workspace_id=agent.workspace_id,
            by=Actor.of_agent(agent),
            kind=data["kind"],
            title=data["title"],
            started_at=data.get("started_at"),
        )
        return Response(s.EpisodeOut(episode).data, status=status.HTTP_201_CREATED)


class RememberView(APIView):
    @extend_schema(request=s.RememberIn, responses={201: s.HotEntryOut, **ERRORS}, operation_id="remember")
    def post(self, request: Request) -> Response:
        """remember: keep a session-scoped entry in the hot tier until consolidation."""
        return answer(operations.remember(agent_of(request), request.data))


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
        return answer(operations.consolidate(agent_of(request), request.data))


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
        return answer(operations.harmonize(agent_of(request), request.data))


class PreambleView(APIView):
    @extend_schema(request=s.PreambleIn, responses={200: s.PreambleOut, **ERRORS}, operation_id="get_preamble")
    def post(self, request: Request) -> Response:
        """The dispatch preamble (SPEC §5): policies, working memory, up to 5 keyword facts, closing line."""
        return answer(operations.get_preamble(agent_of(request), request.data))


class SearchView(APIView):
    @extend_schema(request=s.SearchIn, responses={200: s.SearchOut, **ERRORS}, operation_id="search_memory")
    def post(self, request: Request) -> Response:
        """search_memory (SPEC §6): keyword, semantic or the four-voice hybrid (default)."""
        return answer(operations.search(agent_of(request), request.data))
