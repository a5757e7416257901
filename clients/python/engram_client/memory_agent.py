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

Standard library only; the decider's HTTP calls go through engram_client.llm.ChatCompletions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from engram_client.errors import EngramError
from engram_client.llm import ChatCompletions

logger = logging.getLogger("engram.memory_agent")

Action = dict[str, Any]
Observation = dict[str, Any]
Message = dict[str, Any]
REMINDER_PREFIX = "[MEMORY REMINDER]"
DEFAULT_WINDOW = 8
OUTPUT_KEEP = 1_000
TAG_MAX = 100
TOOLS: tuple[str, ...] = ("memory_update_status", "memory_save_knowledge", "memory_save_procedural", "memory_delete")


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
class Step:
    step: int
    command: str
    thought: str
    ok: bool
    output: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "command": self.command,
            "thought": self.thought,
            "ok": self.ok,
            "output": self.output[:OUTPUT_KEEP],
        }


@dataclass
class BankUpdate:
    """One memory tool call: memory_update_status(content), memory_save_knowledge(id, content,
    tags), memory_save_procedural(id, content, outcome) or memory_delete(id)."""

    tool: str
    id: str = ""
    content: str = ""
    tags: list[str] = field(default_factory=list)
    outcome: str = ""


@dataclass
class Decision:
    updates: list[BankUpdate] = field(default_factory=list)
    reminder: str | None = None
    rationale: str = ""


@dataclass
class MemoryView:
    """What the memory agent sees when it is its turn."""

    task: str
    step: int  # the step about to run
    window: list[Step]  # the last k steps, oldest first
    bank: Mapping[str, Any]  # GET runs/{id}/bank/
    proposed: Action | None = None  # the action the agent is about to take (with preview)
    final: bool = False  # the run is over: update the bank, no decision to take


Decider = Callable[[MemoryView], Any]


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


def as_decision(value: Any) -> Decision:
    """Accept what a pluggable decider returns: a Decision, a reminder string, None (silence),
    or a mapping {"updates": [...], "reminder": ..., "rationale": ...}."""
    if isinstance(value, Decision):
        return value
    if value is None:
        return Decision()
    if isinstance(value, str):
        return Decision(reminder=value.strip() or None)
    if isinstance(value, Mapping):
        reminder = value.get("reminder")
        return Decision(
            updates=[u for u in (_update_of(raw) for raw in value.get("updates") or []) if u is not None],
            reminder=str(reminder).strip() or None if reminder else None,
            rationale=str(value.get("rationale") or ""),
        )
    raise TypeError(f"A decider returns a Decision, a string, None or a mapping, not {type(value).__name__}.")


def _update_of(raw: Any) -> BankUpdate | None:
    if isinstance(raw, BankUpdate):
        return raw
    if not isinstance(raw, Mapping):
        return None
    tool = str(raw.get("tool") or raw.get("name") or "")
    if not tool.startswith("memory_"):
        tool = "memory_" + tool
    if tool not in TOOLS:
        return None
    tags = raw.get("tags") or []
    return BankUpdate(
        tool=tool,
        id=str(raw.get("id") or ""),
        content=str(raw.get("content") or ""),
        tags=[str(t) for t in tags] if isinstance(tags, list) else [],
        outcome=str(raw.get("outcome") or ""),
    )


def _normalise(command: str) -> str:
    return " ".join((command or "").split())


def _first_error_line(output: str) -> str:
    lines = [line.strip() for line in (output or "").splitlines() if line.strip()]
    for line in lines:
        if re.search(r"error|denied|not found|no such|fail|fatal|no rule|cannot|refused|missing", line, re.I):
            return line[:300]
    return (lines[-1] if lines else "no output")[:300]


def _item_id(prefix: str, text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "item"
    digest = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]
    return f"{prefix}-{slug}-{digest}"


