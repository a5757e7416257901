"""Which live facts a statement could restate or contradict (issue 34).

A proposal is read against the live facts of its domain nearest to it by what its content means
(Fact.content_embedding, the topic left out), whatever their topic: agents do not pick topics
consistently, and an update or a contradiction filed under another topic is still one. At most
NEIGHBOURS of them, and only those at least RELATED_COSINE close (memory.services.conflicts.compare
calls the others separate without reading them), so what a proposal costs, and the chance of a
false question, do not grow with the size of a topic or a domain.

One query, ordered by cosine distance over the domain's live rows. Rows written before the content
vector existed are read by their topic-and-content vector; rows with no vector at all (an import
not embedded yet) are compared by their text (memory.services.conflicts.compare), the newest few.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import connection
from django.db.models.functions import Coalesce

from memory.classifier import RELATED_COSINE as RELATED_COSINE
from memory.embeddings import vector_literal
from memory.models import Fact

# How many of the nearest live facts a proposal is read against, and the cosine (content alone)
# below which a pair is separate without reading. Chosen on the tuning pairs and streams
# (`python -m bench.eval_writes --tune`; the model card records the figures).
NEIGHBOURS = 10
# Live facts of the domain with no vector at all, compared by their text: the newest ones only.
UNEMBEDDED = 50


def nearest_ids(domain_id: int, vector: Sequence[float], *, limit: int = NEIGHBOURS) -> list[int]:
    """The ids of the `limit` live facts of the domain nearest to `vector` (a content vector),
    nearest first, then the newest live facts without any vector."""
    literal = vector_literal(vector)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM memory_fact WHERE domain_id = %s AND superseded_by_id IS NULL"
            " AND status IN ('active', 'challenged') AND COALESCE(content_embedding, embedding) IS NOT NULL"
            " ORDER BY COALESCE(content_embedding, embedding) <=> %s::vector, id LIMIT %s",
            [domain_id, literal, limit],
        )
        ids = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT id FROM memory_fact WHERE domain_id = %s AND superseded_by_id IS NULL"
            " AND status IN ('active', 'challenged') AND embedding IS NULL AND content_embedding IS NULL"
            " ORDER BY id DESC LIMIT %s",
            [domain_id, UNEMBEDDED],
        )
        ids.extend(row[0] for row in cursor.fetchall())
    return ids


def nearest_ids_many(queries: Sequence[tuple[int, Sequence[float]]], *, limit: int = NEIGHBOURS) -> list[list[int]]:
    """`nearest_ids` for each (domain id, content vector), in two queries whatever their number
    (a batch's items: a lateral join of the queries against their domains' live rows)."""
    if not queries:
        return []
    domains = [domain_id for domain_id, _ in queries]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT q.n, f.id FROM unnest(%s::bigint[], %s::text[]::vector[]) WITH ORDINALITY AS q(domain_id, v, n)"
            " CROSS JOIN LATERAL (SELECT id FROM memory_fact WHERE domain_id = q.domain_id"
            " AND superseded_by_id IS NULL AND status IN ('active', 'challenged')"
            " AND COALESCE(content_embedding, embedding) IS NOT NULL"
            " ORDER BY COALESCE(content_embedding, embedding) <=> q.v, id LIMIT %s) f ORDER BY q.n",
            [domains, [vector_literal(v) for _, v in queries], limit],
        )
        out: list[list[int]] = [[] for _ in queries]
        for n, pk in cursor.fetchall():
            out[n - 1].append(pk)
        cursor.execute(
            "SELECT domain_id, id FROM (SELECT domain_id, id, row_number() OVER (PARTITION BY domain_id ORDER BY id DESC)"
            " AS r FROM memory_fact WHERE domain_id = ANY(%s) AND superseded_by_id IS NULL"
            " AND status IN ('active', 'challenged') AND embedding IS NULL AND content_embedding IS NULL) t"
            " WHERE r <= %s",
            [sorted(set(domains)), UNEMBEDDED],
        )
        unembedded: dict[int, list[int]] = {}
        for domain_id, pk in cursor.fetchall():
            unembedded.setdefault(domain_id, []).append(pk)
    for ids, domain_id in zip(out, domains, strict=True):
        ids.extend(unembedded.get(domain_id, []))
    return out


def nearest_live(domain_id: int, vector: Sequence[float], *, lock: bool = False) -> list[Fact]:
    """The live facts of `nearest_ids`, in pk order; locked (FOR UPDATE, in pk order) with `lock`.
    A row superseded between the two reads is left out: it is no longer live."""
    ids = nearest_ids(domain_id, vector)
    if not ids:
        return []
    return live_rows(ids, lock=lock)


def live_rows(ids: Iterable[int], *, lock: bool = False) -> list[Fact]:
    """The live facts of `ids` in pk order (locked FOR UPDATE with `lock`), each with only the
    vector the write path compares it by (`content_vector`): its two stored vectors are not read,
    a third of what loading a row cost (a batch reads ten neighbours an item)."""
    qs = (
        Fact.objects.filter(pk__in=ids)
        .live()
        .defer("embedding", "content_embedding")
        .annotate(compared_by=Coalesce("content_embedding", "embedding"))
        .order_by("pk")
    )
    return list(qs.select_for_update() if lock else qs)


def content_vector(fact: Fact) -> list[float] | None:
    """What the write path compares a live fact by: its content vector, else its stored one (read
    as `compared_by` by `live_rows`)."""
    if "compared_by" in fact.__dict__:
        vector = fact.__dict__["compared_by"]
    else:
        vector = fact.content_embedding if fact.content_embedding is not None else fact.embedding
    return None if vector is None else list(vector)
