"""Erasure leaves nothing on disk (issue 39, point 5): after an erasure commits, the tables it
touched are rewritten (VACUUM FULL) and a checkpoint is requested, so the erased text is in no
relation file — heap, TOAST or index — of the database; a memory run's bank item that quoted the
fact keeps its place without the text. The files are read from PostgreSQL's data directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from memory.actors import Actor
from memory.models import AuditEvent, BankItem, Fact, MemoryRun
from memory.services import erasure
from memory.services.erasure import compaction_tables, parse_selection, select_subject
from memory.services.facts import FactInput, propose_fact
from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = "Quillfeather"
CONTENT = f"The {MARKER} vault code for the Lisbon office is 7734-ALPHA."


def relation_files(tables: list[str]) -> dict[Path, str]:
    """Every file of `tables`, their TOAST tables and all their indexes (every 1 GB segment), with
    the relation it belongs to."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        data = Path(cursor.fetchone()[0])
        cursor.execute(
            "SELECT pg_relation_filepath(c.oid), c.relname FROM pg_class c WHERE c.oid IN ("
            " SELECT oid FROM pg_class WHERE relname = ANY(%s)"
            " UNION SELECT reltoastrelid FROM pg_class WHERE relname = ANY(%s) AND reltoastrelid <> 0"
            " UNION SELECT indexrelid FROM pg_index WHERE indrelid IN ("
            "  SELECT oid FROM pg_class WHERE relname = ANY(%s)"
            "  UNION SELECT reltoastrelid FROM pg_class WHERE relname = ANY(%s) AND reltoastrelid <> 0))",
            [tables] * 4,
        )
        relations = {data / path: name for path, name in cursor.fetchall() if path}
    return {
        p: name
        for base, name in relations.items()
        for p in [base, *sorted(base.parent.glob(base.name + ".[0-9]*"))]
        if p.exists()
    }


def files_holding(text: str, tables: list[str]) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")  # what the buffers hold is written to the files
    needle = text.encode()
    return sorted(name for p, name in relation_files(tables).items() if needle in p.read_bytes())


@pytest.fixture
def readable_data_directory():
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        if not Path(cursor.fetchone()[0]).is_dir():
            pytest.skip("PostgreSQL's data directory is not on this machine (DATABASE_URL)")
    yield
    # The rewrite ANALYZEs and VACUUM counts rows, and both commit here (this test commits): the
    # statistics of this test's few rows would weigh every later test's search terms in this
    # database (voices.lexeme_frequencies). Put them back as an unanalysed table's.
    from memory.search import voices

    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM pg_statistic WHERE starelid IN (SELECT oid FROM pg_class WHERE relname LIKE 'memory\\_%%'"
            " OR relname LIKE 'agents\\_%%' OR relname LIKE 'review\\_%%')"
        )
        cursor.execute("UPDATE pg_class SET reltuples = -1 WHERE relname = 'memory_fact'")
    voices.forget_statistics()


def test_no_relation_file_holds_the_text_after_an_erasure(world, readable_data_directory):
    by = Actor.of_agent(world.coder)
    data = FactInput(topic="vault codes", content=CONTENT, memory_type="observation")
    fact = propose_fact(domain=world.architecture, data=data, by=by).fact
    propose_fact(domain=world.architecture, data=data, by=Actor.of_agent(world.coder2))  # a re-mention
    run = MemoryRun.objects.create(workspace=world.workspace, agent=world.coder, task="Lisbon office setup")
    note = BankItem.objects.create(
        run=run, kind="knowledge", item_id="k1", content=f"Noted: {CONTENT}", tags=["lisbon", CONTENT]
    )
    plan = select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [fact.pk]}))
    tables = compaction_tables(plan)
    assert {"memory_fact", "memory_factmention", "memory_auditevent", "agents_bankitem"} <= set(tables)
    assert plan.scrubbed["memory.bankitem"] == [note.pk]
    assert files_holding(MARKER, tables), "the scan sees the text before the erasure"

    erasure.erase(plan=plan, reason="a person asked", by=Actor.of_user(world.admin_user))

    assert not Fact.objects.filter(content__contains=MARKER).exists()
    assert not BankItem.objects.filter(content__contains=MARKER).exists()
    assert files_holding(MARKER, tables) == []
    note.refresh_from_db()
    assert note.content == "Noted: [erased]" and note.tags == ["lisbon", "[erased]"]
    bank = client_for(world.coder).get(f"/api/v1/runs/{run.pk}/bank/")
    assert bank.status_code == 200 and MARKER not in bank.content.decode()
    [compacted] = AuditEvent.objects.filter(verb="subject.erasure_compacted")
    assert compacted.detail["checkpoint"] == "requested" and compacted.detail["failed"] == {}
    assert compacted.detail["older_snapshots"] == 0
    assert set(compacted.detail["tables"]) == set(tables)
    assert compacted.workspace_id == world.workspace.pk


def test_plain_vacuum_would_leave_the_text_in_the_files(world, readable_data_directory):
    """Why the tables are rewritten: a deleted row's bytes survive VACUUM and a checkpoint (on a
    page that still holds a live row, so VACUUM cannot cut the page off the file)."""
    gone, kept = (
        Fact.objects.create(
            workspace=world.workspace,
            domain=world.architecture,
            topic=topic,
            content=content,
            confidence=0.7,
            memory_type="observation",
        )
        for topic, content in (("t", CONTENT), ("u", "The Lisbon office opens at nine."))
    )
    Fact.objects.filter(pk=gone.pk).delete()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM memory_fact")
    assert files_holding(MARKER, ["memory_fact"]) == ["memory_fact"]
    assert Fact.objects.filter(pk=kept.pk).exists()


def test_a_table_another_session_holds_is_reported_not_waited_on_for_long(world, monkeypatch):
    """While the rewrite's lock request waits, every later reader of the table queues behind it:
    it waits COMPACT_LOCK_TIMEOUT at most, tries again LOCK_ATTEMPTS times, then reports the table
    and goes on with the others."""
    import psycopg

    from memory.services import erasure as service

    monkeypatch.setattr(service, "COMPACT_LOCK_TIMEOUT", "200ms")
    monkeypatch.setattr(service, "LOCK_ATTEMPTS", 2)
    monkeypatch.setattr(service, "LOCK_PAUSE_SECONDS", 0.0)
    settings = connection.settings_dict
    holder = psycopg.connect(
        host=settings["HOST"], port=settings["PORT"] or 5432, user=settings["USER"], dbname=settings["NAME"]
    )
    try:
        holder.execute("LOCK TABLE agents_bankitem IN ACCESS SHARE MODE")  # a reader mid-transaction
        detail = service.compact(["agents_bankitem", "memory_job"])
    finally:
        holder.rollback()
        holder.close()
    assert set(detail["failed"]) == {"agents_bankitem"}
    assert (
        "lock timeout" in detail["failed"]["agents_bankitem"] and "(2 attempts)" in detail["failed"]["agents_bankitem"]
    )
    assert detail["tables"] == ["agents_bankitem", "memory_job"] and detail["checkpoint"] == "requested"
    [event] = AuditEvent.objects.filter(verb="subject.erasure_compacted")
    assert event.detail["failed"] == detail["failed"]
