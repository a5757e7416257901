"""Parsing the remember sub-agent's output (SPEC §8).

The sub-agent is told to emit one fenced JSON block `{"recommendations": [{path,
recommended_layer, rationale, suggested_memory_content}]}`; prose around it is allowed. Small
models break the format, so when no JSON block parses the fallback extracts file paths from the
text: the review still goes ahead and the reviewer fills the notes in. Pure functions: no input
makes them raise (a property test holds them to that).
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from memory.safe_json import MAX_DEPTH as MAX_JSON_DEPTH
from memory.safe_json import nesting_depth
from review.models import ItemSource, RememberLayer

MAX_ITEMS = 10
MAX_SUGGESTED_CHARS = 800
MAX_RATIONALE_CHARS = 2_000
MAX_PATH_CHARS = 500

# Every scan below is linear in the text (the output may be ENGRAM_MAX_BODY_BYTES long): fences
# are found with str.find, no pattern can backtrack beyond the run it started in, and at most
# MAX_JSON_ATTEMPTS blocks of each kind are decoded (real outputs hold one; a decoding error costs
# time in proportion to its offset in the text).
MAX_JSON_ATTEMPTS = 20
_FENCE = "```"
_BARE_OBJECT = re.compile(r"\{\s*+\"recommendations\"\s*+:")
# A fallback path is the longest prefix of a run of path characters (the lookbehind: only where
# a run starts) that ends in a common source or doc extension. The lookahead keeps `a.tsx` from
# matching as `a.ts` and `a.py.orig` from matching at all, while `see a.md.` at the end of a
# sentence still does.
_FALLBACK_PATH = re.compile(
    r"(?<![A-Za-z0-9_./-])[A-Za-z0-9_./-]+\.(?:md|txt|py|tsx|ts|jsx|json|js|ya?ml)(?![A-Za-z0-9_]|\.[A-Za-z0-9_])"
)
_LAYERS = {layer.value for layer in RememberLayer}


@dataclass(frozen=True)
class ParsedItem:
    path: str
    recommended_layer: str
    rationale: str
    suggested_memory_content: str
    source: str
    bytes: int
    file_text: str


@dataclass(frozen=True)
class ParseResult:
    items: list[ParsedItem]
    used_fallback: bool


def clean_text(value: str) -> str:
    """Text PostgreSQL can store: no NUL characters, no lone surrogates (JSON escapes allow both)."""
    return value.replace("\x00", "").encode("utf-8", errors="replace").decode("utf-8")


def normalize_layer(value: object) -> str:
    """One of the three layers; anything else (typos, other layers, non-strings) → project/context."""
    if isinstance(value, str):
        candidate = value.strip().lower()
        if candidate in _LAYERS:
            return candidate
    return RememberLayer.PROJECT_CONTEXT.value


def normalize_path(value: str) -> str:
    """Relative path as the runtime's workdir sees it: whitespace and leading `./` stripped."""
    path = clean_text(value).strip()
    while path.startswith("./"):
        path = path[2:].lstrip()
    return path


def _text(value: object, limit: int) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return clean_text(text).strip()[:limit]


def _recommendations(candidate: object) -> list[Any] | None:
    if isinstance(candidate, dict) and isinstance(candidate.get("recommendations"), list):
        return candidate["recommendations"]
    return None


def _last_fenced_blocks(text: str) -> deque[tuple[int, int]]:
    """Where the bodies of the last MAX_JSON_ATTEMPTS ``` fences lie: the rest of the opening line
    (a language tag, say) is skipped and the body runs to the next fence."""
    spans: deque[tuple[int, int]] = deque(maxlen=MAX_JSON_ATTEMPTS)
    position = 0
    while (start := text.find(_FENCE, position)) >= 0:
        newline = text.find("\n", start + len(_FENCE))
        end = text.find(_FENCE, newline + 1) if newline >= 0 else -1
        if end < 0:  # no later fence can close either
            break
        spans.append((newline + 1, end))
        position = end + len(_FENCE)
    return spans