# --- The offline decider -------------------------------------------------------------------------
# Commands that only look around: a failure stays a failure across them (nothing was changed).
READ_ONLY = re.compile(
    r"^(ls|cat|head|tail|less|more|pwd|echo|grep|rg|find|which|whoami|env|git (status|log|diff|show)|"
    r"wc|stat|file|tree|du|df|ps|uname|id|date)\b"
)
_NEGATION = re.compile(
    r"\b(do not|don't|never|must not|mustn't|cannot|can't|is not allowed|are not allowed|not allowed to|"
    r"forbidden|is disabled|are disabled|avoid)\b",
    re.I,
)
_QUOTED = re.compile(r"`([^`]+)`|(?<!\w)'([^'\s][^']*)'|(?<!\w)\"([^\"\s][^\"]*)\"")
_INSTEAD = re.compile(r"\b(?:use|run|prefer)\s+(`[^`]+`|'[^']+'|\"[^\"]+\")(?:\s+instead)?", re.I)
_FAILURE_RECORD = re.compile(r"^`(?P<cmd>.+?)` failed at step (?P<step>\d+): (?P<err>.*)$", re.S)


@dataclass
class Constraint:
    item_id: str
    text: str
    forbid: str
    instead: str = ""


def extract_constraints(text: str) -> list[Constraint]:
    """Sentences that forbid something quoted: "Do not use `sudo`", "`pip` is disabled here; use
    `uv pip` instead". The first quoted term after the negation is forbidden; a `use X` names
    the alternative."""
    found: list[Constraint] = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text or ""):
        negation = _NEGATION.search(sentence)
        if negation is None:
            continue
        # "use X" names the alternative, unless it is the forbidden verb itself ("do not use X").
        alternatives = [
            m.group(1).strip("`'\"")
            for m in _INSTEAD.finditer(sentence)
            if m.start() < negation.start() or sentence[negation.end() : m.start()].strip()
        ]
        instead = alternatives[0] if alternatives else ""
        quoted = [(m.start(), next(g for g in m.groups() if g).strip()) for m in _QUOTED.finditer(sentence)]
        after = [t for pos, t in quoted if pos > negation.start() and t != instead]
        before = [t for pos, t in quoted if pos < negation.start() and t != instead]
        candidates = after[:1] or before[-1:]
        if not candidates:
            continue
        forbid = candidates[0].strip()
        if forbid and not any(c.forbid == forbid for c in found):
            found.append(
                Constraint(
                    item_id=_item_id("constraint", forbid), text=sentence.strip()[:500], forbid=forbid, instead=instead
                )
            )
    return found


def _contains(command: str, term: str) -> bool:
    """`term` appears in the command as whole words (`sudo` matches `sudo apt`, not `pseudocode`)."""
    return re.search(rf"(?<![\w-]){re.escape(_normalise(term))}(?![\w-])", _normalise(command)) is not None


@dataclass
class _Failure:
    command: str
    step: int
    error: str
    item_id: str


