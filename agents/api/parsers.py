"""The API's one body parser: strict JSON (memory.safe_json) refused with the API's error shape.

A refused body answers 400 with a stable code — `malformed_json`, `json_too_deep`,
`duplicate_key`, `invalid_characters` (NUL, unpaired surrogates, bytes that are not UTF-8),
`integer_out_of_range`, `number_out_of_range` — and `fields` naming where, when known
(`{"items[2].path": [...]}`). It is raised before any view code runs on the data, so a refused
call writes nothing.

Keys are checked as values are, at every depth (memory.safe_json walks the decoded body without
recursion). What a refusal echoes (the path, which holds the keys) is spelled with NUL and
surrogates as visible `\\u0000`/`\\ud800`, and past 200 characters by its two ends (the refused
key is last): `{"\\ud800": 1}` echoed raw could not be encoded and was a 500 on every endpoint
(issue 33). The decoded text is also checked as a whole: a `charset` such as utf-7 or
unicode_escape turns bytes into NUL or a surrogate without the `\\u` escape that tells safe_json
to look.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.parsers import JSONParser

from agents.api.renderers import printable
from memory import safe_json
from memory.errors import InvalidInput

INVALID_CHARACTERS = "Text may not contain NUL or unpaired surrogates."


class SafeJSONParser(JSONParser):
    def parse(
        self, stream: IO[Any] | None, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise InvalidInput(
                f"The body is not valid {printable(encoding)} text.", code="invalid_characters"
            ) from None
        if safe_json.has_bad_characters(text):
            raise InvalidInput(INVALID_CHARACTERS, code="invalid_characters")
        try:
            return safe_json.loads(text)
        except safe_json.UnsafeJSON as exc:
            detail = printable(exc.detail, limit=500)
            fields = {printable(exc.path): [detail]} if exc.path else {}
            raise InvalidInput(detail, code=exc.code, fields=fields) from None
