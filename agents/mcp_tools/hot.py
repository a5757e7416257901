"""The hot-tier and job tools: remember, consolidate_memory, harmonize_memory.

Each tool calls its agents.operations function through `EngramTools.call`: the JSON, the pages and
the errors of the matching /api/v1/ endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from agents import operations as ops
from agents.mcp_tools.common import WRITE, given

if TYPE_CHECKING:
    from agents.mcp_server import EngramTools


def register(server: MCPServer, tools: EngramTools) -> None:
    """Add the hot-tier and job tools to `server`, acting through `tools`."""

    @server.tool(annotations=WRITE)
    def remember(
        session_id: str, content: str, domain: str | None = None, repo: str | None = None, topic: str | None = None
    ) -> CallToolResult:
        """Keep a session-scoped entry in the hot tier until consolidate_memory."""
        raw = given(session_id=session_id, content=content, domain=domain, repo=repo, topic=topic)
        return tools.call(ops.remember, raw)

    @server.tool(annotations=WRITE)
    def consolidate_memory(session_id: str | None = None) -> CallToolResult:
        """Promote hot-tier entries to facts (normal write rules) and merge near-duplicates."""
        return tools.call(ops.consolidate, given(session_id=session_id))

    @server.tool(annotations=WRITE)
    def harmonize_memory(domain: str | None = None, repo: str | None = None) -> CallToolResult:
        """Resolve contradicting facts written by different agents (in one domain, or all you may
        see). One job at a time per workspace: while one is queued or running you join it
        (status queued|running, joined true) instead of starting a second; otherwise the summary
        of conflicts found and resolved (status done), or queued when a worker runs it."""
        return tools.call(ops.harmonize, given(domain=domain, repo=repo))
