"""/healthz: database, broker and embedding model, each reported on its own; read replicas too,
which never make it fail (the primary serves what a replica cannot)."""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

from memory import embeddings, replicas


def check_health() -> dict[str, Any]:
    report: dict[str, Any] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
        report["database"] = {"ok": row is not None, "pgvector": row[0] if row else None}
    except Exception as exc:  # the point is to report, not to raise
        report["database"] = {"ok": False, "error": exc.__class__.__name__}
    if settings.CELERY_BROKER_URL:
        try:
            # The project's Celery app (config.celery), reached without importing config from here.
            with current_app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
            report["broker"] = {"ok": True, "mode": "redis"}
        except Exception as exc:
            report["broker"] = {"ok": False, "error": exc.__class__.__name__}
    else:
        report["broker"] = {"ok": True, "mode": "inline"}
    report["embedding_model"] = {"ok": True, "name": embeddings.MODEL_NAME, "loaded": embeddings.is_loaded()}
    report["ok"] = all(part["ok"] for part in report.values() if isinstance(part, dict))
    if replicas.configured():
        report["replicas"] = [state.report() for state in replicas.monitor.states()]
    return report


def health_response(request: HttpRequest) -> JsonResponse:
    report = check_health()
    return JsonResponse(report, status=200 if report["ok"] else 503)