class RuleBasedDecider:
    """Offline memory agent. Phase 1: every failed command (with its error) becomes a procedural
    item, a command that later works is marked so, and constraints stated in the task or in
    outputs become knowledge items tagged `constraint`. Phase 2: it reminds only when the next
    action repeats a known failure — the same command, with nothing changed since (only
    read-only commands in between) — or contradicts a saved constraint; otherwise it is silent."""

    def __init__(self) -> None:
        self.failures: dict[str, _Failure] = {}
        self.constraints: dict[str, Constraint] = {}
        self.last_change_step = -1  # the last step that succeeded and may have changed something
        self.seen_steps: set[int] = set()
        self._task_read = False

    def _recall_from_bank(self, bank: Mapping[str, Any]) -> None:
        """Resume from a bank written earlier (e.g. by another process)."""
        for item in bank.get("procedural") or []:
            match = _FAILURE_RECORD.match(str(item.get("content", "")))
            if match and item.get("outcome") == "failed":
                key = _normalise(match["cmd"])
                self.failures.setdefault(
                    key, _Failure(key, int(match["step"]), match["err"].strip(), str(item.get("id", "")))
                )
        for item in bank.get("knowledge") or []:
            tags = item.get("tags") or []
            if "constraint" in tags:
                forbid = next((t[len("forbid:") :] for t in tags if t.startswith("forbid:")), "")
                instead = next((t[len("instead:") :] for t in tags if t.startswith("instead:")), "")
                if forbid:
                    self.constraints.setdefault(
                        forbid,
                        Constraint(
                            item_id=str(item.get("id", "")),
                            text=str(item.get("content", "")),
                            forbid=forbid,
                            instead=instead,
                        ),
                    )

    def _save_constraint(self, constraint: Constraint, updates: list[BankUpdate]) -> None:
        if constraint.forbid in self.constraints:
            return
        self.constraints[constraint.forbid] = constraint
        tags = ["constraint", f"forbid:{constraint.forbid}"[:TAG_MAX]]
        if constraint.instead:
            tags.append(f"instead:{constraint.instead}"[:TAG_MAX])
        updates.append(BankUpdate("memory_save_knowledge", id=constraint.item_id, content=constraint.text, tags=tags))

    def update(self, view: MemoryView) -> list[BankUpdate]:
        """Phase 1: the bank updates the window calls for."""
        self._recall_from_bank(view.bank)
        updates: list[BankUpdate] = []
        if not self._task_read:
            self._task_read = True
            for constraint in extract_constraints(view.task):
                self._save_constraint(constraint, updates)
        for step in view.window:
            if step.step in self.seen_steps:
                continue
            self.seen_steps.add(step.step)
            key = _normalise(step.command)
            if not step.ok:
                error = _first_error_line(step.output)
                failure = _Failure(key, step.step, error, _item_id("failed", key))
                self.failures[key] = failure
                updates.append(
                    BankUpdate(
                        "memory_save_procedural",
                        id=failure.item_id,
                        content=f"`{key}` failed at step {step.step}: {error}",
                        outcome="failed",
                    )
                )
            else:
                if not READ_ONLY.match(key):
                    self.last_change_step = step.step
                if key in self.failures:
                    old = self.failures.pop(key)
                    updates.append(
                        BankUpdate(
                            "memory_save_procedural",
                            id=old.item_id,
                            content=f"`{key}` worked at step {step.step} (it had failed at step {old.step}: {old.error})",
                            outcome="worked",
                        )
                    )
            for constraint in extract_constraints(step.output):
                self._save_constraint(constraint, updates)
        if view.window:
            last = view.window[-1]
            updates.append(
                BankUpdate(
                    "memory_update_status",
                    content=(
                        f"Before step {view.step}: {len(self.failures)} unresolved failure(s), "
                        f"{len(self.constraints)} constraint(s). Last step {last.step}: `{_normalise(last.command)}` "
                        f"{'ok' if last.ok else 'failed'}."
                    ),
                )
            )
        return updates

    def decide(self, view: MemoryView) -> tuple[str | None, str]:
        """Phase 2: (reminder or None, rationale)."""
        if view.final:
            return None, "the run is over"
        if not view.proposed:
            return None, "no proposed action to check"
        command = _normalise(str(view.proposed.get("command") or ""))
        if not command:
            return None, "the agent proposes no command"
        failure = self.failures.get(command)
        if failure is not None and failure.step > self.last_change_step:
            return (
                f"`{command}` already failed at step {failure.step}: {failure.error}. "
                "Nothing has changed since (only read-only commands ran); running it again will fail the same way. "
                "Fix the cause or take another approach.",
                f"the next action repeats the failure of step {failure.step}",
            )
        for constraint in self.constraints.values():
            if _contains(command, constraint.forbid) and not (
                constraint.instead and _contains(command, constraint.instead)
            ):
                instead = f" Use `{constraint.instead}` instead." if constraint.instead else ""
                return (
                    f"Constraint: {constraint.text} Your next command `{command}` uses `{constraint.forbid}`.{instead}",
                    f"the next action contradicts the saved constraint {constraint.item_id}",
                )
        if failure is not None:
            return None, f"retrying a failure of step {failure.step} after a change at step {self.last_change_step}"
        return None, "nothing remembered bears on the next action"

    def __call__(self, view: MemoryView) -> Decision:
        updates = self.update(view)
        reminder, rationale = self.decide(view)
        return Decision(updates=updates, reminder=reminder, rationale=rationale)


