"""The fact-writing tools (API.md "Write"): propose_fact, propose_facts, supersede_fact,
create_episode, record_meeting_decisions.

Each tool calls its agents.operations function through `EngramTools.call`: the JSON, the pages and
the errors of the matching /api/v1/ endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from agents import operations as ops
from agents.mcp_tools.common import WRITE, AgentVeracity, MemoryType, RelayVeracity, given

if TYPE_CHECKING:
    from agents.mcp_server import EngramTools


def register(server: MCPServer, tools: EngramTools) -> None:
    """Add the fact-writing tools to `server`; human_stated is offered to a relay agent only."""

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
        session_key: str | None = None,
    ) -> CallToolResult:
        """Propose a fact. Stating a known fact again re-mentions it (your words are kept as a
        mention); a contradiction of a live fact of the domain (the nearest in meaning, whatever
        their topic) is resolved (higher veracity, then the later statement — an update — wins)
        and recorded; when the wording cannot tell, or a contradiction under another topic does
        not announce an update ("now", "switched to"), both facts stay live and a person decides. veracity: agent_inferred (default), tool_generated or imported.
        observed_at: when it was true (default now; never in the future). episode_id: an episode
        you opened (your preamble, search or memory run). session_key: a session key (≤ 200
        characters) to find this session's facts again (search_memory's `session_key`). Answers the
        fact, the outcome (created, re_mentioned, conflict_won, conflict_lost or possible_conflict,
        with conflict_id) and the reason."""
        raw = given(
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
            session_key=session_key,
        )
        return tools.call(ops.propose_fact, raw)

    if tools.relays_human_words:
        # Read when the server starts; the service checks the flag again on every call.
        propose_fact.__annotations__["veracity"] = RelayVeracity
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
        return tools.call(ops.supersede_fact, fact_id, given(content=content, reason=reason))

    @server.tool(annotations=WRITE)
    def create_episode(kind: str, title: str | None = None, started_at: str | None = None) -> CallToolResult:
        """Start an episode (dispatch, session, meeting, run, import…); facts proposed with its
        `episode_id` are linked to it. started_at: ISO 8601, default now, never in the future."""
        return tools.call(ops.create_episode, given(kind=kind, title=title, started_at=started_at))

    @server.tool(annotations=WRITE)
    def record_meeting_decisions(
        title: str, date: str, decisions: list[str], topic: str | None = None
    ) -> CallToolResult:
        """Record what a meeting decided, in people's own words: each item of `decisions` becomes a
        human_stated `decision` fact in the workspace's `decisions` domain (re-mention and conflict
        rules apply), all linked to one `meeting` episode with `title`, started at `date`
        (YYYY-MM-DD, not in the future). At most 50 decisions; all or none are written. Only an
        agent a workspace admin marked as relaying people's words may call it (else
        veracity_not_allowed); it needs write on `decisions` (else insufficient_memory_permission)."""
        raw = given(title=title, date=date, decisions=decisions, topic=topic)
        return tools.call(ops.record_meeting_decisions, raw)
