"""What the MCP tools of every area share: the enumerations of their signatures, the scope of a
candidate, the tool annotations, and how a tool passes on only the arguments its caller set."""

from __future__ import annotations

from typing import Any, Literal

from mcp.types import ToolAnnotations
from typing_extensions import TypedDict

# The enumerations of the tools' signatures, spelled out for the JSON schema the MCP client
# sees; tests/agents/test_operations_parity.py holds each equal to the model choices it mirrors.
SearchMode = Literal["keyword", "semantic", "hybrid"]
MemoryType = Literal["commitment", "event", "observation", "decision", "convention", "procedure", "profile"]
# What an agent may state (issue 13). human_stated is offered only to an agent a workspace admin
# marked as relaying people's words; the service refuses it from any other (veracity_not_allowed).
AgentVeracity = Literal["agent_inferred", "tool_generated", "imported"]
RelayVeracity = Literal["agent_inferred", "tool_generated", "imported", "human_stated"]
ConflictStatus = Literal["open", "decided", "dismissed", "closed"]
BankItemKind = Literal["knowledge", "procedural"]
FailureClass = Literal[
    "agent_failure", "verification_failure", "environment_blocker", "flaky_blocker", "harness_blocker"
]
FactStatus = Literal["active", "challenged", "deprecated", "archived"]
PromotionStatus = Literal["candidate", "held", "blocked", "harness_fix", "active", "denied"]


class CandidateScope(TypedDict, total=False):
    """Where a candidate's rule applies and where it does not (without both it is held): a
    submitted candidate's, or the candidates a finished run offers."""

    applies_to: list[str]
    does_not_apply_to: list[str]


READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
REPLACE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


def given(**arguments: Any) -> dict[str, Any]:
    """The arguments the caller set: left at None, the API's own default applies (as over HTTP)."""
    return {k: v for k, v in arguments.items() if v is not None}
