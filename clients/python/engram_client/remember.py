"""The runtime half of the remember review (SPEC §8): decide, run the sub-agent, review, note.

    engram = EngramClient("http://127.0.0.1:8000", key)
    helper = RememberTurn(engram)                     # sub-agent: ENGRAM_REMEMBER_LLM_URL/_MODEL/_KEY
    turn = Turn(session_id="turn-42", task=question, summary=what_was_done,
                artifacts=["docs/testing.md"], workdir="/work/checkout")
    result = helper.remember(turn, on_submitted=lambda r: print("Review at", r["review_url"]))
    final_answer += "\\n\\n" + result.note          # "" when nothing was reviewed

At the end of a turn the runtime, not the agent, decides: the remember sub-agent is forced
when the turn produced artifacts, and skipped when the turn produced none or a remember run
(or its pending review) is already live for the session in this helper. The sub-agent gets the
versioned prompt `prompts/remember_v1.md` (REMEMBER_PROMPT, `remember.v1`) rendered for the turn
and runs on an OpenAI-compatible endpoint (engram_client.llm) or any `run_subagent(prompt) -> str`
callable. Its output goes to Engram as a review (Engram parses it); the helper waits for a
person, consumes the review and returns the note to fold into the final answer.

Engram holds one live review per agent and session (pending, or decided but not yet consumed),
so a restarted runtime loses nothing: before launching the sub-agent, `remember` asks Engram for
the session's live review and, when there is one, resumes it (waits, consumes, returns the note)
instead of running the sub-agent again; `resume(session_id)` finds it there too when this
process never knew it.
"""

from __future__ import annotations

import string
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from engram_client.errors import EngramError, ReviewTimeout
from engram_client.llm import ChatCompletions
from engram_client.review import ReviewClient, ReviewOutcome, final_answer_note

__all__ = [
    "MAX_FILES",
    "MAX_NOTE_CHARS",
    "REMEMBER_PROMPT",
    "REMEMBER_PROMPT_VERSION",
    "Decision",
    "RememberResult",
    "RememberTurn",
    "Turn",
    "render_remember_prompt",
    "should_remember",
]

REMEMBER_PROMPT_VERSION = "remember.v1"
REMEMBER_PROMPT_FILE = "prompts/remember_v1.md"
# The template text, as shipped in the package (Engram's MCP prompt `remember` serves the same file).
REMEMBER_PROMPT = resources.files("engram_client").joinpath(REMEMBER_PROMPT_FILE).read_text(encoding="utf-8")

# Engram's parser keeps at most 10 items and 800 characters of suggested content (SPEC §8).
MAX_FILES = 10
MAX_NOTE_CHARS = 800
# Bounds on what goes into the prompt, so a huge turn cannot make an unbounded request.
MAX_TASK_CHARS = 4_000
MAX_SUMMARY_CHARS = 8_000
MAX_LISTED_ARTIFACTS = 200
MAX_PATH_CHARS = 500
EXCERPT_CHARS = 2_000
MAX_EXCERPTS_CHARS = 24_000
# Bounds on the file texts uploaded with the review (the server's body limit defaults to 2 MB).
MAX_FILE_CHARS = 100_000
MAX_UPLOAD_CHARS = 1_000_000
SESSION_ID_MAX = 200


def _text(value: object, name: str, limit: int, *, required: bool) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}.")
    text = value.replace("\x00", "").strip()
    if required and not text:
        raise ValueError(f"{name} must not be empty.")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def normalize_path(value: object) -> str:
    """A relative artifact path as the sub-agent should name it: stripped, no leading `./`,
    one line. ValueError for anything else (a non-string, an empty or overlong path)."""
    if not isinstance(value, str):
        raise TypeError(f"An artifact path must be a string, not {type(value).__name__}.")
    path = value.strip()
    while path.startswith("./"):
        path = path[2:].lstrip()
    if not path or len(path) > MAX_PATH_CHARS or any(ch in path for ch in "\r\n\x00"):
        raise ValueError(f"Not an artifact path: {value[:80]!r}.")
    return path


