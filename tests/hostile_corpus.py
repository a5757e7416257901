"""The hostile input corpus, shared by the API's suite (tests/test_hostile_input.py) and the MCP
server's: values, whole bodies, query strings, form values, and hostile object KEYS.

Every entry of HOSTILE_KEYS, KEY_BODIES and KEYS_AT_EVERY_DEPTH must be refused (400 with a
stable code, nothing written) wherever a JSON body is read: each holds NUL or an unpaired
surrogate in a key, which PostgreSQL cannot store and a UTF-8 encoder cannot write back (issue
33: `{"\\ud800": 1}` was a 500 on every JSON endpoint because the refusal echoed the key).
LARGE_KEY_BODIES are well-formed and need not be refused; they must only never be a 5xx nor slow.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from memory.safe_json import MAX_DEPTH as MAX_JSON_DEPTH  # deeper is refused before any key is read

FTS = "a & b | !c :* (d) <-> e:A ' \\ \" !! ((( ::"
HUGE = "99999999999999999999"

# --- Values ------------------------------------------------------------------------------------
# Field values (the body stays otherwise valid, so each value reaches as deep as it can).
FIELD_VALUES: list[Any] = [
    "\ud800",
    "a\x00b",
    int(HUGE),
    2**63 - 1,
    -1,
    1.5,
    None,
    [[[["deep"]]]],
    {"a": {"b": "c"}},
    FTS,
]
# Whole bodies, as bytes: what a JSON encoder would never produce.
RAW_BODIES: dict[str, bytes] = {
    "deep object": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "deep array": b"[" * 5000 + b"]" * 5000,
    "65 deep": b"[" * 65 + b"]" * 65,
    "NaN": b'{"a": NaN}',
    "Infinity": b'{"a": Infinity}',
    "-Infinity": b'{"a": -Infinity}',
    "1e400": b'{"a": 1e400}',
    "duplicate keys": b'{"a": 1, "a": 2}',
    "not UTF-8": b'{"a": "\xff\xfe"}',
    "escaped NUL key": b'{"a\\u0000": 1}',
    "lone low surrogate": b'{"a": "\\udc00"}',
    "not JSON": b"not json",
    "empty": b"",
    "null": b"null",
    "array": b"[]",
    "string": b'"s"',
    "number": b"1",
    "truncated": b'{"a": ',
    "BOM": b"\xef\xbb\xbf{}",
    "3 MB": b'{"a": "' + b"x" * 3_000_000 + b'"}',
}

# --- Keys --------------------------------------------------------------------------------------
# Object keys no JSON endpoint may accept (Python strings: json.dumps writes each bad character as
# the raw `\uXXXX` escape, e.g. "\ud800" -> `"\ud800"`). Each holds NUL or an unpaired surrogate.
HOSTILE_KEYS: dict[str, str] = {
    "lone high surrogate": "\ud800",
    "lone low surrogate": "\udc00",
    "last high surrogate": "\udbff",
    "reversed pair": "\udc00\ud800",
    "high surrogate then text": "\ud800a",
    "text then low surrogate": "a\udc00",
    "NUL": "\x00",
    "NUL inside": "a\x00b",
    "NUL and surrogate": "\x00\ud800",
    "a path's punctuation": 'a.b[0]"\\\ud800',
    "HTML": "<script>alert(1)</script>\ud800",
    "very long, surrogate last": "k" * 100_000 + "\ud800",
    "very long, NUL first": "\x00" + "k" * 100_000,
}


def dumps(value: Any) -> bytes:
    """`value` as a JSON body: bad characters become `\\uXXXX` escapes (what a client sends)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def with_key(base: dict[str, Any], key: str, value: Any = 1) -> bytes:
    """A valid body `base` plus one hostile `key` at its top level."""
    return dumps({**base, key: value})


def nested_key(key: str, depth: int, value: Any = 1) -> bytes:
    """`{"a": {"a": ... {key: value}}}`: `key` in the object at `depth` (1 = the top level)."""
    node: Any = {key: value}
    for _ in range(depth - 1):
        node = {"a": node}
    return dumps(node)


