"""The API's one body parser: strict JSON (memory.safe_json) refused with the API's error shape.

A refused body answers 400 with a stable code — `malformed_json`, `json_too_deep`,
`duplicate_key`, `invalid_characters` (NUL, unpaired surrogates, bytes that are not UTF-8),
`integer_out_of_range`, `number_out_of_range` — and `fields` naming where, when known
(`{"items[2].path": [...]}`). It is raised before any view code runs on the data, so a refused
call writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.parsers import JSONParser

from memory import safe_json
from memory.errors import InvalidInput


class SafeJSONParser(JSONParser):
    def parse(
        self, stream: IO[Any] | None, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise InvalidInput(f"The body is not valid {encoding} text.", code="invalid_characters") from None
        try:
            return safe_json.loads(text)
        except safe_json.UnsafeJSON as exc:
            raise InvalidInput(exc.detail, code=exc.code, fields={exc.path: [exc.detail]} if exc.path else {}) from None