def _paths(artifacts: Sequence[str] | Mapping[str, str | None]) -> list[str]:
    if isinstance(artifacts, str | bytes):
        raise TypeError("artifacts must be a list of paths (or a mapping of path to text), not one string.")
    return list(dict.fromkeys(normalize_path(p) for p in artifacts))


def _artifact_block(artifacts: Sequence[str] | Mapping[str, str | None]) -> str:
    """The artifact list for the prompt: one `- path` line each (at most MAX_LISTED_ARTIFACTS),
    with an indented excerpt of each file's text when `artifacts` maps paths to texts."""
    paths = _paths(artifacts)
    if not paths:
        raise ValueError("A remember prompt needs at least one artifact.")
    texts = {normalize_path(p): t for p, t in artifacts.items()} if isinstance(artifacts, Mapping) else {}
    lines: list[str] = []
    budget = MAX_EXCERPTS_CHARS
    for path in paths[:MAX_LISTED_ARTIFACTS]:
        text = texts.get(path)
        if not isinstance(text, str):
            lines.append(f"- {path}")
            continue
        lines.append(f"- {path} ({len(text)} characters)")
        excerpt = text.replace("\x00", "")[: min(EXCERPT_CHARS, budget)]
        budget -= len(excerpt)
        if excerpt.strip():
            lines += [f"    {line}" for line in excerpt.rstrip().splitlines()]
            if len(excerpt) < len(text):
                lines.append("    […]")
    if len(paths) > MAX_LISTED_ARTIFACTS:
        lines.append(f"- … and {len(paths) - MAX_LISTED_ARTIFACTS} more")
    return "\n".join(lines)


def render_remember_prompt(task: str, turn_summary: str, artifacts: Sequence[str] | Mapping[str, str | None]) -> str:
    """The remember sub-agent's prompt (`remember.v1`) for one turn.

    `artifacts` lists the files the turn produced or changed (relative paths), or maps them to
    their texts so a model without file access sees an excerpt of each. Long inputs are capped
    (task, summary, 200 listed paths, 2,000 characters per excerpt); TypeError/ValueError for a
    missing task, a path that is not one, or no artifact at all."""
    return string.Template(REMEMBER_PROMPT).substitute(
        task=_text(task, "task", MAX_TASK_CHARS, required=True),
        turn_summary=_text(turn_summary, "turn_summary", MAX_SUMMARY_CHARS, required=False) or "(no summary given)",
        artifacts=_artifact_block(artifacts),
        max_files=MAX_FILES,
        max_note_chars=MAX_NOTE_CHARS,
    )


@dataclass(frozen=True)
class Turn:
    """What a runtime knows at the end of a user turn.

    `artifacts`: the files the turn produced or changed, relative to `workdir`. `files`: their
    texts, if the runtime has them; otherwise they are read from `workdir` (Engram cannot see
    the runtime's disk). `repo`: the Engram repo slug the turn worked in, if any."""

    session_id: str
    task: str
    summary: str = ""
    artifacts: Sequence[str] = ()
    files: Mapping[str, str] | None = None
    workdir: str | Path | None = None
    repo: str | None = None


@dataclass(frozen=True)
class Decision:
    """Whether to launch the remember sub-agent for a turn, and why (for the runtime's log)."""

    launch: bool
    reason: str


def _artifacts_of(turn: Turn) -> list[str]:
    if isinstance(turn.artifacts, str | bytes):
        raise TypeError("Turn.artifacts must be a list of paths, not one string.")
    paths = [normalize_path(p) for p in turn.artifacts]
    if turn.files:
        paths += [normalize_path(p) for p in turn.files]
    return list(dict.fromkeys(paths))


def should_remember(turn: Turn, live_sessions: Sequence[str] | set[str] = ()) -> Decision:
    """The rule (SPEC §8, seed 000 §2.1): skip when a remember run or review is live for the
    session (no duplicate launch), skip when the turn produced no artifact (an empty
    conversation), otherwise force the launch — the agent is not asked whether to remember."""
    session_id = _session(turn.session_id)
    if session_id in live_sessions:
        return Decision(False, f"skipped: a remember run is already live for session {session_id!r}")
    artifacts = _artifacts_of(turn)
    if not artifacts:
        return Decision(False, "skipped: the turn produced no artifacts")
    return Decision(True, f"forced: the turn produced {len(artifacts)} artifact(s)")


