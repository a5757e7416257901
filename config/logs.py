"""Structured logs: one JSON object per line (production), plain text in development."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        # Extra fields passed with logger.info(..., extra={...}) become keys of their own.
        payload.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


# An HTTP request line's query string: `GET /memory/acme/?q=vault+code HTTP/1.1`.
_QUERY = re.compile(r"((?:GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) [^ ?\"]*)\?[^ \"]*")


def without_query(text: str) -> str:
    """`text` with every request line's query string replaced by `?…`."""
    return _QUERY.sub(r"\1?…", text)


class RedactQueryStrings(logging.Filter):
    """Keeps what people search for out of the logs (issue 39): the development server logs each
    request line, query string and all (`GET /memory/<ws>/?q=…`), and a search for an erased
    text would outlive its erasure there. Every record's message loses its query strings."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = without_query(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True
