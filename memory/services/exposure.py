"""The exposure trail's retention (issue 21): rows older than ENGRAM_EXPOSURE_RETENTION_DAYS are
deleted by the daily job `prune-exposures` (memory.scheduler.DAILY_JOBS). Recording is in
memory.recalls (off the request path), reading in memory.selectors_exposure."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.models import Exposure

PRUNE_BATCH = 10_000


def prune_exposures(*, now: datetime | None = None, batch: int = PRUNE_BATCH) -> int:
    """Delete exposures served before now − ENGRAM_EXPOSURE_RETENTION_DAYS, in batches of
    `batch` rows (each its own short transaction, so recording is never held up); returns how
    many. Retention 0 keeps everything. Idempotent. Writes no audit event: the scheduler records
    the run and its count."""
    days = settings.ENGRAM_EXPOSURE_RETENTION_DAYS
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted = 0
    while True:
        with transaction.atomic():
            ids = list(Exposure.objects.filter(served_at__lt=cutoff).order_by().values_list("pk", flat=True)[:batch])
            if not ids:
                return deleted
            deleted += Exposure.objects.filter(pk__in=ids).delete()[0]
        if len(ids) < batch:
            return deleted
