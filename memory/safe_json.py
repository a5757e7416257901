"""Strict JSON for input from outside: every check linear in the text, nothing recursive before
the depth is known to be small.

What `loads` refuses, each with a stable code (the API answers 400 with it):
- `json_too_deep`: arrays/objects nested deeper than MAX_DEPTH, measured by a scan without
  recursion before the decoder (which recurses) sees the text.
- `malformed_json`: anything Python's strict decoder refuses, plus the literals NaN, Infinity
  and -Infinity (Python accepts them by default; they are not JSON).
- `duplicate_key`: an object naming one key twice. Refused rather than "last wins": two parsers
  (a proxy, a log pipeline, this one) must never read one body two ways.
- `invalid_characters`: NUL or an unpaired UTF-16 surrogate (`"\\ud800"`) in any string or key;
  PostgreSQL cannot store either.
- `integer_out_of_range`: an integer outside a signed 64-bit column (it could reach SQL).
- `number_out_of_range`: a number too large for a float (`1e400` would become infinity).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

MAX_DEPTH = 64
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1

# A string literal, or an unterminated one up to the end of the text. Possessive quantifiers:
# no backtracking, so each character is looked at once whatever the input.
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
# Brackets become signed bytes (+1 opens, -1 closes), everything else is dropped: the depth is
# then a running sum computed in C.
_AS_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[{]}"))
# Only a text with one of these needs the walk over the decoded value: a NUL or a surrogate can
# only arrive as a \u escape (strict decoding refuses raw control characters, and raw surrogates
# are not UTF-8); an integer beyond 64 bits has at least 19 digits.
_UNICODE_ESCAPE = "\\u"
_LONG_DIGITS = re.compile(r"[0-9]{19}")
_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")


class UnsafeJSON(ValueError):
    """Why a text was refused: a stable `code`, a sentence, and where (`path`, "" for the whole)."""

    def __init__(self, code: str, detail: str, path: str = "") -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.path = path


def nesting_depth(text: str) -> int:
    """How deeply arrays and objects nest in `text` (string contents ignored); linear, no recursion.
    On malformed text the figure is approximate, which is enough to refuse before decoding."""
    outside_strings = _STRING.sub("", text).encode("utf-8", "ignore")
    steps = np.frombuffer(outside_strings.translate(_AS_STEPS, _NOT_BRACKETS), dtype=np.int8)
    return int(steps.cumsum(dtype=np.int64).max()) if steps.size else 0


def has_bad_characters(value: str) -> bool:
    """True when `value` holds NUL or an unpaired surrogate (neither can be stored)."""
    return _BAD_CHARACTER.search(value) is not None


def _refuse_constant(name: str) -> Any:
    raise UnsafeJSON("malformed_json", f"{name} is not a JSON number.")


class _OutOfRange:
    """Stands in for a number that must not be used, until the walk reports it with its path."""

    def __init__(self, code: str, literal: str) -> None:
        self.code = code
        self.literal = literal[:40]


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise UnsafeJSON("duplicate_key", f"The key {key[:80]!r} appears twice in one object.")
            seen.add(key)
    return obj


# Where a node is: None for the whole body, else (where its parent is, its key or index). Spelled
# out (`a.b[2]`) only for the node refused: building every node's path as a string copied each
# key into all its descendants' paths (a 200,000-character key over 4,000 items: 6.6 s).
_Where = tuple[Any, str | int] | None


def _spell(where: _Where) -> str:
    steps: list[str | int] = []
    while where is not None:
        where, step = where
        steps.append(step)
    path = ""
    for step in reversed(steps):
        path += f"[{step}]" if isinstance(step, int) else f".{step}" if path else step
    return path


def _nodes(value: Any) -> Iterator[tuple[_Where, Any]]:
    """Every key and value under `value` with where it is, iteratively."""
    stack: list[tuple[_Where, Any]] = [(None, value)]
    while stack:
        where, node = stack.pop()
        yield where, node
        if isinstance(node, dict):
            for key, child in node.items():
                child_where = (where, key)
                yield child_where, key
                stack.append((child_where, child))
        elif isinstance(node, list):
            stack.extend(((where, index), child) for index, child in enumerate(node))


def _check(value: Any) -> None:
    for where, node in _nodes(value):
        if isinstance(node, str):
            if has_bad_characters(node):
                raise UnsafeJSON(
                    "invalid_characters", "Text may not contain NUL or unpaired surrogates.", _spell(where)
                )
        elif isinstance(node, _OutOfRange):
            if node.code == "integer_out_of_range":
                raise UnsafeJSON(node.code, f"{node.literal} does not fit in 64 bits (±{INT_MAX}).", _spell(where))
            raise UnsafeJSON(node.code, f"{node.literal} is too large for a number.", _spell(where))


def loads(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Decode `text` under the rules of this module; UnsafeJSON says why not."""
    if text.count("[") + text.count("{") > max_depth and nesting_depth(text) > max_depth:
        raise UnsafeJSON("json_too_deep", f"Arrays and objects may nest at most {max_depth} deep.")
    flagged = _UNICODE_ESCAPE in text

    def bounded_int(literal: str) -> Any:
        nonlocal flagged
        if len(literal) <= 20:  # longer ones are out of range, and int() would refuse past 4300 digits
            value = int(literal)
            if INT_MIN <= value <= INT_MAX:
                return value
        flagged = True
        return _OutOfRange("integer_out_of_range", literal)

    def finite_float(literal: str) -> Any:
        nonlocal flagged
        value = float(literal)
        if math.isfinite(value):
            return value
        flagged = True
        return _OutOfRange("number_out_of_range", literal)

    try:
        value = json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_int=bounded_int if _LONG_DIGITS.search(text) else None,
            parse_float=finite_float,
            object_pairs_hook=_unique_keys,
        )
    except UnsafeJSON:
        raise
    except RecursionError:  # unreachable after the depth scan; kept so that no input makes a 500
        raise UnsafeJSON("json_too_deep", f"Arrays and objects may nest at most {max_depth} deep.") from None
    except ValueError as exc:
        raise UnsafeJSON("malformed_json", f"The body is not valid JSON: {exc}.") from None
    if flagged:
        _check(value)
    return value
