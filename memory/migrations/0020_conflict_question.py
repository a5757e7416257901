"""One question per disagreement (issue 34): a possible conflict may be asked together with another."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0019_conflict_rule_update"),
    ]

    operations = [
        migrations.AddField(
            model_name="conflict",
            name="question",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="joined",
                to="memory.conflict",
            ),
        ),
    ]
