"""A memory-agent run records why it ended and its latest sign of life (issue 39, point 6): the
daily job closes a run idle for ENGRAM_RUN_ABANDON_HOURS as abandoned.

MemoryRun's table is still `agents_memoryrun` (moved to memory state-only in 0010); the fields
are added to it as to any memory table. The backfill says every run finished so far was finished
by its agent, and takes each run's latest sign of life from its start, its bank items' last
writes and its decisions (a deleted item has left no trace: those runs count from the rest)."""

import django.utils.timezone
from django.db import migrations, models
from django.db.models import Max, OuterRef, Subquery
from django.db.models.functions import Greatest


def backfill(apps, schema_editor):
    MemoryRun = apps.get_model("memory", "MemoryRun")
    BankItem = apps.get_model("memory", "BankItem")
    Intervention = apps.get_model("memory", "Intervention")
    MemoryRun.objects.filter(status="finished", end_reason="").update(end_reason="finished")
    written = (
        BankItem.objects.filter(run=OuterRef("pk")).order_by().values("run").annotate(at=Max("updated_at")).values("at")
    )
    decided = (
        Intervention.objects.filter(run=OuterRef("pk"))
        .order_by()
        .values("run")
        .annotate(at=Max("created_at"))
        .values("at")
    )
    # PostgreSQL's GREATEST skips NULLs: a run without items or decisions counts from its start.
    MemoryRun.objects.update(last_activity_at=Greatest("created_at", Subquery(written), Subquery(decided)))


class Migration(migrations.Migration):
    dependencies = [("memory", "0022_fact_recently_mentioned")]

    operations = [
        migrations.AddField(
            model_name="memoryrun",
            name="end_reason",
            field=models.CharField(
                blank=True,
                default="",
                help_text="Why the run ended: `finished` by its agent, or `abandoned: no activity for N hours`; "
                "blank while it runs.",
                max_length=200,
            ),
        ),
        migrations.AddField(
            model_name="memoryrun",
            name="last_activity_at",
            field=models.DateTimeField(
                default=django.utils.timezone.now,
                help_text="The run's latest sign of life: its start, or a write of its agent (bank, decision).",
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
        migrations.AddIndex(
            model_name="memoryrun",
            index=models.Index(
                condition=models.Q(("status", "running")), fields=["last_activity_at"], name="memoryrun_running_idle"
            ),
        ),
        migrations.AddConstraint(
            model_name="memoryrun",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("status", "running"), ("end_reason", "")),
                    models.Q(("status", "finished"), models.Q(("end_reason", ""), _negated=True)),
                    _connector="OR",
                ),
                name="memoryrun_end_reason_iff_finished",
            ),
        ),
    ]
