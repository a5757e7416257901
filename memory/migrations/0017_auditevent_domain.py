"""An audit event knows its domain (issue 32): people see the events of the domains they may see.

The backfill gives existing events the domain of their target where the target still exists and
has one (one UPDATE per target type); events about anything else stay workspace-level."""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery

# target_type → (model, lookup from it to its domain id): memory.access's SCOPES as of this
# migration (frozen here, as a migration must be). Grants, hot memories and the like are
# workspace-level rows there, so their events stay workspace-level.
TARGETS = {
    "fact": ("Fact", "domain_id"),
    "policy": ("Policy", "domain_id"),
    "candidate": ("Candidate", "domain_id"),
    "conflict": ("Conflict", "domain_id"),
    "memorydomain": ("MemoryDomain", "pk"),
    "factmention": ("FactMention", "fact__domain_id"),
    "replay": ("Replay", "candidate__domain_id"),
    "promotiondecision": ("PromotionDecision", "candidate__domain_id"),
}


def backfill(apps, schema_editor):
    AuditEvent = apps.get_model("memory", "AuditEvent")
    for target_type, (model_name, lookup) in TARGETS.items():
        model = apps.get_model("memory", model_name)
        domain = model.objects.filter(pk=OuterRef("target_id")).values(lookup)[:1]
        AuditEvent.objects.filter(target_type=target_type, target_id__isnull=False, domain__isnull=True).update(
            domain_id=Subquery(domain)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0016_fact_all_newest_first"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="domain",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=models.deletion.RESTRICT,
                related_name="audit_events",
                to="memory.memorydomain",
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
