"""The reference proactive memory-agent loop (SPEC §9), around any action agent.

    engram = EngramClient("http://127.0.0.1:8000", key)
    loop = MemoryAgent(action_agent, environment, bank=engram, decider=RuleBasedDecider())
    result = loop.run("Get the payments test suite passing")

- `action_agent(context) -> {"command": ..., "thought": ...}`: any callable; it is never
  modified and is called exactly once per step. `context` is a list of chat-style messages
  ({"role", "content"}); a reminder is appended to it, for that one call, as a user message
  starting with `[MEMORY REMINDER]`.
- `environment(action) -> {"ok": bool, "output": str}` (optionally `"done": True` to end).
- `bank`: anything with EngramClient's run methods — the client itself (HTTP) or
  `engram_client.bank_adapter.LocalBank` (in-process, inside the Engram server's process).
- `decider`: two-phase — an object with `update(view) -> [BankUpdate]` and
  `decide(view) -> (reminder | None, rationale)`: the loop writes the updates through Engram,
  re-reads the bank, then asks it to decide on the updated bank. Built in: `RuleBasedDecider`
  (offline) and `OpenAICompatibleDecider` (an OpenAI-compatible chat endpoint from
  OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL; one call per phase). Any callable
  `(view) -> Decision` works too, in one call (its updates are written after it returns).

Every `interval` steps the memory agent looks at the last `window` (k=8) steps, updates the
bank, and decides: one specific, grounded reminder for the next decision, or silence — the
point is to stay quiet unless a remembered item changes what happens next. Each decision is
logged on the run (silence as a null reminder). A reminder is shown with the action agent's
next call only. With `preview` (the default) the decider also sees the action the agent just
proposed; a proposal met with a reminder is held back (not run) and the next step's call
carries the reminder — one action-agent call per step either way.

Engram is a help, not a dependency (a failed memory lookup is not a failed task): when it is
unreachable (no connection, timeout, 408/429/5xx) the loop logs one warning and carries on
without memory — every step still runs, with no reminders — and `RunResult.memory_available`
is False. Refusals that mean a caller bug (400/401/403/404/409 on the run's calls) still raise;
a refused bank write (a model's bad tool call) is logged and skipped.

The deciders and what they exchange with the loop (MemoryView, Decision, BankUpdate…) are in
engram_client.deciders; every name of it is re-exported here.

Standard library only; the decider's HTTP calls go through engram_client.llm.ChatCompletions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from engram_client.deciders import (
    DECIDE_PROMPT,
    OUTPUT_KEEP,
    READ_ONLY,
    TAG_MAX,
    TOOLS,
    UPDATE_PROMPT,
    Action,
    BankUpdate,
    Constraint,
    Decider,
    Decision,
    MemoryView,
    Observation,
    OpenAICompatibleDecider,
    RuleBasedDecider,
    Step,
    apply_updates,
    as_decision,
    bank_update_of,
    extract_constraints,
    parse_reply,
)
from engram_client.errors import EngramError

logger = logging.getLogger("engram.memory_agent")

# The loop's names and, re-exported, the deciders' (engram_client.deciders): callers import both from here.
__all__ = [
    "DECIDE_PROMPT",
    "DEFAULT_WINDOW",
    "OUTPUT_KEEP",
    "READ_ONLY",
    "REMINDER_PREFIX",
    "TAG_MAX",
    "TOOLS",
    "UPDATE_PROMPT",
    "Action",
    "BankBackend",
    "BankUpdate",
    "Constraint",
    "Decider",
    "Decision",
    "MemoryAgent",
    "MemoryView",
    "Message",
    "Observation",
    "OpenAICompatibleDecider",
    "RuleBasedDecider",
    "RunResult",
    "Step",
    "apply_updates",
    "as_decision",
    "bank_update_of",
    "extract_constraints",
    "is_two_phase",
    "memory_unreachable",
    "parse_reply",
    "reminder_message",
    "run_without_memory",
]

Message = dict[str, Any]
REMINDER_PREFIX = "[MEMORY REMINDER]"
DEFAULT_WINDOW = 8


class BankBackend(Protocol):
    """The run calls of EngramClient (HTTP) or LocalBank (in-process)."""

    def create_run(self, task: str) -> Mapping[str, Any]: ...
    def get_bank(self, run_id: int) -> Mapping[str, Any]: ...
    def update_status(self, run_id: int, content: str) -> Any: ...
    def save_knowledge(self, run_id: int, item_id: str, content: str, tags: list[str] | None = None) -> Any: ...
    def save_procedural(self, run_id: int, item_id: str, content: str, outcome: str) -> Any: ...
    def delete_item(self, run_id: int, item_id: str, kind: str | None = None) -> Any: ...
    def intervene(
        self,
        run_id: int,
        step: int,
        reminder: str | None,
        rationale: str | None = None,
        window: list[dict[str, Any]] | None = None,
    ) -> Any: ...
    def finish_run(self, run_id: int, offer_candidates: bool = False) -> Mapping[str, Any]: ...


@dataclass
class RunResult:
    """What a run did. `context` is the action agent's kept context (its actions and their
    outputs — never a reminder: each was shown with one call only, see `reminders`).
    `memory_available` is False when Engram was unreachable at some point (`memory_error` says
    where); from then on the run went without memory, and `run_id` is None if it never started
    and `finished` empty if it could not be closed."""

    run_id: int | None
    steps: list[Step]
    decisions: list[tuple[int, Decision]]
    context: list[Message]
    finished: Mapping[str, Any]
    done: bool
    memory_available: bool = True
    memory_error: str = ""

    @property
    def commands(self) -> list[str]:
        return [s.command for s in self.steps]

    @property
    def reminders(self) -> list[tuple[int, str]]:
        return [(step, d.reminder) for step, d in self.decisions if d.reminder is not None]


# --- The loop ------------------------------------------------------------------------------------
def reminder_message(reminder: str) -> Message:
    return {"role": "user", "content": f"{REMINDER_PREFIX}\n{reminder}"}


def is_two_phase(decider: Any) -> bool:
    """A decider with `update(view)` and `decide(view)` (RuleBasedDecider,
    OpenAICompatibleDecider): the loop applies its updates before asking it to decide."""
    return callable(getattr(decider, "update", None)) and callable(getattr(decider, "decide", None))


def memory_unreachable(exc: BaseException) -> bool:
    """Engram did not answer, or could not: no connection or a timeout (status 0), 408, 429
    (after the transport's retries) or a 5xx — or an OSError from a custom bank. The loop then
    carries on without memory. Any other refusal (400/401/403/404/409) is the caller's bug."""
    if isinstance(exc, EngramError):
        return exc.status == 0 or exc.status in (408, 429) or exc.status >= 500
    return isinstance(exc, OSError)


class _Memory:
    """The loop's line to Engram for one run. The first time Engram is unreachable it logs one
    warning and goes quiet: no further calls for the rest of the run."""

    def __init__(self, bank: BankBackend) -> None:
        self.bank = bank
        self.error = ""

    @property
    def up(self) -> bool:
        return not self.error

    def call(self, method: str, *args: Any, **kwargs: Any) -> tuple[bool, Any]:
        """(True, answer), or (False, None) when Engram is (or just went) unreachable. Other
        errors are raised."""
        if self.error:
            return False, None
        try:
            return True, getattr(self.bank, method)(*args, **kwargs)
        except Exception as exc:
            if not memory_unreachable(exc):
                raise
            self.error = f"{method}: {exc}"[:500]
            logger.warning("Engram is unreachable (%s); the run carries on without memory.", self.error)
            return False, None


class MemoryAgent:
    """Runs an action agent in an environment with a memory agent beside it (SPEC §9)."""

    def __init__(
        self,
        action_agent: Callable[[list[Message]], Action],
        environment: Callable[[Action], Observation],
        *,
        bank: BankBackend,
        decider: Decider | None = None,
        interval: int = 1,
        window: int = DEFAULT_WINDOW,
        max_steps: int = 50,
        preview: bool = True,
        offer_candidates: bool = False,
    ) -> None:
        if interval < 1 or window < 1 or max_steps < 1:
            raise ValueError("interval, window and max_steps are positive.")
        self.action_agent = action_agent
        self.environment = environment
        self.bank = bank
        self.decider: Decider = decider if decider is not None else RuleBasedDecider()
        self.interval = interval
        self.window = window
        self.max_steps = max_steps
        self.preview = preview
        self.offer_candidates = offer_candidates

    def _apply(self, memory: _Memory, run_id: int, updates: Sequence[BankUpdate]) -> int:
        """Write `updates` through Engram; how many were accepted. A refused one is logged and
        skipped (a model's bad tool call must not end the run); an outage stops the writes."""
        applied = 0
        for update in updates:
            try:
                match update.tool:
                    case "memory_update_status":
                        ok, _ = memory.call("update_status", run_id, update.content)
                    case "memory_save_knowledge":
                        ok, _ = memory.call("save_knowledge", run_id, update.id, update.content, update.tags)
                    case "memory_save_procedural":
                        ok, _ = memory.call(
                            "save_procedural", run_id, update.id, update.content, update.outcome or "noted"
                        )
                    case "memory_delete":
                        ok, _ = memory.call("delete_item", run_id, update.id)
                    case _:
                        ok = False
            except Exception as exc:
                logger.warning("memory tool %s(%s) refused: %s", update.tool, update.id, exc)
                continue
            if not memory.up:
                break
            applied += int(ok)
        return applied

    def _decide(self, view: MemoryView) -> Decision:
        try:
            return as_decision(self.decider(view))
        except Exception as exc:  # the action agent goes on without its memory agent this time
            logger.warning("the memory agent's decider failed at step %s: %s", view.step, exc)
            return Decision(rationale=f"decider failed: {exc}"[:500])

    def _turn(self, memory: _Memory, run_id: int, view: MemoryView) -> Decision | None:
        """One memory-agent turn on a view of the bank read just now: phase 1 updates the bank
        through Engram; phase 2 decides on the bank re-read after the update. A plain callable
        decider does both in one call (its updates are written after it returns). None when
        Engram went unreachable on the way."""
        if not is_two_phase(self.decider):
            decision = self._decide(view)
            self._apply(memory, run_id, decision.updates)
            return decision if memory.up else None
        two_phase: Any = self.decider
        try:
            updates = [u for u in (bank_update_of(raw) for raw in two_phase.update(view) or []) if u is not None]
        except Exception as exc:  # no update, no decision: silence this time
            logger.warning("the memory agent's update failed at step %s: %s", view.step, exc)
            return Decision(rationale=f"decider failed: {exc}"[:500])
        if self._apply(memory, run_id, updates):
            ok, bank = memory.call("get_bank", run_id)
            if not ok:
                return None
            view = replace(view, bank=bank)
        if not memory.up:
            return None
        if view.final:
            return Decision(updates=updates, rationale="the run is over")
        try:
            decided = two_phase.decide(view)
        except Exception as exc:
            logger.warning("the memory agent's decision failed at step %s: %s", view.step, exc)
            return Decision(updates=updates, rationale=f"decider failed: {exc}"[:500])
        if isinstance(decided, tuple) and len(decided) == 2:
            reminder, rationale = decided
            reminder = str(reminder).strip() or None if reminder else None
            return Decision(updates=updates, reminder=reminder, rationale=str(rationale or ""))
        decision = as_decision(decided)
        return Decision(updates=updates, reminder=decision.reminder, rationale=decision.rationale)

    def _review(
        self, memory: _Memory, run_id: int, task: str, step: int, steps: list[Step], proposed: Action | None
    ) -> Decision | None:
        """Read the bank, take a turn, log the decision on the run. None (no decision, no
        reminder) when Engram is unreachable: a decision that cannot be logged is not given."""
        window = steps[-self.window :]
        ok, bank = memory.call("get_bank", run_id)
        if not ok:
            return None
        decision = self._turn(memory, run_id, MemoryView(task, step, window, bank, proposed))
        if decision is None:
            return None
        logged, _ = memory.call(
            "intervene", run_id, step, decision.reminder, decision.rationale or None, [s.as_dict() for s in window]
        )
        return decision if logged else None

    def run(self, task: str, context: list[Message] | None = None) -> RunResult:
        """Run the task to its end (or `max_steps`); one action-agent call per step.

        A reminder is shown with one call only — the next one — appended to a copy of the
        context; the kept context never holds it. With `preview` the decider sees the action
        just proposed: a proposal met with a reminder is held back (not run, not in the context)
        and the step ends; the next step's call carries the reminder. A proposal is never held
        back twice in a row: the agent has been told, the choice is its own."""
        memory = _Memory(self.bank)
        created_ok, created = memory.call("create_run", task)
        run_id: int | None = int(created["id"]) if created_ok else None
        context = list(context) if context is not None else [{"role": "user", "content": task}]
        steps: list[Step] = []
        decisions: list[tuple[int, Decision]] = []
        reminder: str | None = None  # for this step's call only
        held = False  # the previous step's proposal was held back for a reminder
        last_review = -1
        done = False
        for n in range(self.max_steps):
            review = run_id is not None and memory.up and n % self.interval == 0
            if review and not self.preview and run_id is not None:
                decision = self._review(memory, run_id, task, n, steps, None)
                if decision is not None:
                    decisions.append((n, decision))
                    last_review = n
                    reminder = decision.reminder
            shown = [*context, reminder_message(reminder)] if reminder else list(context)
            reminder = None
            action = self.action_agent(shown)
            if review and self.preview and run_id is not None:
                decision = self._review(memory, run_id, task, n, steps, action)
                if decision is not None:
                    decisions.append((n, decision))
                    last_review = n
                    reminder = decision.reminder
                    if reminder and not held:
                        held = True
                        continue
            held = False
            command = str(action.get("command") or "")
            if not command or action.get("final"):
                done = True
                break
            observation = self.environment(action)
            ok, output = bool(observation.get("ok")), str(observation.get("output") or "")
            steps.append(Step(n, command, str(action.get("thought") or ""), ok, output))
            context.append({"role": "assistant", "content": json.dumps(action, ensure_ascii=False)})
            context.append({"role": "tool", "content": output, "ok": ok, "command": command})
            if observation.get("done"):
                done = True
                break
        finished: Mapping[str, Any] = {}
        if run_id is not None and memory.up:
            if any(s.step >= last_review for s in steps):
                # One last look so the bank holds the whole run before it is closed (and offered).
                ok, bank = memory.call("get_bank", run_id)
                if ok:
                    after = steps[-1].step + 1 if steps else 0
                    self._turn(memory, run_id, MemoryView(task, after, steps[-self.window :], bank, final=True))
            if memory.up:
                ok, answer = memory.call("finish_run", run_id, offer_candidates=self.offer_candidates)
                finished = answer if ok else {}
        return RunResult(
            run_id=run_id,
            steps=steps,
            decisions=decisions,
            context=context,
            finished=finished,
            done=done,
            memory_available=memory.up,
            memory_error=memory.error,
        )


def run_without_memory(
    action_agent: Callable[[list[Message]], Action],
    environment: Callable[[Action], Observation],
    task: str,
    *,
    max_steps: int = 50,
) -> list[Step]:
    """The same loop with no memory agent: the baseline a memory agent is measured against."""
    context: list[Message] = [{"role": "user", "content": task}]
    steps: list[Step] = []
    for n in range(max_steps):
        action = action_agent(list(context))
        command = str(action.get("command") or "")
        if not command or action.get("final"):
            break
        observation = environment(action)
        ok, output = bool(observation.get("ok")), str(observation.get("output") or "")
        steps.append(Step(n, command, str(action.get("thought") or ""), ok, output))
        context.append({"role": "assistant", "content": json.dumps(action, ensure_ascii=False)})
        context.append({"role": "tool", "content": output, "ok": ok, "command": command})
        if observation.get("done"):
            break
    return steps
