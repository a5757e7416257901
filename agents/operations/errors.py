"""The one place errors become JSON: `{"code", "detail", "fields"}` (API.md) — for the API
(DRF's EXCEPTION_HANDLER, via agents.api.errors), the MCP server and the in-process adapter."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from memory.errors import EngramError

logger = logging.getLogger("engram.api")

_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.ParseError: "malformed_json",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.Throttled: "throttled",
    exceptions.NotFound: "not_found",
    exceptions.PermissionDenied: "forbidden",
}


def _flatten(detail: Any) -> Any:
    if isinstance(detail, dict):
        return {str(k): _flatten(v) for k, v in detail.items()}
    if isinstance(detail, list):
        return [_flatten(v) for v in detail]
    return str(detail)


def error_body(code: str, detail: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"code": code, "detail": detail, "fields": fields or {}}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, EngramError):
        body = error_body(exc.code, exc.detail, exc.fields)
        body.update({key: value for key, value in exc.extra.items() if key not in body})
        return Response(body, status=exc.status)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, (OperationalError, InterfaceError)):
        logger.warning("database unavailable: %s", exc)
        return Response(
            error_body("database_unavailable", "The database is unavailable; retry shortly."),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "2"},
        )
    if isinstance(exc, DatabaseError):
        return None  # a real bug: let it surface as a 500 and be logged
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail) if isinstance(exc.detail, dict) else {"non_field_errors": _flatten(exc.detail)}
        response.data = error_body("invalid_input", "The request has invalid fields; see `fields`.", fields)
        return response
    if isinstance(exc, exceptions.AuthenticationFailed | exceptions.NotAuthenticated):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else "authentication_failed"
        code = {"not_authenticated": "not_authenticated", "authentication_failed": "invalid_key"}.get(
            str(code), str(code)
        )
        response.data = error_body(code, str(exc.detail))
        response.status_code = status.HTTP_401_UNAUTHORIZED
        return response
    code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), "error")
    if (
        isinstance(exc, exceptions.APIException)
        and isinstance(exc.get_codes(), str)
        and exc.get_codes()
        not in (
            "error",
            "permission_denied",
            "not_found",
            "parse_error",
            "throttled",
            "method_not_allowed",
            "unsupported_media_type",
            "not_acceptable",
        )
    ):
        code = str(exc.get_codes())
    detail = str(exc.detail) if isinstance(exc, exceptions.APIException) else str(exc)
    response.data = error_body(code, detail)
    return response
