"""The agent tools over the Model Context Protocol (`python manage.py mcp`, stdio).

Each tool is named as in SPEC.md and calls `agents.operations` — the same serializers,
selectors and services as the HTTP API — so a tool answers exactly what the matching endpoint
answers: the same JSON (as `structuredContent`, and as text for clients that read only text),
and on refusal the API's error body `{"code", "detail", "fields"}` with `isError` set.

The server acts as one agent: the one whose key is in ENGRAM_AGENT_KEY. The key is checked at
start (the command refuses to start without a valid one) and again on every call, so revoking
it in the admin stops a running server at its next call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Literal

from django.db import close_old_connections
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from agents import operations as ops
from memory.models import Agent, hash_key

logger = logging.getLogger("engram.mcp")

# The enumerations of the tools' signatures, spelled out for the JSON schema the MCP client
# sees; tests/agents/test_operations_parity.py holds each equal to the model choices it mirrors.
SearchMode = Literal["keyword", "semantic", "hybrid"]
MemoryType = Literal["commitment", "event", "observation", "decision", "convention", "procedure", "profile"]
# What an agent may state (issue 13). human_stated is offered only to an agent a workspace admin
# marked as relaying people's words; the service refuses it from any other (veracity_not_allowed).
AgentVeracity = Literal["agent_inferred", "tool_generated", "imported"]
RelayVeracity = Literal["agent_inferred", "tool_generated", "imported", "human_stated"]
ConflictStatus = Literal["open", "decided", "dismissed"]
BankItemKind = Literal["knowledge", "procedural"]
FailureClass = Literal[
    "agent_failure", "verification_failure", "environment_blocker", "flaky_blocker", "harness_blocker"
]

INSTRUCTIONS = """Engram is this workspace's governed long-term memory.
Start a task with get_preamble; verify what matters with search_memory before relying on it.
Propose durable knowledge with propose_fact, or many facts at once with propose_facts
(re-mentions and conflicts are detected for you).
Keep private notes with update_my_notes and record_observation. For a long task, open a run with
create_memory_run and keep its memory bank with the memory_* tools; finish_memory_run can offer
bank items as promotion candidates for a person to review — never as facts."""

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
REPLACE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


class AgentKeyError(Exception):
    """ENGRAM_AGENT_KEY is missing, unknown or revoked."""


def agent_for_key(key: str) -> Agent:
    """The active agent holding `key`. Raises AgentKeyError with a sentence a person can act on."""
    key = (key or "").strip()
    if not key:
        raise AgentKeyError(
            "Set ENGRAM_AGENT_KEY to an agent key (create one with "
            "`python manage.py create_agent --workspace SLUG --name NAME --role ROLE`)."
        )
    agent = Agent.objects.select_related("workspace", "role").filter(key_hash=hash_key(key)).first()
    if agent is None:
        raise AgentKeyError("ENGRAM_AGENT_KEY is not a valid agent key.")
    if agent.revoked_at is not None:
        raise AgentKeyError(f"The key in ENGRAM_AGENT_KEY (agent {agent.name!r}) was revoked; ask for a new one.")
    return agent


def _json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, default=str)


def _result(status: int, body: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=_json(body))], structured_content=body, is_error=status >= 400
    )


def _given(**arguments: Any) -> dict[str, Any]:
    """The arguments the caller set: left at None, the API's own default applies (as over HTTP)."""
    return {k: v for k, v in arguments.items() if v is not None}


class EngramTools:
    """The tools of one agent. `call` wraps every operation: a fresh agent row (revocation is
    seen at once), Django's connection housekeeping, and the API's error mapping."""

    def __init__(self, key: str, *, site_url: str = "") -> None:
        self.key = key
        self.site_url = site_url.rstrip("/")
        agent = agent_for_key(key)
        self.agent_id = agent.pk
        self.relays_human_words = agent.relays_human_words

    def call(self, operation: Callable[..., ops.Result], *args: Any, **kwargs: Any) -> CallToolResult:
        close_old_connections()
        try:
            try:
                agent = agent_for_key(self.key)
            except AgentKeyError as exc:
                return _result(401, {"code": "invalid_key", "detail": str(exc), "fields": {}})
            try:
                result = operation(agent, *args, **kwargs)
            except Exception as exc:
                answer = ops.error_result(exc)
                if answer is None:
                    logger.exception("MCP tool failed")
                    return _result(500, {"code": "server_error", "detail": "Something went wrong; it was logged."})
                return _result(answer.status, answer.body)
            return _result(result.status, result.body)
        finally:
            close_old_connections()


