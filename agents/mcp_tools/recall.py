"""The identity and recall tools (API.md "Identity", "Recall"): whoami, get_preamble,
search_memory, list_facts, get_fact.

Each tool calls its agents.operations function through `EngramTools.call`: the JSON, the pages and
the errors of the matching /api/v1/ endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from agents import operations as ops
from agents.mcp_tools.common import READ, WRITE, FactStatus, SearchMode, given

if TYPE_CHECKING:
    from agents.mcp_server import EngramTools


def register(server: MCPServer, tools: EngramTools) -> None:
    """Add the identity and recall tools to `server`, acting through `tools`."""

    @server.tool(annotations=READ)
    def whoami() -> CallToolResult:
        """The agent this server acts as (GET me/): its id, name, role and workspace."""
        return tools.call(ops.me)

    # --- recall ----------------------------------------------------------------------------
    @server.tool(annotations=WRITE)  # it opens a dispatch episode and counts recalls
    def get_preamble(
        task: str, repo: str | None = None, as_of: str | None = None, valid_at: str | None = None
    ) -> CallToolResult:
        """The dispatch preamble: every active policy, your private notes, up to 5 keyword-matched
        facts for the task (tasks of 20+ characters), and a closing line. Call it when a task starts.
        as_of (ISO 8601 with a timezone): the policies and facts Engram held at that moment;
        valid_at: only facts true at that moment."""
        return tools.call(ops.get_preamble, given(task=task, repo=repo, as_of=as_of, valid_at=valid_at))

    @server.tool(annotations=READ)
    def search_memory(
        query: str,
        mode: SearchMode = "hybrid",
        repo: str | None = None,
        domain: str | None = None,
        limit: int = 10,
        session_key: str | None = None,
        as_of: str | None = None,
        valid_at: str | None = None,
    ) -> CallToolResult:
        """Search long-term memory. hybrid (default) fuses lexical, semantic, recency and graph voices;
        keyword is full-text only; semantic fuses full-text and vectors. `domain` like `architecture`
        or `repo:<slug>/architecture`; `repo` ranks that repo's facts first. limit 1–50. `session_key`:
        only facts written under that session key (exact match). `as_of` (ISO 8601 with a timezone):
        what Engram believed at that moment; `valid_at`: only facts true at that moment."""
        raw = given(
            query=query,
            mode=mode,
            repo=repo,
            domain=domain,
            limit=limit,
            session_key=session_key,
            as_of=as_of,
            valid_at=valid_at,
        )
        return tools.call(ops.search, raw)

    @server.tool(annotations=READ)
    def list_facts(
        domain: str | None = None,
        repo: str | None = None,
        topic: str | None = None,
        status: FactStatus | None = None,
        current: bool | None = None,
        session_key: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> CallToolResult:
        """The facts you may see (GET facts/), filtered by domain (`architecture` or
        `repo:<slug>/architecture`), repo, topic, status; `current` (default true) leaves out
        superseded versions; `session_key`: only facts written under that session key (exact
        match). One page: limit 1–200 (default 50), offset ≥ 0; `next`/`previous` are the API's
        links to the neighbouring pages, null at either end."""
        raw = given(domain=domain, repo=repo, topic=topic, status=status, current=current, session_key=session_key)
        return tools.call(ops.list_facts, raw, limit=limit, offset=offset, site_url=tools.site_url)

    @server.tool(annotations=READ)
    def get_fact(fact_id: int, as_of: str | None = None) -> CallToolResult:
        """One fact (GET facts/{id}/) with its supersession chain (`history`), its conflicts and what
        was said each time it was stated again (`mentions`). fact_not_found when you may not see it.
        as_of (ISO 8601 with a timezone): all of it as it was at that moment."""
        return tools.call(ops.get_fact, fact_id, given(as_of=as_of))
