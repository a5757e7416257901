"""The MCP tools, generated from the operations' declarations (agents.operations.catalog).

Each tool is named as its operation, described by its declaration, and takes the arguments of
its input serializer (agents.operations.declaration.tool_signature): there is no second list of
arguments to drift from the API's. It calls the operation through `EngramTools.call`, so it
answers the JSON, the pages and the errors of the matching /api/v1/ endpoint."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations

from agents.operations.catalog import TOOLS
from agents.operations.declaration import Operation, argument_type, call_arguments, json_schema_of, tool_signature
from memory.models import Veracity

if TYPE_CHECKING:
    from agents.mcp_server import EngramTools

ANNOTATIONS = {
    "read": ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
    "write": ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    ),
    "replace": ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    ),
}


def tool_function(operation: Operation, tools: EngramTools) -> Callable[..., CallToolResult]:
    """The tool of `operation`: its declared signature, calling the operation as the agent of `tools`
    with the arguments its caller set (lists page and link as the API does)."""

    def tool(**arguments: Any) -> CallToolResult:
        path, raw, paging = call_arguments(operation, arguments)
        if operation.paged or operation.links:
            paging["site_url"] = tools.site_url
        return tools.call(operation.function(), *path, raw, **paging)

    tool.__name__ = tool.__qualname__ = operation.name
    tool.__doc__ = operation.description
    signature = offered(tool_signature(operation), tools)
    tool.__signature__ = signature.replace(return_annotation=CallToolResult)  # type: ignore[attr-defined]
    return tool


def offered(signature: inspect.Signature, tools: EngramTools) -> inspect.Signature:
    """`signature` as this agent's tool list shows it: `human_stated` is offered as a veracity
    only to an agent a workspace admin marked as relaying people's words. The schema only
    describes: another agent sending it anyway gets the API's 403 `veracity_not_allowed`."""
    veracity = signature.parameters.get("veracity")
    if veracity is None or tools.relays_human_words:
        return signature
    schema = dict(json_schema_of(veracity.annotation))
    schema["enum"] = [value for value in schema["enum"] if value != Veracity.HUMAN_STATED]
    narrowed = veracity.replace(annotation=argument_type(schema))
    return signature.replace(
        parameters=[narrowed if p.name == "veracity" else p for p in signature.parameters.values()]
    )


def register(server: MCPServer, tools: EngramTools) -> None:
    """Add every agent tool to `server`, acting through `tools`."""
    for name, operation in TOOLS.items():
        server.add_tool(
            tool_function(operation, tools),
            name=name,
            description=operation.description,
            annotations=ANNOTATIONS[operation.kind],
        )
