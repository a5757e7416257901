"""The indexes the recall paths rely on are the ones PostgreSQL uses, at a realistic table size."""

import random
import re

import numpy as np
import pytest
from django.db import connection

from memory import selectors
from memory.models import Fact
from memory.search import voices
from tests.factories import DomainFactory

pytestmark = pytest.mark.slow

WORDS = [
    "deploy",
    "pipeline",
    "invoice",
    "ledger",
    "queue",
    "worker",
    "redis",
    "postgres",
    "timeout",
    "retry",
    "cache",
    "billing",
    "checkout",
    "payments",
    "staging",
    "production",
    "incident",
    "rollback",
    "migration",
    "schema",
    "index",
    "vector",
    "search",
    "token",
    "auth",
    "session",
    "cookie",
    "header",
    "proxy",
    "gateway",
    "service",
    "cluster",
    "node",
    "region",
    "backup",
    "restore",
    "audit",
    "policy",
]


ROWS, WITH_VECTORS = 30_000, 8_000
# A list read in order from one of the newest-first indexes: the workspace's, or (the table here
# holds one workspace, so either serves) the one across workspaces.
NEWEST_FIRST = re.compile(r"Index Scan using fact_(all_)?newest_first on memory_fact")


@pytest.fixture
def big_table(world):
    """30,000 live facts with realistic words (8,000 with unit vectors), then ANALYZE, as
    autovacuum would. The HNSW index is rebuilt after the bulk insert, as a backfill would."""
    rng = random.Random(7)
    vectors = np.random.default_rng(7).normal(size=(WITH_VECTORS, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    domains = [world.architecture, world.conventions, DomainFactory(workspace=world.workspace, name="ops")]
    hnsw = next(index for index in Fact._meta.indexes if index.name == "fact_embedding_hnsw")
    with connection.schema_editor(atomic=False) as editor:
        editor.remove_index(Fact, hnsw)
    Fact.objects.bulk_create(
        [
            Fact(
                workspace=world.workspace,
                domain=domains[i % 3],
                topic=f"topic-{i % 400}",
                content=" ".join(rng.choices(WORDS, k=12)) + f" ERR_CODE_{i}.",
                memory_type="decision",
                veracity="agent_inferred",
                confidence=0.7,
                embedding=vectors[i].tolist() if i < WITH_VECTORS else None,
            )
            for i in range(ROWS)
        ],
        batch_size=2000,
    )
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending FK checks may block CREATE INDEX
    with connection.schema_editor(atomic=False) as editor:
        editor.add_index(Fact, hnsw)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_fact")
    voices._stats = None  # the lexeme statistics are re-read after ANALYZE, as after autovacuum
    return vectors


def test_recall_paths_use_their_indexes_at_30k_facts(world, big_table):
    # One table for the three checks: building it is the slow part.
    scope = voices.Scope(agent=world.coder)
    lexical = voices.lexical_sql(scope, "why does the ERR_CODE_4242 rollback fail", limit=20)
    assert lexical is not None
    keyword_plan = voices.explain(*lexical)
    assert "fact_search_gin" in keyword_plan, keyword_plan

    semantic_plan = voices.explain(*voices.semantic_sql(scope, big_table[42].tolist(), limit=50))
    assert "fact_embedding_hnsw" in semantic_plan, semantic_plan

    # An agent's list of facts (GET facts/) reads the newest first from an index instead of
    # sorting every visible fact, and leaves the vectors it never shows in TOAST.
    page = selectors.facts_for_agent(world.coder, {})[:20]
    list_plan = page.explain()
    assert NEWEST_FIRST.search(list_plan) and "Sort" not in list_plan, list_plan
    assert "embedding" not in str(page.query)
    # So does a person's memory browser, whose domains are a short list PostgreSQL rarely has
    # statistics for (as a subquery it was guessed at one domain, and every fact was sorted).
    from review.selectors_pages import browse_facts

    browsed, _ = browse_facts(world.admin_user, world.workspace, {})
    browser_plan = browsed[:50].explain()
    assert NEWEST_FIRST.search(browser_plan) and "Sort" not in browser_plan, browser_plan
    # And the admin's fact list for a superuser, newest first across workspaces.
    from django.contrib import admin
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/memory/fact/")
    request.user = get_user_model().objects.create_superuser("root-indexes", "root@example.com", "pw")
    changelist = admin.site.get_model_admin(Fact).get_changelist_instance(request)
    admin_plan = changelist.queryset[:100].explain()
    assert "fact_all_newest_first" in admin_plan and "Sort" not in admin_plan, admin_plan

    # With ef_search raised (voices.semantic), the exact neighbour comes back first.
    target = Fact.objects.filter(embedding__isnull=False).order_by("pk")[42]
    found = voices.semantic(scope, big_table[42].tolist(), limit=10)
    assert found[0][0] == target.pk
    assert found[0][1] == pytest.approx(1.0, abs=1e-4)


@pytest.mark.django_db
def test_every_new_connection_searches_hnsw_with_ef_search_200():
    """pgvector's default (40) loses recall; the database default (migration 0006) is what the
    semantic voice relies on, for prepared statements too."""
    import psycopg

    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"] or None,
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
    ) as fresh:
        assert fresh.execute("SHOW hnsw.ef_search").fetchone() == ("200",)
    assert voices.EF_SEARCH == 200


@pytest.mark.django_db
def test_a_conflict_list_reads_newest_first_from_its_index_and_never_the_vectors(world):
    """GET conflicts/ and a fact's conflicts show their facts' text, not their vectors (mostly in
    TOAST: a page of 50 conflicts read and parsed 200 of them), and a page is read in order from
    conflict_newest_first rather than joined and sorted whole (checked with sequential scans off:
    a test table is too small for the planner to prefer it on its own)."""
    listed = selectors.conflicts_for_agent(world.coder, {})
    for query in (listed, selectors.conflicts_of([1, 2])):
        sql = str(query.query)
        assert '"content"' in sql  # the facts are joined for their text
        assert "embedding" not in sql and "search_vector" not in sql, sql
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = listed[:50].explain()
    assert "conflict_newest_first" in plan and "Sort" not in plan, plan