# --- An OpenAI-compatible chat endpoint ---------------------------------------------------------
_ROLE = """You are a memory agent paired with an action agent on a long task. The memory bank
has status (progress, only you see it), knowledge (stable facts: requirements, paths,
constraints) and procedural (attempts and outcomes: commands that failed or worked, diagnoses)."""

UPDATE_PROMPT = (
    _ROLE
    + """
This turn you only manage the memory bank: record what the recent steps taught, replace
what is out of date, delete what is wrong. Do not address the action agent.
Answer with one JSON object and nothing else:
{"updates": [{"tool": "memory_update_status", "content": "..."},
             {"tool": "memory_save_knowledge", "id": "...", "content": "...", "tags": ["..."]},
             {"tool": "memory_save_procedural", "id": "...", "content": "...", "outcome": "failed|worked|..."},
             {"tool": "memory_delete", "id": "..."}]}
An empty list is fine. Item ids: letters, digits and . _ : @ - only."""
)

DECIDE_PROMPT = (
    _ROLE
    + """
The bank below is already updated. Decide whether to remind the action agent of something.
Only intervene if a remembered item will affect its NEXT decision. Do not give general advice
and do not repeat what is already visible in the recent steps. Silence is usually right.
Answer with one JSON object and nothing else:
{"reminder": "one specific, grounded reminder" or null, "rationale": "why you spoke or stayed silent"}"""
)

_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)
_CONTEXT_TAG = re.compile(r"<context_for_action>(.*?)</context_for_action>", re.S)


def _first_json_object(text: str) -> Any:
    fenced = _FENCE.search(text)
    if fenced:
        try:
            return json.loads(fenced.group(1))
        except ValueError:
            pass
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(text[start:])
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_reply(text: str) -> Decision:
    """A chat reply → Decision. Takes a JSON object (fenced or bare); falls back to the
    `<context_for_action>…</context_for_action>` / `<no_intervention/>` tags; anything else is
    silence (an unreadable reply must never put words in the action agent's context)."""
    text = text or ""
    value = _first_json_object(text)
    if isinstance(value, dict) and ({"updates", "reminder"} & value.keys()):
        decision = as_decision(value)
        decision.rationale = decision.rationale or "model reply"
        return decision
    tagged = _CONTEXT_TAG.search(text)
    if tagged and tagged.group(1).strip():
        return Decision(reminder=tagged.group(1).strip(), rationale="model reply (tagged)")
    if "<no_intervention" in text:
        return Decision(rationale="model chose silence")
    return Decision(rationale="unreadable model reply; stayed silent")


def apply_updates(bank: Mapping[str, Any], updates: Sequence[BankUpdate]) -> dict[str, Any]:
    """A copy of `bank` with `updates` applied locally — for a decider used on its own, without
    an Engram run to write to (the loop writes through Engram and re-reads instead)."""
    result: dict[str, Any] = dict(bank)
    knowledge = [dict(i) for i in result.get("knowledge") or []]
    procedural = [dict(i) for i in result.get("procedural") or []]
    for update in updates:
        if update.tool == "memory_update_status":
            result["status"] = update.content
        elif update.tool == "memory_delete":
            knowledge = [i for i in knowledge if i.get("id") != update.id]
            procedural = [i for i in procedural if i.get("id") != update.id]
        elif update.tool == "memory_save_knowledge":
            knowledge = [i for i in knowledge if i.get("id") != update.id]
            knowledge.append({"id": update.id, "content": update.content, "tags": list(update.tags)})
        elif update.tool == "memory_save_procedural":
            procedural = [i for i in procedural if i.get("id") != update.id]
            procedural.append({"id": update.id, "content": update.content, "outcome": update.outcome or "noted"})
    result["knowledge"], result["procedural"] = knowledge, procedural
    return result


