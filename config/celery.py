"""Celery: inline (eager) in embedded mode, real workers when CELERY_BROKER_URL is set."""

import os

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("engram")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Periodic work for `celery beat` (production). Stale detection challenges facts not validated
# within their memory type's window (SPEC §7); daily is ample for windows counted in days.
app.conf.beat_schedule = {
    "detect-stale-facts": {"task": "memory.tasks.detect_stale_facts", "schedule": crontab(hour=3, minute=17)},
}
