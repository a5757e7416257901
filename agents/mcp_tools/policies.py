"""The policy, conflict and private-notes tools (API.md "Write", SPEC §4).

Each tool calls its agents.operations function through `EngramTools.call`: the JSON, the pages and
the errors of the matching /api/v1/ endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from agents import operations as ops
from agents.mcp_tools.common import READ, REPLACE, WRITE, ConflictStatus, given

if TYPE_CHECKING:
    from agents.mcp_server import EngramTools


def register(server: MCPServer, tools: EngramTools) -> None:
    """Add the policy, conflict and notes tools to `server`, acting through `tools`."""

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
        raw = given(domain=domain, repo=repo, rule=rule, required_role=required_role, derived_from=derived_from)
        return tools.call(ops.propose_policy, raw)

    @server.tool(annotations=WRITE)
    def supersede_policy(policy_id: int, rule: str, reason: str | None = None) -> CallToolResult:
        """Replace a live policy with a new version (the old one stays in its history). Needs
        `write` on its domain (else insufficient_memory_permission); policy_not_live if it was
        already replaced, policy_budget_exceeded past the workspace's policy budget."""
        return tools.call(ops.supersede_policy, policy_id, given(rule=rule, reason=reason))

    @server.tool(annotations=READ)
    def list_policies(active: bool | None = None, limit: int | None = None, offset: int = 0) -> CallToolResult:
        """The policies you may see (GET policies/), newest first; active true: the live active
        ones, false: the others. One page: limit 1–200 (default 50), offset ≥ 0, with the API's
        `next`/`previous` links."""
        raw = given(active=active)
        return tools.call(ops.list_policies, raw, limit=limit, offset=offset, site_url=tools.site_url)

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
        both facts live); dismissed: a person said both are true; closed: left open, but a fact of the
        pair is no longer live (closed_reason says why). One page: limit 1–200
        (ENGRAM_API_MAX_PAGE_SIZE), offset ≥ 0; out of range is refused (invalid_input). `next` and
        `previous` are the API's links to the neighbouring pages, null at either end."""
        raw = given(domain=domain, repo=repo, topic=topic, status=status)
        return tools.call(ops.list_conflicts, raw, limit=limit, offset=offset, site_url=tools.site_url)

    @server.tool(annotations=READ)
    def get_my_notes() -> CallToolResult:
        """Your private scratchpad and your latest observations; no other agent can read them."""
        return tools.call(ops.get_notes)

    @server.tool(annotations=REPLACE)
    def update_my_notes(notes: str) -> CallToolResult:
        """Replace your whole private scratchpad (kept across runs, injected into your dispatches)."""
        return tools.call(ops.update_notes, {"notes": notes})

    @server.tool(annotations=WRITE)
    def record_observation(text: str) -> CallToolResult:
        """Note something you saw; its id can be cited as a fact's source."""
        return tools.call(ops.record_observation, {"text": text})
