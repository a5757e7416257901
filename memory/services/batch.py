"""Many facts at once (SPEC §3): a batch of proposals (`POST facts/batch/`, propose_facts) and the
importers' path (ingest_facts), with propose_fact's checks, rules, outcomes and audit.

Each batch is one transaction that locks every domain it writes in one statement, compares each
item with the live facts of its domain nearest to it and with the batch's earlier items, inserts
the items that match nothing together, and sends the others down propose_fact's own path, row by
row, in a savepoint. Vectors and the pair model's readings are computed before the transaction
(memory.services.locking.write_planned).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from memory.actors import Actor, require_actor
from memory.audit import record_events
from memory.classifier import Relation
from memory.embeddings import Meaning, embed_meanings
from memory.errors import EngramError, StateConflict
from memory.metrics import count_fact_write
from memory.models import Fact, MemoryDomain
from memory.services.conflicts import compare, domain_lock_key
from memory.services.facts import (
    FactInput,
    Outcome,
    ProposalResult,
    _check_episode,
    _check_sources,
    _new_fact,
    _propose_locked,
    check_veracity_authority,
    embed_live_without_vectors_of,
    read_before_locking,
    validate_fact_input,
)
from memory.services.locking import write_planned
from memory.services.nearby import live_rows, nearest_ids_many
from memory.services.tenancy import hidden_domains

# After a batch item decides a conflict on the row-by-row path, how many of the next items'
# neighbours are read again in one query (_ingest_batch).
NEARBY_WINDOW = 8
# A batch's plan reads each item's pairs with this many more of its nearest live facts than the
# write compares: an earlier item of the batch that decides a conflict takes a fact out of the live
# set and the next nearest moves in, a pair the plan had not read (issue 38: the bench's batches
# stopped for it more often than write_planned allowed and failed with 409 domain_busy).
PLAN_BEYOND = 3


@dataclass
class IngestItem:
    domain: MemoryDomain
    data: FactInput


def propose_facts(*, items: Sequence[IngestItem], by: Actor) -> list[ProposalResult | EngramError]:
    """propose_fact for each item, in order, with the same checks, rules, outcomes and audit as if
    they had been proposed one after another (an item restating an earlier one re-mentions it).
    Every item is checked first; the vectors of those that pass are computed in one bulk call
    before any transaction; they are then written in one transaction, each item that is compared
    row by row in its own savepoint, so a refused item writes nothing and leaves the others
    written. Answers, per item, its ProposalResult or the EngramError that refused it."""
    require_actor(by)
    answers: dict[int, ProposalResult | EngramError] = {}
    hidden = hidden_domains(by.agent, (item.domain for item in items)) if by.agent is not None else {}
    accepted: list[int] = []
    for index, item in enumerate(items):
        try:
            if (hidden_domain := hidden.get(item.domain.pk)) is not None:
                raise hidden_domain
            check_veracity_authority(by, item.data.veracity, vouched_by_person=item.data.vouched_by_person)
            validate_fact_input(item.data)
            _check_sources(item.domain.workspace_id, item.data.source_observation_ids, by)
            _check_episode(item.domain.workspace_id, item.data.episode_id, by)
        except EngramError as refused:
            answers[index] = refused
            continue
        accepted.append(index)
    if accepted:
        batch = [items[i] for i in accepted]
        vectors = _embed_items(batch)

        def plan(_hint: None) -> None:
            embed_live_without_vectors_of((i.domain.pk, i.data.topic) for i in batch)
            read_before_locking(_planned(batch, vectors), beyond=PLAN_BEYOND)

        written = write_planned(
            plan,
            lambda _: _ingest_batch(batch, vectors, by, refusals=True),
            domains=lambda _: (),  # _ingest_batch locks every domain of the batch in one statement
            changed=StateConflict(
                "The domains kept changing while the batch was written; try again.", code="domain_busy"
            ),
            readings=2 * len(batch) + 1,  # a stop reads what one comparison missed; an item compares twice at most
        )
        for index, answer in zip(accepted, written, strict=True):
            answers[index] = answer
    return [answers[index] for index in range(len(items))]


def _embed_items(items: Sequence[IngestItem]) -> list[Meaning]:
    """The vectors of items' texts, by the bulk encoder, in model batches of at most 32 cut so
    that each of its threads gets one (a batch of 20 is two model batches of 10 on 2 cores, not
    one on one core while the other waits; the vectors do not depend on the model batch)."""
    threads = max(1, settings.ENGRAM_BULK_EMBED_THREADS)
    size = min(32, max(1, -(-len(items) // threads)))
    return embed_meanings([(i.data.topic, i.data.content) for i in items], batch_size=size, bulk=True)


def _planned(items: Sequence[IngestItem], vectors: list[Meaning]) -> list[tuple[tuple[int, str], str, Meaning]]:
    """Items as read_before_locking takes them: ((domain, topic), text, vectors)."""
    return [((i.domain.pk, i.data.topic), i.data.content, v) for i, v in zip(items, vectors, strict=True)]


def ingest_facts(
    *, items: Sequence[IngestItem], by: Actor, batch_size: int = 64, progress: Any = None
) -> dict[str, int]:
    """The batch path for importers: the same rules as propose_fact (re-mention, conflicts,
    locks, audit) with the same outcomes, in one transaction per batch. Embeddings are computed
    on a second thread (the bulk encoder) while the previous batch is written, so inference and
    database work overlap. Returns outcome counts."""
    import threading
    from queue import Queue

    require_actor(by)
    if by.agent is not None:
        hidden = hidden_domains(by.agent, (item.domain for item in items))
        for item in items:  # the first hidden domain in the items' order, as one check per domain raised it
            if (hidden_domain := hidden.get(item.domain.pk)) is not None:
                raise hidden_domain
    episodes: set[tuple[int, int]] = set()
    for item in items:  # every item is checked before anything is written
        check_veracity_authority(by, item.data.veracity, vouched_by_person=item.data.vouched_by_person)
        validate_fact_input(item.data)
        if item.data.episode_id is not None:
            episodes.add((item.domain.workspace_id, item.data.episode_id))
    for workspace_id, episode_id in sorted(episodes):
        _check_episode(workspace_id, episode_id, by)
    batches = [items[i : i + batch_size] for i in range(0, len(items), batch_size)]
    ready: Queue[tuple[Sequence[IngestItem], list[Meaning]] | BaseException | None] = Queue(maxsize=8)

    def embedder() -> None:
        # Several batches embedded together sort into similar lengths and pad less; small model
        # batches (32) beat large ones on CPU (measured: 64 → 124/s, 32 over 256 texts → 152/s).
        try:
            for first in range(0, len(batches), 4):
                group = batches[first : first + 4]
                items = [(i.data.topic, i.data.content) for batch in group for i in batch]
                vectors = embed_meanings(items, batch_size=32, bulk=True)
                for batch in group:
                    ready.put((batch, vectors[: len(batch)]))
                    vectors = vectors[len(batch) :]
            ready.put(None)
        except BaseException as error:  # surfaced on the writing thread
            ready.put(error)

    thread = threading.Thread(target=embedder, name="engram-ingest-embedder", daemon=True)
    thread.start()
    counts: dict[str, int] = {}
    while (next_batch := ready.get()) is not None:
        if isinstance(next_batch, BaseException):
            raise next_batch
        batch, vectors = next_batch

        def plan(_hint: None, batch: Sequence[IngestItem] = batch, vectors: list[Meaning] = vectors) -> None:
            read_before_locking(
                [((i.domain.pk, i.data.topic), i.data.content, v) for i, v in zip(batch, vectors, strict=True)],
                beyond=PLAN_BEYOND,
            )

        def write(
            _plan: None, batch: Sequence[IngestItem] = batch, vectors: list[Meaning] = vectors
        ) -> list[ProposalResult | EngramError]:
            return _ingest_batch(batch, vectors, by)

        # Through write_planned like every write: a pair the plan did not read (a neighbour an
        # earlier item of the batch changed) is read outside the transaction, then written again.
        written = write_planned(
            plan,
            write,
            domains=lambda _: (),  # _ingest_batch locks every domain of the batch in one statement
            changed=StateConflict("The domains kept changing while the import was written.", code="domain_busy"),
            readings=2 * len(batch) + 1,
        )
        for result in written:
            assert isinstance(result, ProposalResult)  # without `refusals`, a refusal raises
            counts[result.outcome] = counts.get(result.outcome, 0) + 1
        if progress is not None:
            progress(len(batch))
    thread.join()
    # New rows wait in the GIN index's pending list, which every full-text search scans
    # linearly until a vacuum merges it: after an import, merge it now (measured at 10k facts:
    # keyword p50 22 ms straight after the import, 17 ms once merged).
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('fact_search_gin'::regclass)")
    return counts


@transaction.atomic
def _ingest_batch(
    batch: Sequence[IngestItem], vectors: list[Meaning], by: Actor, *, refusals: bool = False
) -> list[ProposalResult | EngramError]:
    """One batch in one transaction: every domain of the batch locked in a stable order (one
    query), then each item compared in order against the live facts of its domain nearest to it
    (memory.services.nearby, locked) and against the batch's own earlier new facts of that domain.
    New facts without a match — the common case of an import: separate from every live fact — are
    inserted together with their audit events (two queries); an item that restates, contradicts or
    may contradict something takes propose_fact's own path, row by row, in a savepoint. With
    `refusals`, an EngramError of such an item is its answer (its savepoint undone) instead of
    undoing the batch."""
    domains = sorted({item.domain.pk for item in batch})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest(%s::text[]) WITH ORDINALITY AS t(k, n) "
            "ORDER BY n",
            [[domain_lock_key(domain_id) for domain_id in domains]],
        )
    pending: list[Fact] = []

    def flush() -> list[Fact]:
        """Insert the pending new facts with their audit events; answers them."""
        if not pending:
            return []
        Fact.objects.bulk_create(pending)
        count_fact_write(Outcome.CREATED, len(pending))
        record_events(
            actor=by,
            verb="fact.created",
            target_type="fact",
            events=[
                (fact.workspace_id, fact.pk, {"domain": fact.domain.label, "topic": fact.topic}) for fact in pending
            ],
        )
        written = list(pending)
        pending.clear()
        return written

    answers: list[ProposalResult | EngramError] = []
    now = timezone.now()
    # Every item's nearest live facts, read and locked in three queries before any is written. An
    # item that takes the row-by-row path and only adds a live fact adds it to them
    # (_join_nearby); after one that decides a conflict (a fact no longer live), the next
    # items' are read again, NEARBY_WINDOW at a time: a batch of plain items costs the same queries
    # whatever its size, and one of items that all restate something no more than one read per item.
    nearby: dict[int, list[Fact]] = {}

    def read_nearby(first: int, count: int | None = None) -> None:
        rest = list(range(first, len(batch) if count is None else min(len(batch), first + count)))
        ids = nearest_ids_many([(batch[i].domain.pk, vectors[i].content) for i in rest])
        rows = {f.pk: f for f in live_rows({pk for x in ids for pk in x}, lock=True)}
        nearby.update({i: [rows[pk] for pk in x if pk in rows] for i, x in zip(rest, ids, strict=True)})

    read_nearby(0)
    for index, (item, vector) in enumerate(zip(batch, vectors, strict=True)):
        plain = not item.data.source_observation_ids and item.data.episode_id is None
        if plain and index not in nearby:
            read_nearby(index, NEARBY_WINDOW)
        if plain:
            unwritten = [fact for fact in pending if fact.domain_id == item.domain.pk]
            candidates = [*nearby[index], *unwritten]
            if all(m.kind == Relation.SEPARATE for m in compare(item.data.content, vector.content, candidates)):
                fact = _new_fact(item.domain, item.data, by, vector, now)
                pending.append(fact)
                answers.append(ProposalResult(fact, Outcome.CREATED))
                continue
        # What it is compared with must exist in the database; the neighbours read already of the
        # later items gain what is written now (_join_nearby).
        _join_nearby(flush(), nearby, batch, index)
        try:  # _propose_locked is atomic: nested here, a savepoint
            result = _propose_locked(domain=item.domain, data=item.data, by=by, vector=vector)
        except EngramError as refused:  # its savepoint undone: nothing changed
            if not refusals:
                raise
            answers.append(refused)
            continue
        answers.append(result)
        if result.outcome not in _ONLY_ADDS:
            nearby.clear()  # a fact no longer live: the next plain items read their neighbours again
        elif result.outcome != Outcome.RE_MENTIONED:
            _join_nearby([result.fact], nearby, batch, index)
    flush()
    return answers


# Outcomes of the row-by-row path that leave every live fact live: at most one new live fact.
_ONLY_ADDS = {Outcome.CREATED, Outcome.POSSIBLE_CONFLICT, Outcome.RE_MENTIONED}


def _join_nearby(written: list[Fact], nearby: dict[int, list[Fact]], batch: Sequence[IngestItem], index: int) -> None:
    """Keep _ingest_batch's neighbours read ahead true when item `index` writes (the batch's
    pending new facts, or its own on the row-by-row path) while nothing stops being live: each new
    fact joins the neighbours read already of the later items of its domain, as the batch's
    unwritten new facts do — the nearest live facts now are among the nearest before and them."""
    for fact in written:
        for later, facts in nearby.items():
            if later > index and batch[later].domain.pk == fact.domain_id:
                facts.append(fact)
