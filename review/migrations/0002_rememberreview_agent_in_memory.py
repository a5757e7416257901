"""RememberReview.agent now points at memory.Agent (moved from the agents app, issue 17): state
only, the column and its foreign key to agents_agent are unchanged."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0010_agent_identity_from_agents"),
        ("review", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="rememberreview",
                    name="agent",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="remember_reviews",
                        to="memory.agent",
                    ),
                ),
            ],
        ),
    ]
