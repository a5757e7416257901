"""The remember prompt and the remember-review tools (API.md "Remember reviews", SPEC §8).

Each tool calls its agents.operations function through `EngramTools.call`: the JSON, the pages and
the errors of the matching /api/v1/ endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from agents import operations as ops
from agents import prompts
from agents.mcp_tools.common import READ, WRITE, given

if TYPE_CHECKING:
    from agents.mcp_server import EngramTools


def register(server: MCPServer, tools: EngramTools) -> None:
    """Add the `remember` prompt and the remember-review tools to `server`."""

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

    @server.tool(annotations=WRITE)
    def submit_remember_review(
        session_id: str, output: str, files: dict[str, str] | None = None, repo: str | None = None
    ) -> CallToolResult:
        """Hand the remember sub-agent's output (a fenced JSON block of recommendations) and the
        nominated files' texts to a person. Answers the pending review and its review_url."""
        raw = given(session_id=session_id, output=output, files=files, repo=repo)
        return tools.call(ops.submit_review, raw, site_url=tools.site_url)

    @server.tool(annotations=READ)
    def get_remember_review(review_id: int, wait: float = 0) -> CallToolResult:
        """Your review's status (pending, approved, rejected, consumed) and, once a person decided,
        its resolution {approved, selected_paths, edits, stored_ids, note}. wait: seconds (0–30)
        to hold while it is pending — the call returns as soon as it is decided; call again to
        keep waiting. When the server already holds too many waits it answers at once with
        `_meta.headers["Retry-After"]`: the seconds to let pass before asking again."""
        return tools.call(ops.get_review, review_id, {"wait": wait}, site_url=tools.site_url)

    @server.tool(annotations=WRITE)
    def consume_remember_review(review_id: int) -> CallToolResult:
        """Mark a decided review as folded into your final answer (approved|rejected → consumed).
        review_pending while a person has not decided, review_already_consumed the second time."""
        return tools.call(ops.consume_review, review_id, site_url=tools.site_url)