def build_server(key: str, *, site_url: str = "") -> MCPServer:
    """An MCPServer exposing the agent tools as the agent holding `key` (AgentKeyError if none)."""
    tools = EngramTools(key, site_url=site_url)
    server: MCPServer = MCPServer(name="engram", instructions=INSTRUCTIONS)

    # --- recall ----------------------------------------------------------------------------
    @server.tool(annotations=WRITE)  # it opens a dispatch episode and counts recalls
    def get_preamble(task: str, repo: str | None = None) -> CallToolResult:
        """The dispatch preamble: every active policy, your private notes, up to 5 keyword-matched
        facts for the task (tasks of 20+ characters), and a closing line. Call it when a task starts."""
        return tools.call(ops.get_preamble, _given(task=task, repo=repo))

    @server.tool(annotations=READ)
    def search_memory(
        query: str,
        mode: SearchMode = "hybrid",
        repo: str | None = None,
        domain: str | None = None,
        limit: int = 10,
    ) -> CallToolResult:
        """Search long-term memory. hybrid (default) fuses lexical, semantic, recency and graph voices;
        keyword is full-text only; semantic fuses full-text and vectors. `domain` like `architecture`
        or `repo:<slug>/architecture`; `repo` ranks that repo's facts first. limit 1–50."""
        return tools.call(ops.search, _given(query=query, mode=mode, repo=repo, domain=domain, limit=limit))

    # --- writes ----------------------------------------------------------------------------
    def propose_fact(
        domain: str,
        topic: str,
        content: str,
        memory_type: MemoryType,
        repo: str | None = None,
        veracity: AgentVeracity = "agent_inferred",
        observed_at: str | None = None,
        valid_until: str | None = None,
        source_observation_ids: list[int] | None = None,
        episode_id: int | None = None,
    ) -> CallToolResult:
        """Propose a fact. Stating a known fact again re-mentions it (your words are kept as a
        mention); a contradiction on the same domain+topic is resolved (higher veracity, then
        confidence, then newer wins) and recorded; when the wording cannot tell, both facts stay
        live and a person decides. veracity: agent_inferred (default), tool_generated or imported.
        observed_at: when it was true (default now; never in the future). episode_id: an episode
        you opened (your preamble, search or memory run). Answers the fact, the outcome (created,
        re_mentioned, conflict_won, conflict_lost or possible_conflict, with conflict_id) and the
        reason."""
        raw = _given(
            domain=domain,
            repo=repo,
            topic=topic,
            content=content,
            memory_type=memory_type,
            veracity=veracity,
            observed_at=observed_at,
            valid_until=valid_until,
            source_observation_ids=source_observation_ids,
            episode_id=episode_id,
        )
        return tools.call(ops.propose_fact, raw)

    if tools.relays_human_words:
        # Read when the server starts; the service checks the flag again on every call.
        propose_fact.__annotations__["veracity"] = "RelayVeracity"
        propose_fact.__doc__ = (propose_fact.__doc__ or "") + (
            "\n        You relay people's own words: use human_stated only for what a person said."
        )
    server.tool(annotations=WRITE)(propose_fact)

    @server.tool(annotations=WRITE)
    def propose_facts(items: list[dict[str, Any]]) -> CallToolResult:
        """Propose up to 100 facts at once (ENGRAM_BATCH_MAX_ITEMS), each an object with
        propose_fact's arguments (domain, topic, content, memory_type, and optionally repo,
        veracity, observed_at, valid_until, source_observation_ids, episode_id). They are written in
        order exactly as propose_fact would write them one after another — a later item restating
        an earlier one re-mentions it. Answers one result per item, in order:
        status 201 with the fact and outcome, or the item's error status and `error` (nothing
        written for that item); plus `created` and `failed` counts. An empty or too long list is
        refused whole (batch_empty, batch_too_large)."""
        return tools.call(ops.propose_facts_batch, {"items": items})

    @server.tool(annotations=WRITE)
    def supersede_fact(fact_id: int, content: str, reason: str | None = None) -> CallToolResult:
        """Replace a live fact with a new version (the old one stays in its history)."""
        return tools.call(ops.supersede_fact, fact_id, _given(content=content, reason=reason))

    @server.tool(annotations=WRITE)
    def propose_policy(
        domain: str,
        rule: str,
        repo: str | None = None,
        required_role: str | None = None,
        derived_from: list[int] | None = None,
    ) -> CallToolResult:
        """Propose a normative rule (it goes into every dispatch). Needs `write` on the domain,
        else the error code is insufficient_memory_permission."""
        raw = _given(domain=domain, repo=repo, rule=rule, required_role=required_role, derived_from=derived_from)
        return tools.call(ops.propose_policy, raw)

    @server.tool(annotations=READ)
    def list_memory_conflicts(
        domain: str | None = None,
        repo: str | None = None,
        topic: str | None = None,
        limit: int = 50,
        offset: int = 0,
        status: ConflictStatus | None = None,
    ) -> CallToolResult:
        """Recorded conflicts between facts: the pair (existing, proposed), winner, loser, the rule
        that decided, when. status open: possible conflicts a person has yet to decide (no winner,
        both facts live); dismissed: a person said both are true. One page: limit 1–200
        (ENGRAM_API_MAX_PAGE_SIZE), offset ≥ 0; out of range is refused (invalid_input). `next` and
        `previous` are the API's links to the neighbouring pages, null at either end."""
        raw = _given(domain=domain, repo=repo, topic=topic, status=status)
        return tools.call(ops.list_conflicts, raw, limit=limit, offset=offset, site_url=tools.site_url)

    @server.tool(annotations=REPLACE)
    def update_my_notes(notes: str) -> CallToolResult:
        """Replace your whole private scratchpad (kept across runs, injected into your dispatches)."""
        return tools.call(ops.update_notes, {"notes": notes})

    @server.tool(annotations=WRITE)
    def record_observation(text: str) -> CallToolResult:
        """Note something you saw; its id can be cited as a fact's source."""
        return tools.call(ops.record_observation, {"text": text})

    @server.tool(annotations=WRITE)
    def remember(
        session_id: str, content: str, domain: str | None = None, repo: str | None = None, topic: str | None = None
    ) -> CallToolResult:
        """Keep a session-scoped entry in the hot tier until consolidate_memory."""
        raw = _given(session_id=session_id, content=content, domain=domain, repo=repo, topic=topic)
        return tools.call(ops.remember, raw)

    @server.tool(annotations=WRITE)
    def consolidate_memory(session_id: str | None = None) -> CallToolResult:
        """Promote hot-tier entries to facts (normal write rules) and merge near-duplicates."""
        return tools.call(ops.consolidate, _given(session_id=session_id))

    @server.tool(annotations=WRITE)
    def submit_remember_review(
        session_id: str, output: str, files: dict[str, str] | None = None, repo: str | None = None
    ) -> CallToolResult:
        """Hand the remember sub-agent's output (a fenced JSON block of recommendations) and the
        nominated files' texts to a person. Answers the pending review and its review_url."""
        raw = _given(session_id=session_id, output=output, files=files, repo=repo)
        return tools.call(ops.submit_review, raw, site_url=tools.site_url)

    # --- memory agent runs (SPEC §9) -------------------------------------------------------
    @server.tool(annotations=WRITE)
    def create_memory_run(task: str) -> CallToolResult:
        """Open a run with an empty memory bank for a long task."""
        return tools.call(ops.create_run, {"task": task})

    @server.tool(annotations=READ)
    def memory_get_bank(run_id: int) -> CallToolResult:
        """The run's memory bank: status, knowledge[], procedural[]."""
        return tools.call(ops.get_bank, run_id)

    @server.tool(annotations=REPLACE)
    def memory_update_status(run_id: int, content: str) -> CallToolResult:
        """Replace the run's progress note (seen only by the memory agent)."""
        return tools.call(ops.update_status, run_id, {"content": content})

    @server.tool(annotations=REPLACE)
    def memory_save_knowledge(run_id: int, id: str, content: str, tags: list[str] | None = None) -> CallToolResult:
        """Save a stable fact of the task (requirement, path, constraint) under `id`; the same id
        replaces it. Tags `applies_to:X` / `not_for:Y` give an offered candidate its scope."""
        return tools.call(ops.save_knowledge, run_id, _given(id=id, content=content, tags=tags))

    @server.tool(annotations=REPLACE)
    def memory_save_procedural(run_id: int, id: str, content: str, outcome: str) -> CallToolResult:
        """Save an attempt and its outcome (a command that failed or worked, a diagnosis) under `id`."""
        return tools.call(ops.save_procedural, run_id, {"id": id, "content": content, "outcome": outcome})

    @server.tool(annotations=REPLACE)
    def memory_delete(run_id: int, id: str, kind: BankItemKind | None = None) -> CallToolResult:
        """Delete the knowledge and/or procedural item with this id (`kind` narrows it)."""
        return tools.call(ops.delete_item, run_id, id, _given(kind=kind))

    @server.tool(annotations=WRITE)
    def memory_log_decision(
        run_id: int,
        step: int,
        reminder: str | None = None,
        rationale: str | None = None,
        window: list[dict[str, Any]] | None = None,
    ) -> CallToolResult:
        """Log the memory agent's decision before `step`: one specific reminder for the action
        agent, or none (selective silence — logged too). `window`: the steps reviewed (≤ 8)."""
        raw = {"step": step, "reminder": reminder, **_given(rationale=rationale, window=window)}
        return tools.call(ops.intervene, run_id, raw)

    @server.tool(annotations=WRITE)
    def finish_memory_run(
        run_id: int,
        offer_candidates: bool = False,
        items: list[str] | None = None,
        domain: str | None = None,
        repo: str | None = None,
        topic: str | None = None,
        failure_class: FailureClass | None = None,
    ) -> CallToolResult:
        """Finish the run. offer_candidates: the knowledge and procedural items (or `items`) become
        promotion candidates that a person must approve — never facts."""
        raw = _given(
            offer_candidates=offer_candidates,
            items=items,
            domain=domain,
            repo=repo,
            topic=topic,
            failure_class=failure_class,
        )
        return tools.call(ops.finish_run, run_id, raw)

    return server
