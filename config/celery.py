"""Celery: inline (eager) in embedded mode, real workers when CELERY_BROKER_URL is set."""

import os

from celery import Celery
from celery.schedules import crontab

from memory.scheduler import DAILY_JOBS, FREQUENT_JOBS

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("engram")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Periodic work for `celery beat` (production), from the one definition of the daily jobs; the
# embedded mode runs the same jobs in-process (memory.scheduler, ENGRAM_SCHEDULER).
app.conf.beat_schedule = {
    job.name: {"task": job.task, "schedule": crontab(hour=job.hour, minute=job.minute)} for job in DAILY_JOBS
}
# The frequent sweeps (due webhook deliveries): every minute under beat, each tick in-process.
app.conf.beat_schedule.update({job.name: {"task": job.task, "schedule": job.seconds} for job in FREQUENT_JOBS})
