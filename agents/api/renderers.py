"""The API's one renderer: DRF's JSON that can always be written (issue 33).

A string holding an unpaired UTF-16 surrogate (`"\\ud800"`) cannot be encoded as UTF-8; DRF's
renderer raised on it and an error that echoed such a key became a 500 (and, under DEBUG, a
debug page that failed the same way). The parser refuses such input before any view sees it;
this is the last line of defence: what cannot be encoded is written as its escape, as text
(`\\ud800`, six visible characters), so the body is valid UTF-8 and valid JSON. `printable` is
the same spelling for what an error echoes on purpose (a key, a path), with a length cap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import JSONRenderer

_UNENCODABLE = re.compile("[\ud800-\udfff]")
_NUL_OR_UNENCODABLE = re.compile("[\x00\ud800-\udfff]")
ECHO_MAX_CHARS = 200


def printable(text: str, *, limit: int = ECHO_MAX_CHARS) -> str:
    """`text` fit to be echoed in an error: NUL and unpaired surrogates spelled as their JSON
    escapes (`\\u0000`, `\\ud800` as visible text); past `limit` characters, its start and its end
    (where a path names the refused key) around "…"."""
    if len(text) > limit:
        half = limit // 2
        return f"{printable(text[:half])}…{printable(text[-half:])}"
    return _NUL_OR_UNENCODABLE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def _encodable(value: Any) -> Any:
    """`value` with every unpaired surrogate in its strings and keys spelled as visible text.
    Response data nests no deeper than what the parser let in (memory.safe_json.MAX_DEPTH)."""
    if isinstance(value, str):
        return _UNENCODABLE.sub(lambda m: f"\\u{ord(m[0]):04x}", value)
    if isinstance(value, Mapping):
        return {_encodable(k) if isinstance(k, str) else k: _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(v) for v in value]
    return value


class SafeJSONRenderer(JSONRenderer):
    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None
    ) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return super().render(_encodable(data), accepted_media_type, renderer_context)
