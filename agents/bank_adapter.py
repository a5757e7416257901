"""LocalBank: the memory-bank calls of EngramClient, in-process, for a memory agent that runs
inside the Django process (tests, management commands, workers).

Same method names, arguments and answers as agents.client.EngramClient, through the same
operations the API and the MCP server use; a refused call raises EngramAPIError with the
API's status, code, detail and fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agents import operations as ops
from agents.client import EngramAPIError
from agents.models import Agent


class LocalBank:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def _call(self, operation: Callable[..., ops.Result], *args: Any) -> dict[str, Any]:
        try:
            return operation(self.agent, *args).body
        except Exception as exc:
            answer = ops.error_result(exc)
            if answer is None:
                raise
            body = answer.body
            raise EngramAPIError(
                answer.status, body.get("code", "error"), body.get("detail", ""), body.get("fields")
            ) from exc

    def create_run(self, task: str) -> dict[str, Any]:
        return self._call(ops.create_run, {"task": task})

    def get_bank(self, run_id: int) -> dict[str, Any]:
        return self._call(ops.get_bank, run_id)

    def update_status(self, run_id: int, content: str) -> dict[str, Any]:
        return self._call(ops.update_status, run_id, {"content": content})

    def save_knowledge(self, run_id: int, item_id: str, content: str, tags: list[str] | None = None) -> dict[str, Any]:
        return self._call(ops.save_knowledge, run_id, {"id": item_id, "content": content, "tags": list(tags or [])})

    def save_procedural(self, run_id: int, item_id: str, content: str, outcome: str) -> dict[str, Any]:
        return self._call(ops.save_procedural, run_id, {"id": item_id, "content": content, "outcome": outcome})

    def delete_item(self, run_id: int, item_id: str, kind: str | None = None) -> dict[str, Any]:
        return self._call(ops.delete_item, run_id, item_id, {"kind": kind} if kind else {})

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
        return self._call(ops.intervene, run_id, body)

    def finish_run(self, run_id: int, offer_candidates: bool = False, **options: Any) -> dict[str, Any]:
        body: Mapping[str, Any] = {
            "offer_candidates": offer_candidates,
            **{k: v for k, v in options.items() if v is not None},
        }
        return self._call(ops.finish_run, run_id, body)
