"""Conflict rule `update` (issue 34): the later statement of the same thing replaces the earlier."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0018_fact_content_embedding"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="conflict",
            name="conflict_rule_valid",
        ),
        migrations.RemoveConstraint(
            model_name="conflict",
            name="conflict_status_resolution_rule",
        ),
        migrations.AlterField(
            model_name="conflict",
            name="rule",
            field=models.CharField(
                blank=True,
                choices=[
                    ("veracity", "higher veracity"),
                    ("confidence", "higher confidence"),
                    ("recency", "newer"),
                    ("update", "the later statement (an update)"),
                    ("human", "a person decided"),
                ],
                max_length=12,
            ),
        ),
        migrations.AddConstraint(
            model_name="conflict",
            constraint=models.CheckConstraint(
                condition=models.Q(("rule__in", ["veracity", "confidence", "recency", "update", "human", ""])),
                name="conflict_rule_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="conflict",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("resolution", ""), ("rule", ""), ("status", "open")),
                    models.Q(
                        ("resolution", "machine"),
                        ("rule__in", ["veracity", "confidence", "recency", "update"]),
                        ("status", "decided"),
                    ),
                    models.Q(("resolution__in", ["same", "contradicts"]), ("rule", "human"), ("status", "decided")),
                    models.Q(("resolution", "both_true"), ("rule", "human"), ("status", "dismissed")),
                    _connector="OR",
                ),
                name="conflict_status_resolution_rule",
            ),
        ),
    ]
