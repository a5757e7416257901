"""The edge: requests refused before any view reads them, and the answer when the database is down.

- BodySizeLimitMiddleware: API bodies over ENGRAM_MAX_BODY_BYTES answer 413.
- MalformedRequestMiddleware: a path or query string holding NUL (or an unpaired surrogate), an
  integer query parameter beyond 64 bits, a page's form field holding NUL, or a chunked body the
  server cannot read answers 400/411/413 before any view: JSON for the API, a plain escaped page
  elsewhere. JSON bodies themselves are checked by the API's parser (agents.api.parsers).
- AccessMemoMiddleware: a request reads each person's workspace and domain ids once (memory.access).
- DatabaseUnavailableMiddleware: pages answer 503 with a friendly page and Retry-After when the
  database cannot be reached, as the API does (agents.api.errors).
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import TooManyFieldsSent, TooManyFilesSent
from django.core.handlers.wsgi import LimitedStream
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.template.loader import render_to_string

from memory import access
from memory.safe_json import INT_MAX, INT_MIN, has_bad_characters

logger = logging.getLogger("engram.edge")
RETRY_AFTER_SECONDS = 2
_INTEGER = re.compile(r"\s*[+-]?\d[\d_]*\s*")
_FORMS = {"application/x-www-form-urlencoded", "multipart/form-data"}


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def refusal(
    request: HttpRequest, status: int, code: str, detail: str, fields: dict[str, Any] | None = None
) -> HttpResponse:
    """The API's error body, or for pages and the admin a plain page (escaped by the template)."""
    if _is_api(request):
        return JsonResponse({"code": code, "detail": detail, "fields": fields or {}}, status=status)
    titles = {400: "Bad request", 411: "Length required", 413: "Request too large", 503: "Temporarily unavailable"}
    html = render_to_string(
        "errors/refused.html", {"status": status, "title": titles.get(status, "Error"), "detail": detail}
    )
    return HttpResponse(html, status=status, content_type="text/html; charset=utf-8")


class BodySizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > settings.ENGRAM_MAX_BODY_BYTES:
                return JsonResponse(
                    {
                        "code": "body_too_large",
                        "detail": f"The body is {length} bytes; the limit is {settings.ENGRAM_MAX_BODY_BYTES}.",
                        "fields": {},
                    },
                    status=413,
                )
        return self.get_response(request)


def beyond_64_bits(value: str) -> bool:
    """True for an integer (as int() reads it: signs, spaces, underscores) outside a bigint."""
    if not _INTEGER.fullmatch(value):
        return False
    digits = value.strip().lstrip("+-").replace("_", "").lstrip("0")
    if len(digits) > 19:  # also keeps int() away from thousands of digits
        return True
    try:
        return not INT_MIN <= int(value) <= INT_MAX
    except ValueError:  # "1__0": not an integer at all; the view refuses it
        return False


class MalformedRequestMiddleware:
    """Refuse what no view should see (see the module docstring). Chunked bodies: gunicorn decodes
    them (it says so with `wsgi.input_terminated`) and they are read here up to the body limit;
    servers that do not (runserver) get 411 `length_required` asking for Content-Length."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.refuse(request) or self.get_response(request)

    def refuse(self, request: HttpRequest) -> HttpResponse | None:
        if has_bad_characters(request.path):
            return refusal(
                request, 400, "invalid_characters", "The path may not contain NUL or unpaired surrogate characters."
            )
        if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower() and not request.META.get(
            "CONTENT_LENGTH"
        ):
            refused = self._read_chunked(request)
            if refused:
                return refused
        try:
            refused = self._check_fields(request, request.GET.lists(), "query parameter")
            # Pages only: the API's bodies are JSON, read once by its parser.
            if refused is None and not _is_api(request) and request.method == "POST" and request.content_type in _FORMS:
                refused = self._check_fields(request, request.POST.lists(), "form field")
        except (TooManyFieldsSent, TooManyFilesSent):
            return refusal(request, 400, "too_many_fields", "The request has too many fields.")
        except MultiPartParserError:
            return refusal(request, 400, "malformed_form", "The form data could not be read.")
        return refused

    def _check_fields(
        self, request: HttpRequest, fields: Iterable[tuple[str, list[str]]], kind: str
    ) -> HttpResponse | None:
        for name, values in fields:
            if has_bad_characters(name) or any(has_bad_characters(value) for value in values):
                return refusal(
                    request,
                    400,
                    "invalid_characters",
                    f"The {kind} {name!r} may not contain NUL or unpaired surrogate characters.",
                )
            if kind == "query parameter" and any(beyond_64_bits(value) for value in values):
                message = f"Must be between {INT_MIN} and {INT_MAX}."
                return refusal(
                    request,
                    400,
                    "invalid_input",  # the code of every other refused parameter (agents.api.pagination)
                    f"The {kind} {name!r} is out of range.",
                    {name: [message]},
                )
        return None

    def _read_chunked(self, request: HttpRequest) -> HttpResponse | None:
        if not request.META.get("wsgi.input_terminated"):
            return refusal(
                request,
                411,
                "length_required",
                "Chunked request bodies are not supported by this server; send the body with a Content-Length header.",
            )
        limit = settings.ENGRAM_MAX_BODY_BYTES
        body = request.META["wsgi.input"].read(limit + 1)
        if len(body) > limit:
            return refusal(request, 413, "body_too_large", f"The body is over the limit of {limit} bytes.")
        request.META["CONTENT_LENGTH"] = str(len(body))
        request._stream = LimitedStream(io.BytesIO(body), len(body))  # type: ignore[assignment]
        return None


def database_unavailable(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """503 with Retry-After: the API's `database_unavailable` body, or a friendly page."""
    logger.warning("database unavailable: %s", exc)
    if _is_api(request):
        response: HttpResponse = JsonResponse(
            {"code": "database_unavailable", "detail": "The database is unavailable; retry shortly.", "fields": {}},
            status=503,
        )
    else:
        html = render_to_string("errors/unavailable.html", {"retry_after": RETRY_AFTER_SECONDS})
        response = HttpResponse(html, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseUnavailableMiddleware:
    """Pages and the admin: an unreachable database is a 503 the browser can retry, not a 500
    (or, with DEBUG, a stack trace). DRF views answer it themselves in agents.api.errors."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, (OperationalError, InterfaceError)):
            return database_unavailable(request, exception)
        return None


class AccessMemoMiddleware:
    """The rules of memory.access read a person's workspaces and domains once per request (as id
    lists, read anew when rights change) instead of compiling them as subqueries for every list."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with access.remembering():
            return self.get_response(request)