def _session(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"session_id must be a string, not {type(value).__name__}.")
    session_id = value.strip()
    if not session_id or len(session_id) > SESSION_ID_MAX:
        raise ValueError(f"session_id must be 1–{SESSION_ID_MAX} characters.")
    return session_id


@dataclass
class RememberResult:
    """What the helper did for a turn.

    `status`: `skipped` (see `decision.reason`), `nothing_nominated` (the sub-agent named no
    file, so no review was opened) or the review's final status (`consumed`). `note` is the
    text to fold into the final answer ("" when no review was resolved)."""

    decision: Decision
    status: str
    prompt_version: str = REMEMBER_PROMPT_VERSION
    output: str = ""
    outcome: ReviewOutcome | None = None
    note: str = ""
    review: dict[str, Any] = field(default_factory=dict)

    @property
    def review_id(self) -> int | None:
        return self.outcome.id if self.outcome is not None else (int(self.review["id"]) if self.review else None)


def read_artifacts(workdir: str | Path, paths: Sequence[str]) -> dict[str, str]:
    """The texts of `paths` under `workdir` (UTF-8, undecodable bytes replaced, each capped at
    MAX_FILE_CHARS). Paths outside `workdir`, missing or unreadable files are left out."""
    root = Path(workdir).expanduser().resolve()
    texts: dict[str, str] = {}
    for path in paths:
        target = (root / path).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            continue
        try:
            with target.open("r", encoding="utf-8", errors="replace") as handle:
                texts[path] = handle.read(MAX_FILE_CHARS)
        except OSError:
            continue
    return texts


