"""Writing fact vectors. Inference happens outside any transaction; the row is then updated
only if it still has no vector (or its text is unchanged), so a rerun is harmless."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from celery import current_app
from django.db import transaction
from django.utils import timezone

from memory.embeddings import chunks, embed_meanings
from memory.models import Fact


def embed_fact(*, fact_id: int) -> bool:
    """Embed one fact now. Returns False when it no longer exists or already has a vector."""
    row = Fact.objects.filter(pk=fact_id, embedding__isnull=True).values("topic", "content").first()
    if row is None:
        return False
    [meaning] = embed_meanings([(row["topic"], row["content"])])
    updated = Fact.objects.filter(pk=fact_id, embedding__isnull=True).update(
        embedding=meaning.stored, content_embedding=meaning.content, embedded_at=timezone.now()
    )
    return bool(updated)


def embed_missing(
    *,
    limit: int | None = None,
    everything: bool = False,
    ids: Sequence[int] | None = None,
    batch_size: int = 64,
    progress: Callable[[int], object] | None = None,
) -> int:
    """Embed facts lacking a vector (or all facts with `everything`; only those of `ids` when
    given) in batches; returns the count."""
    qs = Fact.objects.all() if everything else Fact.objects.needing_embedding()
    if ids is not None:
        qs = qs.filter(pk__in=ids)
    pks = list(qs.order_by("pk").values_list("pk", flat=True)[: limit or None])
    done = 0
    for batch in chunks(pks, batch_size):
        rows = list(Fact.objects.filter(pk__in=batch).values_list("pk", "topic", "content"))
        meanings = embed_meanings([(topic, content) for _, topic, content in rows], batch_size=batch_size, bulk=True)
        now = timezone.now()
        with transaction.atomic():
            objs = [
                Fact(pk=pk, embedding=m.stored, content_embedding=m.content, embedded_at=now)
                for (pk, _, _), m in zip(rows, meanings, strict=True)
            ]
            Fact.objects.bulk_update(objs, ["embedding", "content_embedding", "embedded_at"])
        done += len(rows)
        if progress:
            progress(len(rows))
    return done


def schedule_embedding(fact_id: int) -> None:
    """Queue the embedding for after the current transaction commits."""
    # By name: memory.tasks wraps these services, so importing it from here would close a cycle.
    # MemoryConfig.ready registers it; eager mode still runs it inline.
    task = current_app.tasks["memory.tasks.embed_fact"]
    transaction.on_commit(lambda: task.delay(fact_id))
