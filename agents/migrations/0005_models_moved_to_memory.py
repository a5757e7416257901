"""Agent, MemoryRun, BankItem and Intervention now live in memory (memory 0010, issue 17). State
only: the tables stay, owned from here on by memory's models."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0004_agent_trust_flags"),
        ("memory", "0010_agent_identity_from_agents"),
        ("review", "0002_rememberreview_agent_in_memory"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="memoryrun", name="agent"),
                migrations.RemoveField(model_name="bankitem", name="candidate"),
                migrations.RemoveField(model_name="bankitem", name="run"),
                migrations.RemoveField(model_name="intervention", name="run"),
                migrations.RemoveField(model_name="memoryrun", name="episode"),
                migrations.RemoveField(model_name="memoryrun", name="workspace"),
                migrations.DeleteModel(name="Intervention"),
                migrations.DeleteModel(name="BankItem"),
                migrations.DeleteModel(name="MemoryRun"),
                migrations.DeleteModel(name="Agent"),
            ],
        ),
    ]
