"""The remember prompt (`remember.v1`, SPEC §8) as the MCP server offers it.

The one text is the client's `clients/python/engram_client/prompts/remember_v1.md`, read from
the checkout (the server does not import engram_client): an MCP runtime and a runtime using
`engram_client.render_remember_prompt` give the remember sub-agent the same words. The
rendering rules below mirror the client's for a list of paths; tests/agents/test_mcp.py holds
both renderings equal.
"""

from __future__ import annotations

import re
import string
from functools import cache
from pathlib import Path

from django.conf import settings

REMEMBER_PROMPT_VERSION = "remember.v1"
REMEMBER_PROMPT_PATH = Path("clients/python/engram_client/prompts/remember_v1.md")
# The client's bounds (engram_client.remember): Engram keeps at most 10 items of 800 characters.
MAX_FILES = 10
MAX_NOTE_CHARS = 800
MAX_TASK_CHARS = 4_000
MAX_SUMMARY_CHARS = 8_000
MAX_LISTED_ARTIFACTS = 200
MAX_PATH_CHARS = 500


@cache
def remember_template() -> str:
    """The template text, read once per process. FileNotFoundError names the path if missing."""
    return (Path(settings.BASE_DIR) / REMEMBER_PROMPT_PATH).read_text(encoding="utf-8")


def _text(value: str, name: str, limit: int, *, required: bool) -> str:
    text = value.replace("\x00", "").strip()
    if required and not text:
        raise ValueError(f"{name} must not be empty.")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def artifact_paths(artifacts: str) -> list[str]:
    """The paths of a comma- or newline-separated list: stripped, without a leading `./`,
    each once. ValueError for none, or for a path longer than the client accepts."""
    paths: list[str] = []
    for part in re.split(r"[,\n\r]", artifacts.replace("\x00", "")):
        path = part.strip()
        while path.startswith("./"):
            path = path[2:].lstrip()
        if not path:
            continue
        if len(path) > MAX_PATH_CHARS:
            raise ValueError(f"Not an artifact path: {path[:80]!r}.")
        paths.append(path)
    if not paths:
        raise ValueError("A remember prompt needs at least one artifact.")
    return list(dict.fromkeys(paths))


def render_remember_prompt(task: str, turn_summary: str, artifacts: str) -> str:
    """The remember sub-agent's prompt for one turn; `artifacts` lists the files the turn produced
    or changed, separated by commas or newlines. ValueError for an empty task or no artifact."""
    paths = artifact_paths(artifacts)
    lines = [f"- {path}" for path in paths[:MAX_LISTED_ARTIFACTS]]
    if len(paths) > MAX_LISTED_ARTIFACTS:
        lines.append(f"- … and {len(paths) - MAX_LISTED_ARTIFACTS} more")
    return string.Template(remember_template()).substitute(
        task=_text(task, "task", MAX_TASK_CHARS, required=True),
        turn_summary=_text(turn_summary, "turn_summary", MAX_SUMMARY_CHARS, required=False) or "(no summary given)",
        artifacts="\n".join(lines),
        max_files=MAX_FILES,
        max_note_chars=MAX_NOTE_CHARS,
    )
