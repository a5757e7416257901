"""LocalBank: the memory-bank calls of EngramClient, in-process, for a memory agent that runs
inside the Engram server's process (tests, management commands, workers).

Same method names, arguments and answers as EngramClient, through the same operations the API
and the MCP server use; a refused call raises EngramError with the API's status, code, detail
and fields.

This module imports nothing of the server's: `LocalBank(agent)` looks up the server's
`agents.operations` when it is built (so it only works inside that process), and a caller may
pass those operations explicitly instead.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from engram_client.errors import EngramError

__all__ = ["SERVER_OPERATIONS", "LocalBank"]

SERVER_OPERATIONS = "agents.operations"


class LocalBank:
    """`agent` is the server's Agent row; `operations` the server's operations module
    (imported from SERVER_OPERATIONS when not given)."""

    def __init__(self, agent: Any, operations: Any = None) -> None:
        self.agent = agent
        self.ops = operations if operations is not None else importlib.import_module(SERVER_OPERATIONS)

    def _call(self, operation: Callable[..., Any], *args: Any) -> dict[str, Any]:
        try:
            return operation(self.agent, *args).body
        except Exception as exc:
            answer = self.ops.error_result(exc)
            if answer is None:
                raise
            body = answer.body
            raise EngramError(
                answer.status, body.get("code", "error"), body.get("detail", ""), body.get("fields")
            ) from exc

    def create_run(self, task: str) -> dict[str, Any]:
        return self._call(self.ops.create_run, {"task": task})

    def get_bank(self, run_id: int) -> dict[str, Any]:
        return self._call(self.ops.get_bank, run_id)

    def update_status(self, run_id: int, content: str) -> dict[str, Any]:
        return self._call(self.ops.update_status, run_id, {"content": content})

    def save_knowledge(self, run_id: int, item_id: str, content: str, tags: list[str] | None = None) -> dict[str, Any]:
        return self._call(
            self.ops.save_knowledge, run_id, {"id": item_id, "content": content, "tags": list(tags or [])}
        )

    def save_procedural(self, run_id: int, item_id: str, content: str, outcome: str) -> dict[str, Any]:
        return self._call(self.ops.save_procedural, run_id, {"id": item_id, "content": content, "outcome": outcome})

    def delete_item(self, run_id: int, item_id: str, kind: str | None = None) -> dict[str, Any]:
        return self._call(self.ops.delete_item, run_id, item_id, {"kind": kind} if kind else {})

    def intervene(
        self,
        run_id: int,
        step: int,
        reminder: str | None,
        rationale: str | None = None,
        window: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"step": step, "reminder": reminder, "window": list(window or [])}
        if rationale:
            body["rationale"] = rationale
        return self._call(self.ops.intervene, run_id, body)

    def finish_run(self, run_id: int, offer_candidates: bool = False, **options: Any) -> dict[str, Any]:
        body: Mapping[str, Any] = {
            "offer_candidates": offer_candidates,
            **{k: v for k, v in options.items() if v is not None},
        }
        return self._call(self.ops.finish_run, run_id, body)
