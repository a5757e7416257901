"""The API's error answers: DRF's EXCEPTION_HANDLER is the one mapping of
agents.operations.errors (shared with the MCP server); unknown paths and crashes answer in the
same `{"code", "detail", "fields"}` shape."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from agents.operations.errors import error_body
from agents.operations.errors import exception_handler as exception_handler  # settings.REST_FRAMEWORK


@csrf_exempt  # the API uses no cookies; an unknown path is a 404 whatever the method
def json_404(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("not_found", "No such API path."), status=404)


def json_500(request: HttpRequest) -> JsonResponse:
    return JsonResponse(error_body("server_error", "Something went wrong on our side; it was logged."), status=500)
