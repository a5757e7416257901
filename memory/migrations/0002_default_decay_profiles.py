from django.db import migrations

# SPEC §3 defaults: (λ days, k, days before an unvalidated active fact counts as stale).
DEFAULTS = {
    "commitment": (14, 2.0, 30),
    "event": (90, 1.0, 180),
    "observation": (30, 1.0, 60),
    "decision": (365, 0.8, 365),
    "convention": (730, 0.7, 365),
    "procedure": (365, 0.8, 180),
    "profile": (3650, 0.6, 730),
}


def forwards(apps, schema_editor):
    DecayProfile = apps.get_model("memory", "DecayProfile")
    for memory_type, (scale, shape, stale) in DEFAULTS.items():
        DecayProfile.objects.update_or_create(
            memory_type=memory_type, defaults={"scale_days": scale, "shape": shape, "stale_after_days": stale}
        )


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
