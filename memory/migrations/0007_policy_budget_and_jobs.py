# Bounded pushes (validated policy budget) and bounded jobs (one unfinished consolidate/harmonize per scope).

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0004_agent_trust_flags"),
        ("memory", "0006_ef_search_200"),
    ]

    operations = [
        migrations.AlterField(
            model_name="workspace",
            name="policy_budget_chars",
            field=models.PositiveIntegerField(
                default=2000,
                help_text="Characters the active policies may add to every dispatch. A proposal, revision or activation that would go past it is refused (409 policy_budget_exceeded).",
                validators=[django.core.validators.MaxValueValidator(20000)],
            ),
        ),
        migrations.CreateModel(
            name="Job",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "kind",
                    models.CharField(
                        choices=[("consolidate", "Consolidate"), ("harmonize", "Harmonize")], max_length=20
                    ),
                ),
                (
                    "scope",
                    models.CharField(
                        help_text="What runs one at a time: the workspace, or agent+session.", max_length=300
                    ),
                ),
                ("task_id", models.CharField(max_length=64, unique=True)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("queued", "Queued"),
                            ("running", "Running"),
                            ("done", "Done"),
                            ("failed", "Failed"),
                            ("expired", "Expired"),
                        ],
                        default="queued",
                        max_length=10,
                    ),
                ),
                ("arguments", models.JSONField(blank=True, default=dict)),
                ("report", models.JSONField(blank=True, null=True)),
                ("error", models.CharField(blank=True, max_length=500)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("expires_at", models.DateTimeField()),
                (
                    "requested_by_agent",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="agents.agent",
                    ),
                ),
                (
                    "workspace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="jobs", to="memory.workspace"
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
                "indexes": [models.Index(fields=["workspace", "-created_at"], name="job_by_workspace")],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("finished_at__isnull", True)),
                        fields=("kind", "scope"),
                        name="job_one_unfinished_per_scope",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("finished_at__isnull", True), ("state__in", ["queued", "running"])),
                            models.Q(("finished_at__isnull", False), ("state__in", ["done", "failed", "expired"])),
                            _connector="OR",
                        ),
                        name="job_finished_iff_final_state",
                    ),
                ],
            },
        ),
    ]