class RememberTurn:
    """The remember step of a runtime, one instance per runtime (it tracks live sessions; Engram
    keeps each session's live review too, so a fresh instance after a restart resumes it).

    `engram`: an EngramClient (or its `.reviews`). The sub-agent is `run_subagent(prompt) ->
    output` when given, else a ChatCompletions built from `llm` or from the environment
    (ENGRAM_REMEMBER_LLM_URL, _MODEL, _KEY); ValueError when neither is configured. `timeout`
    bounds the wait for a person (None: as long as it takes; on ReviewTimeout the review stays
    pending, the session stays live and `resume` waits again)."""

    def __init__(
        self,
        engram: Any,
        *,
        run_subagent: Callable[[str], str] | None = None,
        llm: ChatCompletions | None = None,
        timeout: float | None = None,
    ) -> None:
        self.reviews: ReviewClient = engram.reviews if hasattr(engram, "reviews") else engram
        if run_subagent is None:
            run_subagent = llm if llm is not None else ChatCompletions()
        self.run_subagent = run_subagent
        self.timeout = timeout
        self._lock = threading.Lock()
        # session id → None while the sub-agent runs, the review id while its review waits.
        self._live: dict[str, int | None] = {}

    def live_sessions(self) -> set[str]:
        with self._lock:
            return set(self._live)

    def should_remember(self, turn: Turn) -> Decision:
        """`should_remember` against this helper's live sessions."""
        return should_remember(turn, self.live_sessions())

    def _claim(self, turn: Turn) -> Decision:
        """Decide and, on launch, mark the session live — atomically, so two threads ending the
        same turn launch one sub-agent."""
        with self._lock:
            decision = should_remember(turn, set(self._live))
            if decision.launch:
                self._live[_session(turn.session_id)] = None
            return decision

    def _release(self, session_id: str) -> None:
        with self._lock:
            self._live.pop(session_id, None)

    def _files_for(self, turn: Turn, artifacts: list[str]) -> dict[str, str]:
        files = {normalize_path(p): t for p, t in (turn.files or {}).items() if isinstance(t, str)}
        missing = [p for p in artifacts if p not in files]
        if turn.workdir is not None and missing:
            files.update(read_artifacts(turn.workdir, missing))
        return files

    def remember(self, turn: Turn, *, on_submitted: Callable[[dict[str, Any]], object] | None = None) -> RememberResult:
        """Decide; when launched: resume the session's review live on Engram if it has one (a
        restarted runtime's: no sub-agent, nothing submitted, `on_submitted` not called), else
        render the prompt, run the sub-agent, submit its output with the nominated files' texts;
        then wait for a person, consume, and return the note.

        A sub-agent failure (LLMError for the endpoint) propagates and nothing is submitted;
        the session is released so a later call may try again. A failure after submission
        (ReviewTimeout, a lost connection) leaves the review pending and the session live:
        `resume(session_id)` waits again."""
        decision = self._claim(turn)
        if not decision.launch:
            return RememberResult(decision=decision, status="skipped")
        session_id = _session(turn.session_id)
        submitted = False
        try:
            live = self.reviews.live(session_id)
            if live is not None:
                submitted = True
                return self._resume(session_id, live)
            artifacts = _artifacts_of(turn)
            files = self._files_for(turn, artifacts)
            prompt = render_remember_prompt(turn.task, turn.summary, {p: files.get(p) for p in artifacts})
            output = self.run_subagent(prompt)
            if not isinstance(output, str):
                raise TypeError(f"run_subagent must return the sub-agent's text, not {type(output).__name__}.")
            if not output.strip():
                return RememberResult(decision=decision, status="nothing_nominated")
            upload = self._upload(files, output)
            try:
                review = self.reviews.submit(session_id=session_id, output=output, files=upload, repo=turn.repo)
            except EngramError as exc:
                if exc.code == "no_review_items":
                    return RememberResult(decision=decision, status="nothing_nominated", output=output)
                raise
            submitted = True
            with self._lock:
                self._live[session_id] = int(review["id"])
            if on_submitted is not None:
                on_submitted(review)
            result = RememberResult(decision=decision, status="pending", output=output, review=review)
            return self._finish(session_id, result)
        finally:
            if not submitted:
                self._release(session_id)

    def pending_review(self, session_id: str) -> int | None:
        """The id of the session's review this helper still waits on (after a ReviewTimeout)."""
        with self._lock:
            return self._live.get(session_id)

    def resume(self, session_id: str) -> RememberResult:
        """Wait again for the session's review, then consume it; the same result as `remember`.
        The review is the one a ReviewTimeout left pending here, else the session's live review
        on Engram (a restarted runtime's). ValueError when there is neither."""
        review_id = self.pending_review(session_id)
        if review_id is not None:
            review = self.reviews.get(review_id)
            result = RememberResult(
                decision=Decision(True, "resumed: waiting for the pending review"), status="pending", review=review
            )
            return self._finish(session_id, result)
        live = self.reviews.live(_session(session_id))
        if live is None:
            raise ValueError(f"No remember review is pending for session {session_id!r}.")
        return self._resume(_session(session_id), live)

    def _resume(self, session_id: str, review: dict[str, Any]) -> RememberResult:
        """Wait on `review`, the session's live review found on Engram, as on one submitted here."""
        review_id = int(review["id"])
        with self._lock:
            self._live[session_id] = review_id
        reason = f"resumed: review {review_id} of session {session_id!r} is live on the server"
        result = RememberResult(decision=Decision(True, reason), status="pending", review=review)
        return self._finish(session_id, result)

    def _finish(self, session_id: str, result: RememberResult) -> RememberResult:
        """Wait, consume, release the session; on ReviewTimeout the session stays live."""
        review_id = int(result.review["id"])
        review_url = str(result.review.get("review_url") or "")
        try:
            resolved = self.reviews.wait(review_id, timeout=self.timeout)
        except ReviewTimeout:
            raise ReviewTimeout(review_id, review_url) from None
        consumed = self.reviews.consume(review_id)
        self._release(session_id)
        outcome = ReviewOutcome.from_review({**resolved, "status": consumed.get("status", resolved["status"])})
        outcome.review_url = review_url
        result.outcome, result.status, result.note = outcome, outcome.status, final_answer_note(outcome)
        return result

    @staticmethod
    def _upload(files: Mapping[str, str], output: str) -> dict[str, str]:
        """The texts of the files the output names (Engram keeps only nominated files' texts),
        within MAX_UPLOAD_CHARS in all."""
        upload: dict[str, str] = {}
        budget = MAX_UPLOAD_CHARS
        for path, text in files.items():
            if path in output and len(text) <= budget:
                upload[path] = text
                budget -= len(text)
        return upload
