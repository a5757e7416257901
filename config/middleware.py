"""Refuse oversized API bodies before anything reads them (413, the API's error format)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


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