class OpenAICompatibleDecider:
    """A memory agent backed by any OpenAI-compatible `/chat/completions` endpoint, in two
    phases, two calls: `update(view)` asks for bank operations only; `decide(view)` — given the
    bank as it is after those operations — asks for one reminder or silence. The loop writes the
    operations through Engram and re-reads the bank between the two.

    Configured by arguments or the environment: OPENAI_BASE_URL (default
    https://api.openai.com/v1), OPENAI_API_KEY, OPENAI_MODEL (required)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        *,
        timeout: float = 60.0,
        temperature: float = 0.0,
    ) -> None:
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"OPENAI_BASE_URL must be an http(s) URL, not {self.base_url!r}")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.model = model or os.environ.get("OPENAI_MODEL") or ""
        if not self.model:
            raise ValueError("Set OPENAI_MODEL (or pass model=) for the OpenAI-compatible memory agent.")
        self.timeout = timeout
        self.temperature = temperature
        # No retries: a failed completion costs one silent decision, not a stalled action agent.
        self.llm = ChatCompletions(
            self.base_url, self.model, self.api_key, timeout=timeout, temperature=temperature, retries=0
        )
        self.transport = self.llm.transport

    @staticmethod
    def _situation(view: MemoryView, bank_label: str) -> str:
        window = [s.as_dict() for s in view.window]
        return (
            f"Task: {view.task}\n\n"
            f"Recent trajectory (last {len(window)} steps): {json.dumps(window, ensure_ascii=False)}\n\n"
            f"{bank_label}: {json.dumps(dict(view.bank), ensure_ascii=False, default=str)}\n\n"
            + (
                f"The action agent is about to run: {json.dumps(view.proposed, ensure_ascii=False)}\n"
                if view.proposed
                else ""
            )
        )

    def update_messages(self, view: MemoryView) -> list[dict[str, str]]:
        """Phase 1's prompt: the task, the last steps, the bank as it is now."""
        user = self._situation(view, "Current memory bank") + (
            "The run is over: bring the bank up to date with the whole run."
            if view.final
            else f"Update the bank before the decision about step {view.step}."
        )
        return [{"role": "system", "content": UPDATE_PROMPT}, {"role": "user", "content": user}]

    def decide_messages(self, view: MemoryView) -> list[dict[str, str]]:
        """Phase 2's prompt: the same situation with the bank after phase 1's operations."""
        user = self._situation(view, "Updated memory bank") + f"This is the decision before step {view.step}."
        return [{"role": "system", "content": DECIDE_PROMPT}, {"role": "user", "content": user}]

    def complete(self, messages: list[dict[str, str]]) -> str:
        """POST chat/completions; the reply's text. Raises LLMError (an EngramError) on a refused
        call, no answer, or a reply without text."""
        return self.llm.complete(messages)

    def update(self, view: MemoryView) -> list[BankUpdate]:
        """Phase 1: the bank operations the model asks for (a reminder in this reply is ignored)."""
        return parse_reply(self.complete(self.update_messages(view))).updates

    def decide(self, view: MemoryView) -> tuple[str | None, str]:
        """Phase 2: (reminder or None, rationale) on `view.bank`, the updated bank (operations in
        this reply are ignored: the bank was updated in phase 1)."""
        decision = parse_reply(self.complete(self.decide_messages(view)))
        return decision.reminder, decision.rationale

    def __call__(self, view: MemoryView) -> Decision:
        """Both phases without a loop: phase 2 sees `view.bank` with phase 1 applied locally."""
        updates = self.update(view)
        if view.final:
            return Decision(updates=updates, rationale="the run is over")
        reminder, rationale = self.decide(replace(view, bank=apply_updates(view.bank, updates)))
        return Decision(updates=updates, reminder=reminder, rationale=rationale)


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
            updates = [u for u in (_update_of(raw) for raw in two_phase.update(view) or []) if u is not None]
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