def extract_json_block(text: str) -> list[Any] | None:
    """The `recommendations` list of the last fenced JSON block that parses (of the last
    MAX_JSON_ATTEMPTS fences); else of the first bare `{"recommendations": …}` object in the text
    that parses; None when there is none. JSON nested deeper than MAX_JSON_DEPTH is ignored."""
    for start, end in reversed(_last_fenced_blocks(text)):
        body = text[start:end]
        if nesting_depth(body) > MAX_JSON_DEPTH:
            continue
        try:
            parsed = _recommendations(json.loads(body))
        except (ValueError, RecursionError):
            continue
        if parsed is not None:
            return parsed
    decoder = json.JSONDecoder()
    resume = 0  # a start before this lies inside an object already decoded (or found broken)
    attempts = 0
    for match in _BARE_OBJECT.finditer(text):
        if match.start() < resume:
            continue
        if attempts == MAX_JSON_ATTEMPTS:
            break
        attempts += 1
        try:
            obj, resume = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError as exc:
            resume = exc.pos
            continue
        except (ValueError, RecursionError):  # an absurd number or nesting: no position to resume at
            break
        parsed = _recommendations(obj)
        if parsed is not None and nesting_depth(text[match.start() : resume]) <= MAX_JSON_DEPTH:
            return parsed
    return None


def fallback_paths(text: str) -> Iterator[str]:
    """File paths with a common source/doc extension, in order of first appearance (lazily: the
    text may name 100,000 paths and ten are kept)."""
    return (normalize_path(path) for path in dict.fromkeys(_FALLBACK_PATH.findall(text)))


def _normalized_files(files: Mapping[str, str] | None) -> dict[str, str]:
    result: dict[str, str] = {}
    for path, text in (files or {}).items():
        if isinstance(path, str) and isinstance(text, str):
            result.setdefault(normalize_path(path), clean_text(text))
    return result


def _item(path: str, layer: str, rationale: str, content: str, source: str, files: dict[str, str]) -> ParsedItem:
    file_text = files.get(path, "")
    return ParsedItem(
        path=path,
        recommended_layer=layer,
        rationale=rationale,
        suggested_memory_content=content,
        source=source,
        bytes=len(file_text.encode("utf-8")),
        file_text=file_text,
    )


def _unique_paths(paths: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    seen: set[str] = set()
    kept: list[tuple[str, Any]] = []
    for path, payload in paths:
        if not path or len(path) > MAX_PATH_CHARS or path in seen:
            continue
        seen.add(path)
        kept.append((path, payload))
        if len(kept) == MAX_ITEMS:
            break
    return kept


def parse_remember_output(output: str, files: Mapping[str, str] | None = None) -> ParseResult:
    """Items of a review: from the JSON block when one parses, else from paths in the text.

    `./` stripped, duplicates dropped (first wins), at most MAX_ITEMS, layers forced to the
    three of SPEC §8, suggested content capped at MAX_SUGGESTED_CHARS; sizes and texts come
    from `files` (the uploaded file texts). An empty list means nothing to review."""
    text = output if isinstance(output, str) else ""
    uploaded = _normalized_files(files)
    recommendations = extract_json_block(text)
    if recommendations is not None:
        entries = [
            (normalize_path(entry["path"]), entry)
            for entry in recommendations
            if isinstance(entry, dict) and isinstance(entry.get("path"), str)
        ]
        items = [
            _item(
                path,
                normalize_layer(entry.get("recommended_layer")),
                _text(entry.get("rationale", entry.get("reason")), MAX_RATIONALE_CHARS),
                _text(entry.get("suggested_memory_content"), MAX_SUGGESTED_CHARS),
                ItemSource.JSON.value,
                uploaded,
            )
            for path, entry in _unique_paths(entries)
        ]
        return ParseResult(items=items, used_fallback=False)
    paths = _unique_paths((path, None) for path in fallback_paths(text))
    items = [
        _item(path, RememberLayer.PROJECT_CONTEXT.value, "", "", ItemSource.FALLBACK.value, uploaded)
        for path, _ in paths
    ]
    return ParseResult(items=items, used_fallback=True)
