"""The memory-agent run tools (API.md "Memory agent runs", SPEC §9).

Each tool calls its agents.operations function through `EngramTools.call`: the JSON, the pages and
the errors of the matching /api/v1/ endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from agents import operations as ops
from agents.mcp_tools.common import READ, REPLACE, WRITE, BankItemKind, CandidateScope, FailureClass, given

if TYPE_CHECKING:
    from agents.mcp_server import EngramTools


def register(server: MCPServer, tools: EngramTools) -> None:
    """Add the memory-agent run tools to `server`, acting through `tools`."""

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
        return tools.call(ops.save_knowledge, run_id, given(id=id, content=content, tags=tags))

    @server.tool(annotations=REPLACE)
    def memory_save_procedural(run_id: int, id: str, content: str, outcome: str) -> CallToolResult:
        """Save an attempt and its outcome (a command that failed or worked, a diagnosis) under `id`."""
        return tools.call(ops.save_procedural, run_id, {"id": id, "content": content, "outcome": outcome})

    @server.tool(annotations=REPLACE)
    def memory_delete(run_id: int, id: str, kind: BankItemKind | None = None) -> CallToolResult:
        """Delete the knowledge and/or procedural item with this id (`kind` narrows it)."""
        return tools.call(ops.delete_item, run_id, id, given(kind=kind))

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
        raw = {"step": step, "reminder": reminder, **given(rationale=rationale, window=window)}
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
        scope: CandidateScope | None = None,
    ) -> CallToolResult:
        """Finish the run. offer_candidates: the knowledge and procedural items (or `items`) become
        promotion candidates that a person must approve — never facts. scope: {applies_to,
        does_not_apply_to} added to every candidate offered (without both a candidate is held)."""
        raw = given(
            offer_candidates=offer_candidates,
            items=items,
            domain=domain,
            repo=repo,
            topic=topic,
            failure_class=failure_class,
            scope=scope,
        )
        return tools.call(ops.finish_run, run_id, raw)
