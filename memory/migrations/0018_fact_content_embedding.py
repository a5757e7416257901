"""What a fact's content alone means (issue 34): the write path compares a proposal with the live
facts of its domain nearest to it by this vector, whatever their topic.

The backfill embeds the live facts (the ones a proposal compares with) in batches; the rest stay
null until `manage.py reindex_embeddings` (the write path falls back to `embedding` for them)."""

import pgvector.django
from django.db import migrations


def backfill(apps, schema_editor):
    Fact = apps.get_model("memory", "Fact")
    live = Fact.objects.filter(
        superseded_by__isnull=True, status__in=["active", "challenged"], content_embedding__isnull=True
    )
    pks = list(live.order_by("pk").values_list("pk", flat=True))
    if not pks:
        return
    from memory.embeddings import embed_texts

    for first in range(0, len(pks), 256):
        rows = list(Fact.objects.filter(pk__in=pks[first : first + 256]).values_list("pk", "content"))
        vectors = embed_texts([content for _, content in rows], batch_size=32, bulk=True)
        Fact.objects.bulk_update(
            [Fact(pk=pk, content_embedding=v) for (pk, _), v in zip(rows, vectors, strict=True)], ["content_embedding"]
        )


class Migration(migrations.Migration):
    dependencies = [("memory", "0017_auditevent_domain")]

    operations = [
        migrations.AddField(
            model_name="fact",
            name="content_embedding",
            field=pgvector.django.VectorField(blank=True, dimensions=384, null=True),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
