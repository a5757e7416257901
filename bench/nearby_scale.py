"""What finding a proposal's neighbours costs as its domain grows (issue 34): the write path reads
each proposal against the live facts of its domain nearest to it by content meaning
(memory.services.nearby), an exact scan of the domain's live rows (pgvector 0.6.2 has no filtered
iterative HNSW scan). This times that query alone at 1,000, 10,000 and 100,000 live facts in one
domain, against the floor of the same query on an empty domain.

In its own database (ENGRAM_DB_NAME=engram_bench_nearby, recreated). The rows are inserted by SQL
with random unit vectors (no embedding: this measures the scan, not the model), all live.

    .venv/bin/python -m bench.nearby_scale [--sizes 1000 10000 100000] [--queries 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_bench_nearby")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def _fill(domain, workspace, total: int) -> None:
    """Grow the domain to `total` live facts with random unit vectors (content and stored): copies
    of one fact made by the ORM (every other column as a write leaves it), each with its own text."""
    from django.db import connection

    from memory.models import Fact

    template = Fact.objects.filter(domain=domain).order_by("pk").first() or Fact.objects.create(
        workspace=workspace, domain=domain, topic="scale", content="statement 0", memory_type="observation",
        confidence=0.7,
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_fact WHERE domain_id = %s", [domain.pk])
        have = cursor.fetchone()[0]
        if have >= total:
            return
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'memory_fact'"
            " AND column_name NOT IN ('id', 'content', 'embedding', 'content_embedding') AND is_generated = 'NEVER'"
            " ORDER BY ordinal_position"
        )
        columns = ", ".join(f'"{name}"' for (name,) in cursor.fetchall())
        # normalise(random 384-vector) in SQL: the scan's cost does not depend on what the vectors mean
        cursor.execute(
            f"""
            WITH v AS (
                SELECT g, (SELECT array_agg(random() - 0.5) FROM generate_series(1, 384) WHERE g > 0) AS a
                FROM generate_series(%s, %s) AS g
            ), n AS (
                SELECT g, (SELECT array_agg(x / sqrt((SELECT sum(y * y) FROM unnest(a) AS y))) FROM unnest(a) AS x)
                    AS unit
                FROM v
            )
            INSERT INTO memory_fact ({columns}, content, embedding, content_embedding)
            SELECT {columns}, 'statement ' || n.g, n.unit::vector, n.unit::vector
            FROM n, memory_fact WHERE memory_fact.id = %s
            """,  # noqa: S608 -- the column names are the table's own, read above
            [have, total - 1, template.pk],
        )
        cursor.execute("ANALYZE memory_fact")


def _p50_ms(call, queries: list[list[float]]) -> float:
    seconds = []
    for vector in queries:
        began = time.perf_counter()
        call(vector)
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args(argv)

    import django

    django.setup()
    from bench.common import recreate_database
    from memory.actors import Actor
    from memory.services.nearby import nearest_ids, nearest_ids_many
    from memory.services.tenancy import create_domain, get_or_create_workspace

    recreate_database()
    by = Actor.system("bench")
    workspace = get_or_create_workspace(slug="scale", name="Scale", by=by)
    empty = create_domain(workspace=workspace, name="empty", by=by)
    domain = create_domain(workspace=workspace, name="busy", by=by)
    rng = np.random.default_rng(7)
    queries = [list(v / np.linalg.norm(v)) for v in rng.normal(size=(args.queries, 384))]
    floor = _p50_ms(lambda v: nearest_ids(empty.pk, v), queries)
    print(f"the floor, an empty domain: p50 {floor:.2f} ms a query", flush=True)
    for size in sorted(args.sizes):
        began = time.monotonic()
        _fill(domain, workspace, size)
        filled = time.monotonic() - began
        one = _p50_ms(lambda v: nearest_ids(domain.pk, v), queries)
        batch = [(domain.pk, v) for v in queries[:8]]
        many = _p50_ms(lambda _v, batch=batch: nearest_ids_many(batch), queries[:10]) / len(batch)
        print(
            f"{size:>7,} live facts in the domain (filled in {filled:.0f} s): nearest_ids p50 {one:.2f} ms "
            f"({one / max(floor, 1e-9):.1f}× the floor); in a batch's query, {many:.2f} ms a statement",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
