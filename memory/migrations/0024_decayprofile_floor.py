# Issue 39: a floor per memory type (none by default: decay applies fully) replaces the global
# ENGRAM_DECAY_FLOOR. The rows migration 0002 made get the floors memory.decay.DEFAULT_FLOORS keeps,
# each written down there with its reason.

from django.db import migrations, models

# memory.decay.DEFAULT_FLOORS as of this migration (its comment gives the reasons).
FLOORS = {"event": 0.8, "observation": 0.8, "decision": 0.8, "convention": 0.8, "procedure": 0.8, "profile": 0.8}


def default_floors(apps, schema_editor):
    DecayProfile = apps.get_model("memory", "DecayProfile")
    for memory_type, floor in FLOORS.items():
        DecayProfile.objects.filter(memory_type=memory_type).update(floor=floor)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0023_memoryrun_end_reason_last_activity"),
    ]

    operations = [
        migrations.AddField(
            model_name="decayprofile",
            name="floor",
            field=models.FloatField(
                default=0.0,
                help_text="Search scales a fact's score by floor + (1 − floor) × weight: 0 (the default) applies decay "
                "fully; a floor keeps old facts of this type from fading below it — write down why you set one.",
            ),
        ),
        migrations.AddConstraint(
            model_name="decayprofile",
            constraint=models.CheckConstraint(
                condition=models.Q(("floor__gte", 0), ("floor__lt", 1)),
                name="decay_floor_in_range",
                violation_error_message="The floor is at least 0 and below 1 (1 would switch decay off).",
            ),
        ),
        migrations.RunPython(default_floors, migrations.RunPython.noop),
    ]
