from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0003_memory_runs"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="relays_human_words",
            field=models.BooleanField(
                default=False,
                help_text="Relays people's own words (e.g. a chat front end): may propose human_stated facts. "
                "Only a workspace admin sets it; every change is audited.",
            ),
        ),
        migrations.AddField(
            model_name="agent",
            name="is_verifier",
            field=models.BooleanField(
                default=False,
                help_text="Independent verifier: its replays count for the evidence gate of candidates it did not "
                "submit. Only a workspace admin sets it; every change is audited.",
            ),
        ),
    ]
