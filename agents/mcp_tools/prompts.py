"""The MCP prompts: `remember`, the remember sub-agent's prompt (remember.v1, API.md "Remember
reviews", SPEC §8), whose output goes to submit_remember_review."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from agents import prompts


def register(server: MCPServer) -> None:
    """Add the `remember` prompt to `server`."""

    @server.prompt(name="remember", title="Remember this turn (remember.v1)")
    def remember_prompt(
        task: Annotated[str, Field(description="the user's request this turn worked on")],
        artifacts: Annotated[
            str, Field(description="the files the turn produced or changed, comma- or newline-separated")
        ],
        turn_summary: Annotated[str, Field(description="what the turn did, in a few lines")] = "",
    ) -> str:
        """The remember sub-agent's prompt (remember.v1, the client's prompts/remember_v1.md): it
        nominates at most 10 of the turn's files for long-term memory, each with a layer, a
        rationale and a note, as one fenced JSON block for submit_remember_review."""
        return prompts.render_remember_prompt(task, turn_summary, artifacts)
