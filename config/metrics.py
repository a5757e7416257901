"""/metrics: Prometheus text for one scrape — request latency per view (django-prometheus's
middlewares), Engram's counters and histograms (memory.metrics) and the review queue's size
(review.metrics), plus the process's own (CPU, memory, open files).

Who may read it: a request carrying `Authorization: Bearer $ENGRAM_METRICS_TOKEN` (compared in
constant time), or — when ENGRAM_METRICS_LOCAL is on (the default with DEBUG=1) — a request from
the loopback address that no proxy forwarded. Behind a proxy on the same host every request comes
from 127.0.0.1, so in production the token is the way in. Anyone else gets 403 and nothing more.
The output holds no memory content: its labels are view names, methods, statuses, outcomes and
kinds, never a path, an id, a key or a text.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from django_prometheus.middleware import PrometheusAfterMiddleware
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from review.metrics import QueueSizeCollector

# Headers a reverse proxy adds: a request carrying one did not start on this machine.
FORWARDED_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP", "HTTP_FORWARDED")
METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}


def may_scrape(request: HttpRequest) -> bool:
    """The bearer token when one is configured, else (if allowed) an unforwarded loopback request."""
    token = settings.ENGRAM_METRICS_TOKEN
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if token and scheme.lower() == "bearer":
        return hmac.compare_digest(given.strip().encode(), token.encode())
    if not settings.ENGRAM_METRICS_LOCAL or any(header in request.META for header in FORWARDED_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


class _ThisProcess(Collector):
    """Everything registered in prometheus_client's default registry (one process's metrics)."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()

    def describe(self) -> Iterable[Metric]:
        return ()


def scrape_registry() -> CollectorRegistry:
    """What one scrape reads: every process's values when they share PROMETHEUS_MULTIPROC_DIR
    (gunicorn workers and Celery under bin/serve-prod), else this process's; and the queue gauge."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(QueueSizeCollector())
    return registry


@never_cache
@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not may_scrape(request):
        return HttpResponseForbidden("Forbidden", content_type="text/plain")
    # generate_latest writes the classic text format; declared as 0.0.4, the version every
    # Prometheus server recognises (the library's default header announces 1.0.0).
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_PLAIN_0_0_4)


class _BoundedLabels:
    """django-prometheus labels latency by the raw request method; any other token a client sends
    becomes `<invalid method>`, so a hostile client cannot mint series."""

    def label_metric(self, metric: Any, request: HttpRequest, response: Any = None, **labels: str) -> Any:
        if labels.get("method") is not None and labels["method"] not in METHODS:
            labels["method"] = "<invalid method>"
        return metric.labels(**labels) if labels else metric


class MetricsAfterMiddleware(_BoundedLabels, PrometheusAfterMiddleware):
    """Last in MIDDLEWARE (django-prometheus's PrometheusBeforeMiddleware is first): latency,
    counts and statuses per view name (the URL pattern's name, `api-fact`, never the path: ids in
    URLs do not multiply the series)."""