def _key_bodies() -> dict[str, bytes]:
    bodies: dict[str, bytes] = {
        # The body, byte for byte.
        "the issue's body": b'{"\\ud800": 1}',
        "lone low surrogate key": b'{"\\udc00": 1}',
        "lone surrogate key, spaced": b'{ "\\uD800" : "x" }',
        "escaped NUL key": b'{"\\u0000": 1}',
        "NUL key, string value": b'{"\\u0000": "\\u0000"}',
        "surrogate key and surrogate value": b'{"\\ud800": "\\udc00"}',
        "duplicate surrogate keys": b'{"\\ud800": 1, "\\ud800": 2}',
        "surrogate key in an array": b'[{"\\ud800": 1}]',
        "surrogate key in an array field": b'{"items": [{"ok": 1}, {"\\ud800": 1}]}',
        "surrogate key under a key": b'{"files": {"\\ud800": "x"}}',
        "surrogate key with a bad value beside": b'{"a": 99999999999999999999, "\\ud800": 1}',
        "many keys, one bad": dumps({**{f"k{i}": i for i in range(20_000)}, "\ud800": 1}),
        "many bad keys": dumps({f"\ud800{i}": i for i in range(5_000)}),
        "many keys, bad in each nested": dumps({f"k{i}": {"\x00": i} for i in range(2_000)}),
    }
    for label, key in HOSTILE_KEYS.items():
        bodies[f"key: {label}"] = dumps({key: 1})
        bodies[f"nested key: {label}"] = dumps({"a": [{"b": {key: [key]}}]})
    for depth in (2, MAX_JSON_DEPTH // 2, MAX_JSON_DEPTH):
        bodies[f"surrogate key at depth {depth}"] = nested_key("\ud800", depth)
    bodies[f"NUL key at depth {MAX_JSON_DEPTH}"] = nested_key("\x00", MAX_JSON_DEPTH)
    return bodies


# Whole bodies each with at least one hostile key (every one a 400), a few depths among them.
KEY_BODIES: dict[str, bytes] = _key_bodies()
# A bad key at every depth the parser reads (deeper is json_too_deep before any key is looked at):
# the lone surrogate, and each key of HOSTILE_KEYS in turn. One endpoint's worth (every
# endpoint reads its body with the same parser; KEY_BODIES has a few depths for each).
KEYS_AT_EVERY_DEPTH: dict[str, bytes] = {}
for _depth, (_label, _key) in zip(range(1, MAX_JSON_DEPTH + 1), [*HOSTILE_KEYS.items()] * MAX_JSON_DEPTH, strict=False):
    KEYS_AT_EVERY_DEPTH[f"lone high surrogate at depth {_depth}"] = nested_key("\ud800", _depth)
    KEYS_AT_EVERY_DEPTH[f"{_label} at depth {_depth}"] = nested_key(_key, _depth)

# Well-formed keys that are merely large: never a 5xx, never slow (they may be accepted).
LARGE_KEY_BODIES: dict[str, bytes] = {
    "very long key": dumps({"k" * 500_000: 1}),
    "many keys": dumps({f"k{i}": i for i in range(50_000)}),
    "non-BMP keys": dumps({"\U0001f600" * 1000: "\U0001f600"}),
    "keys that look like paths": dumps({"a.b[0]": 1, "a": {"b": [0]}, "": 1}),
}

# --- Query strings, pages and forms ------------------------------------------------------------
QUERY_VALUES = [
    "%00",
    "%ED%A0%80",
    "%FF",
    HUGE,
    "-" + HUGE,
    "9223372036854775807",
    "-1",
    "%C2%B2",  # "²": str.isdigit() says yes, int() says no
    "NaN",
    "1e400",
    "1.5",
    quote(FTS),
    "x" * 3000,
    quote("<script>alert(1)</script>"),
]
PAGE_VALUES = [v for v in QUERY_VALUES if v not in {"%FF", "1e400", "1.5"}]  # the same cases, for pages
# Pages: values refused at the edge are tried once (as the reviewer); the others as both people.
REFUSED_AT_THE_EDGE = {"%00", HUGE, "-" + HUGE}
FORM_VALUES = ["\x00", HUGE, "-1", "\u00b2", "<script>alert(1)</script>", "x" * 20_000, FTS]
