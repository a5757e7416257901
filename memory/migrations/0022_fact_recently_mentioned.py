"""The knowledge graph's order (a workspace's most recently mentioned facts) read from an index,
not by sorting every fact of the workspace (issue 38)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0021_fact_embedding_hnsw_past")]

    operations = [
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(fields=["workspace", "-last_mentioned_at"], name="fact_recently_mentioned"),
        ),
    ]
