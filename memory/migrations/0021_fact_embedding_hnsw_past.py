"""A second HNSW graph over the embedded facts the first leaves out (superseded or not active):
as-of recall reaches the past from an index instead of scanning (issue 38). Built concurrently,
so writes go on while a large table is indexed."""

import pgvector.django.indexes
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("memory", "0020_conflict_question")]

    operations = [
        AddIndexConcurrently(
            model_name="fact",
            index=pgvector.django.indexes.HnswIndex(
                condition=~models.Q(("status", "active"), ("superseded_by__isnull", True)),
                ef_construction=64,
                fields=["embedding"],
                m=16,
                name="fact_embedding_hnsw_past",
                opclasses=["vector_cosine_ops"],
            ),
        ),
    ]
