"""What a failing request answers when nothing else can (issue 33).

- SafeExceptionReporter (settings.DEFAULT_EXCEPTION_REPORTER): DEBUG's technical 500 page, and
  the error e-mails, written with what UTF-8 cannot encode (an unpaired surrogate the request
  carried) spelled `\\ud800`. Django's own page raised UnicodeEncodeError on such a request; every
  middleware layer then built the page again around a longer chain of exceptions (16-66 s under
  `make run`) and the last error escaped the handler.
- last_resort: the WSGI application's answer when an exception escapes Django's handler anyway.
  Django sends `request_finished` (which closes the request's database connection) only when
  the server closes a response; with no response the connection stayed open after its request
  (10 idle connections for 40 minutes under `make run`). It sends the signal itself and answers
  a plain 500: the API's JSON error body under /api/, text elsewhere.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

from django.core import signals
from django.utils.safestring import SafeString, mark_safe
from django.views.debug import ExceptionReporter

logger = logging.getLogger("django.request")


def encodable(text: str) -> str:
    """`text` as UTF-8 can write it: an unpaired surrogate becomes the visible `\\ud800`."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class SafeExceptionReporter(ExceptionReporter):
    # Django's pages, escaped by their templates; only unencodable characters are respelled.
    def get_traceback_html(self) -> SafeString:
        return mark_safe(encodable(super().get_traceback_html()))  # noqa: S308

    def get_traceback_text(self) -> SafeString:
        return mark_safe(encodable(super().get_traceback_text()))  # noqa: S308


SERVER_ERROR = {"code": "server_error", "detail": "Something went wrong on our side; it was logged.", "fields": {}}


def last_resort(
    application: Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]],
) -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
    """Wrap a WSGI application: an exception escaping it is logged, ends the request (signal
    `request_finished`: its database connections are closed) and answers 500."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            return application(environ, start_response)
        except Exception:
            exc_info = sys.exc_info()
            path = environ.get("PATH_INFO", "")
            try:
                logger.error("Unhandled error escaped the handler: %s", encodable(str(path)), exc_info=exc_info)
            finally:
                signals.request_finished.send(sender=type(application))
            if str(path).startswith("/api/"):
                body, kind = json.dumps(SERVER_ERROR).encode(), "application/json"
            else:
                body, kind = b"Server error. It was logged.", "text/plain; charset=utf-8"
            start_response(
                "500 Internal Server Error", [("Content-Type", kind), ("Content-Length", str(len(body)))], exc_info
            )
            return [body]

    return wsgi
