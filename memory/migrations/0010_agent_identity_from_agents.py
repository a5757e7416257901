"""Agent, MemoryRun, BankItem and Intervention move from the agents app to memory (issue 17):
identity sits with tenancy, below review and the agent surface. State only: the tables keep
their names (agents_agent, …) and every foreign key already points at them. The content types
follow the models so permissions granted on them keep working."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

MOVED = ("agent", "memoryrun", "bankitem", "intervention")


def content_types_to_memory(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label="memory", model=model).exists():
            ContentType.objects.filter(app_label="agents", model=model).update(app_label="memory")


def content_types_to_agents(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label="agents", model=model).exists():
            ContentType.objects.filter(app_label="memory", model=model).update(app_label="agents")


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0004_agent_trust_flags"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("memory", "0009_possible_conflicts_and_mentions"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Agent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.SlugField(max_length=100)),
                        ("key_hash", models.CharField(editable=False, max_length=64, unique=True)),
                        (
                            "key_hint",
                            models.CharField(
                                editable=False,
                                help_text="First characters of the key, to tell keys apart.",
                                max_length=16,
                            ),
                        ),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "relays_human_words",
                            models.BooleanField(
                                default=False,
                                help_text="Relays people's own words (e.g. a chat front end): may propose human_stated facts. Only a workspace admin sets it; every change is audited.",
                            ),
                        ),
                        (
                            "is_verifier",
                            models.BooleanField(
                                default=False,
                                help_text="Independent verifier: its replays count for the evidence gate of candidates it did not submit. Only a workspace admin sets it; every change is audited.",
                            ),
                        ),
                        (
                            "role",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT, related_name="agents", to="memory.role"
                            ),
                        ),
                        (
                            "workspace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="agents",
                                to="memory.workspace",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "agents_agent",
                        "ordering": ["workspace", "name"],
                    },
                ),
                migrations.AlterField(
                    model_name="auditevent",
                    name="actor_agent",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="memory.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="candidate",
                    name="submitted_by_agent",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="candidates",
                        to="memory.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="episode",
                    name="agent",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="episodes",
                        to="memory.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="fact",
                    name="created_by_agent",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="facts",
                        to="memory.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="factmention",
                    name="agent",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="memory.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="hotmemory",
                    name="agent",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="hot_memories", to="memory.agent"
                    ),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="requested_by_agent",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="memory.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="observation",
                    name="agent",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="observations", to="memory.agent"
                    ),
                ),
                migrations.AlterField(
                    model_name="policy",
                    name="created_by_agent",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="memory.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="promotiondecision",
                    name="decided_by_agent",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="memory.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="replay",
                    name="recorded_by_agent",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="memory.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="workingmemory",
                    name="agent",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="working_memory", to="memory.agent"
                    ),
                ),
                migrations.CreateModel(
                    name="MemoryRun",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("task", models.TextField()),
                        (
                            "status",
                            models.CharField(
                                choices=[("running", "running"), ("finished", "finished")],
                                default="running",
                                max_length=10,
                            ),
                        ),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "agent",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memory_runs",
                                to="memory.agent",
                            ),
                        ),
                        (
                            "episode",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="memory_runs",
                                to="memory.episode",
                            ),
                        ),
                        (
                            "workspace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memory_runs",
                                to="memory.workspace",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "agents_memoryrun",
                        "ordering": ["-created_at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="Intervention",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("step", models.PositiveIntegerField()),
                        (
                            "reminder",
                            models.TextField(blank=True, help_text="Null: the memory agent stayed silent.", null=True),
                        ),
                        (
                            "rationale",
                            models.TextField(blank=True, help_text="Why it spoke or stayed silent (optional)."),
                        ),
                        (
                            "window",
                            models.JSONField(
                                blank=True, default=list, help_text="The steps it reviewed (at most the last 8)."
                            ),
                        ),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "run",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="interventions",
                                to="memory.memoryrun",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "agents_intervention",
                        "ordering": ["run", "step", "created_at", "id"],
                    },
                ),
                migrations.CreateModel(
                    name="BankItem",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("status", "status"),
                                    ("knowledge", "knowledge"),
                                    ("procedural", "procedural"),
                                ],
                                max_length=10,
                            ),
                        ),
                        (
                            "item_id",
                            models.CharField(help_text="The memory agent's own id for the item.", max_length=100),
                        ),
                        ("content", models.TextField(blank=True)),
                        ("tags", models.JSONField(blank=True, default=list, help_text="Knowledge items: labels.")),
                        (
                            "outcome",
                            models.CharField(
                                blank=True, help_text="Procedural items: failed, worked, …", max_length=200
                            ),
                        ),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "candidate",
                            models.ForeignKey(
                                blank=True,
                                help_text="The promotion candidate this item was offered as when the run finished.",
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="bank_items",
                                to="memory.candidate",
                            ),
                        ),
                        (
                            "run",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="bank_items",
                                to="memory.memoryrun",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "agents_bankitem",
                        "ordering": ["run", "kind", "created_at", "id"],
                    },
                ),
                migrations.AddConstraint(
                    model_name="agent",
                    constraint=models.UniqueConstraint(fields=("workspace", "name"), name="agent_unique_per_workspace"),
                ),
                migrations.AddConstraint(
                    model_name="agent",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("key_hash__regex", "^[0-9a-f]{64}$")), name="agent_key_is_sha256"
                    ),
                ),
                migrations.AddIndex(
                    model_name="memoryrun",
                    index=models.Index(fields=["agent", "-created_at"], name="memoryrun_agent_recent"),
                ),
                migrations.AddConstraint(
                    model_name="memoryrun",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("status", "running"), ("finished_at__isnull", True)),
                            models.Q(("status", "finished"), ("finished_at__isnull", False)),
                            _connector="OR",
                        ),
                        name="memoryrun_finished_at_iff_finished",
                    ),
                ),
                migrations.AddIndex(
                    model_name="intervention",
                    index=models.Index(fields=["run", "step"], name="intervention_run_step"),
                ),
                migrations.AddConstraint(
                    model_name="bankitem",
                    constraint=models.UniqueConstraint(
                        fields=("run", "kind", "item_id"), name="bankitem_unique_id_per_run_and_kind"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="bankitem",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("kind", "status")), fields=("run",), name="bankitem_one_status_item_per_run"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="bankitem",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("kind", "status"), _negated=True), ("item_id", "status"), _connector="OR"
                        ),
                        name="bankitem_status_item_id_is_status",
                    ),
                ),
            ],
        ),
        migrations.RunPython(content_types_to_memory, content_types_to_agents),
    ]
