"""What the proactive memory agent (engram_client.memory_agent) decides with: the view of the last
steps and the bank it reads (MemoryView), the bank updates and the decision it returns, and the two
built-in deciders — RuleBasedDecider (offline) and OpenAICompatibleDecider (an OpenAI-compatible
chat endpoint, one call per phase). engram_client.memory_agent re-exports every name here.

Standard library only; the decider's HTTP calls go through engram_client.llm.ChatCompletions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engram_client.llm import ChatCompletions

Action = dict[str, Any]
Observation = dict[str, Any]
OUTPUT_KEEP = 1_000
TAG_MAX = 100
TOOLS: tuple[str, ...] = ("memory_update_status", "memory_save_knowledge", "memory_save_procedural", "memory_delete")


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
            updates=[u for u in (bank_update_of(raw) for raw in value.get("updates") or []) if u is not None],
            reminder=str(reminder).strip() or None if reminder else None,
            rationale=str(value.get("rationale") or ""),
        )
    raise TypeError(f"A decider returns a Decision, a string, None or a mapping, not {type(value).__name__}.")


def bank_update_of(raw: Any) -> BankUpdate | None:
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
