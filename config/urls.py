import sys

from django.contrib import admin
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.urls import include, path

from agents.api.errors import json_404, json_500
from config.metrics import metrics_view


def healthz(request: HttpRequest) -> HttpResponse:
    from memory.health import health_response

    return health_response(request)


urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("agents.api.urls")),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("", include("review.urls")),
]


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return json_404(request, exception)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    # Called while the exception is handled: an unreachable database met outside a view (in a
    # middleware, say) is a 503 too, as DatabaseUnavailableMiddleware answers for views.
    exc = sys.exc_info()[1]
    if isinstance(exc, (OperationalError, InterfaceError)):
        from config.middleware import database_unavailable

        return database_unavailable(request, exc)
    if request.path.startswith("/api/"):
        return json_500(request)
    from django.views.defaults import server_error

    return server_error(request)
