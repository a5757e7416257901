"""The second reading of a write (issue 14, rounds 3–5): the shipped pair model and how it revises
the rules. Real model where a test claims what the model reads; pure functions elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from django.db import connection

from memory import pair_model
from memory.actors import Actor
from memory.classifier import (
    RELATED_COSINE,
    SECOND_READING,
    Relation,
    SecondReading,
    Verdict,
    classify,
    classify_many,
    second_reading,
)

T = SecondReading(
    doubt_same=0.6,
    doubt_contradicts=0.7,
    settle_same=0.9,
    settle_contradicts=0.8,
    settle_separate=0.85,
    doubt_separate=0.95,
)


def _v(kind: Relation) -> Verdict:
    return Verdict(kind, f"{kind.value}: because")


@pytest.mark.parametrize(
    ("rules", "p", "similarity", "expected"),
    [
        # the rules' SAME is doubted when the model reads a contradiction
        (Relation.SAME, (0.3, 0.65, 0.05), 0.9, Relation.UNSURE),
        (Relation.SAME, (0.5, 0.45, 0.05), 0.9, Relation.SAME),
        # the rules' CONTRADICTS is doubted when the model reads a restatement
        (Relation.CONTRADICTS, (0.75, 0.2, 0.05), 0.9, Relation.UNSURE),
        (Relation.CONTRADICTS, (0.6, 0.35, 0.05), 0.9, Relation.CONTRADICTS),
        # an unsure pair is settled only by a confident reading, same first
        (Relation.UNSURE, (0.95, 0.04, 0.01), 0.9, Relation.SAME),
        (Relation.UNSURE, (0.05, 0.9, 0.05), 0.9, Relation.CONTRADICTS),
        (Relation.UNSURE, (0.05, 0.05, 0.9), 0.9, Relation.SEPARATE),
        (Relation.UNSURE, (0.4, 0.4, 0.2), 0.9, Relation.UNSURE),
        # the rules' SEPARATE at least RELATED_COSINE close is doubted on a confident contradiction
        # only (round 6: read down to the relatedness floor, not SEPARATE_COSINE)
        (Relation.SEPARATE, (0.01, 0.97, 0.02), RELATED_COSINE + 0.01, Relation.UNSURE),
        (Relation.SEPARATE, (0.01, 0.97, 0.02), RELATED_COSINE - 0.01, Relation.SEPARATE),
        (Relation.SEPARATE, (0.1, 0.8, 0.1), 0.9, Relation.SEPARATE),
    ],
)
def test_the_second_reading_revises_the_rules_only_past_its_thresholds(rules, p, similarity, expected):
    verdict = second_reading(_v(rules), p, similarity, T)
    assert verdict.kind == expected
    if expected != rules:  # a revised verdict says why in the words of its kind
        opening = {"same": "same meaning: "}.get(expected.value, f"{expected.value}: ")
        assert verdict.reason.startswith(opening) and "because" in verdict.reason, verdict


def test_an_announced_update_the_model_reads_as_contradicting_supersedes_past_its_threshold():
    from dataclasses import replace

    t = replace(T, supersede_announced=0.8)
    p = (0.05, 0.85, 0.1)
    for rules in (Relation.SEPARATE, Relation.UNSURE):
        assert second_reading(_v(rules), p, 0.7, t, announced=True).kind == Relation.CONTRADICTS
        # not announced, or below the threshold: the other thresholds decide as before
        assert second_reading(_v(rules), p, 0.7, t).kind == second_reading(_v(rules), p, 0.7, T).kind
        assert second_reading(_v(rules), (0.05, 0.75, 0.2), 0.7, t, announced=True).kind != Relation.CONTRADICTS
    # the rules' SAME is never turned into a supersession by it
    assert second_reading(_v(Relation.SAME), p, 0.7, t, announced=True).kind != Relation.CONTRADICTS


def test_a_threshold_above_one_never_fires():
    off = SecondReading.never()
    for kind in Relation:
        for p in ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)):
            assert second_reading(_v(kind), p, 0.99, off).kind == kind


def test_the_shipped_thresholds_merge_or_supersede_only_past_their_thresholds():
    # a SAME or CONTRADICTS the rules did not say comes only from a reading past the shipped
    # threshold for that verdict (memory/data/pair_model.json, "second_reading")
    t = SECOND_READING
    grid = [(x, y, 1.0 - x - y) for x in np.linspace(0, 1, 11) for y in np.linspace(0, 1, 11) if x + y <= 1.0]
    for kind in Relation:
        for p in grid:
            for similarity in (RELATED_COSINE - 0.01, RELATED_COSINE, 0.99):
                revised = second_reading(_v(kind), p, similarity, t).kind
                if revised == Relation.SAME and kind != Relation.SAME:
                    assert (kind == Relation.UNSURE and p[0] >= t.settle_same - 1e-9) or (
                        kind == Relation.SEPARATE and similarity >= RELATED_COSINE and p[0] >= t.merge_separate - 1e-9
                    ), (kind, p)
                if revised == Relation.CONTRADICTS and kind != Relation.CONTRADICTS:
                    assert (kind == Relation.UNSURE and p[1] >= t.settle_contradicts - 1e-9) or (
                        kind == Relation.SEPARATE
                        and similarity >= RELATED_COSINE
                        and p[1] >= t.overrule_separate - 1e-9
                    ), (kind, p)


def test_without_the_model_the_rules_decide_alone(monkeypatch, settings):
    settings.ENGRAM_PAIR_MODEL = False
    calls: list[Any] = []
    monkeypatch.setattr(pair_model, "get", lambda: calls.append(1))
    items = [("Logs are kept for 30 days.", "Logs are kept for 90 days.", 0.93), ("A.", "B.", 0.1)]
    assert classify_many(items, model=pair_model.active()) == [classify(*item) for item in items]
    assert calls == []


def test_far_apart_pairs_the_rules_call_separate_are_not_read_again(monkeypatch):
    asked: list[list[tuple[str, str]]] = []

    def probabilities(pairs):
        asked.append(list(pairs))
        return np.tile(np.array([[0.0, 1.0, 0.0]], dtype=np.float32), (len(pairs), 1))

    monkeypatch.setattr(pair_model, "probabilities", probabilities)
    monkeypatch.setattr(pair_model, "enabled", lambda: True)
    verdicts = classify_many(
        [("Redis holds the sessions.", "Format Python with Black.", 0.1)], model=pair_model.active()
    )
    assert verdicts[0].kind == Relation.SEPARATE
    assert asked == []


def test_the_model_reads_at_most_model_reads_pairs_of_a_proposal_the_nearest_first(monkeypatch):
    from memory.classifier import MODEL_READS

    asked: list[tuple[str, str]] = []

    def probabilities(pairs):
        asked.extend(pairs)
        return np.tile(np.array([[0.0, 0.0, 1.0]], dtype=np.float32), (len(pairs), 1))

    monkeypatch.setattr(pair_model, "probabilities", probabilities)
    monkeypatch.setattr(pair_model, "enabled", lambda: True)
    new = "The billing service now runs on Kubernetes."
    olds = [f"The billing service runs on platform number {i}." for i in range(MODEL_READS + 4)]
    items = [(old, new, 0.95 - 0.01 * i) for i, old in enumerate(olds)]
    verdicts = classify_many(items, nearest=10, model=pair_model.active())
    assert len(verdicts) == len(items)
    assert 0 < len(asked) <= MODEL_READS
    # the closest pairs are the ones read
    assert {old for old, _ in asked} <= set(olds[:MODEL_READS])


@pytest.mark.slow
def test_a_pair_reads_the_same_probabilities_alone_or_in_batches_of_any_length():
    pairs = [
        ("The API gateway times out after 60 s.", "Gateway requests time out after one minute."),
        ("Use tabs.", "The Go service exposes metrics on port 9090 and logs to the central bucket every night."),
        ("We deploy on Fridays.", "Deploys moved to Thursdays."),
    ] * 30  # several batches, of different token counts, run side by side
    model = pair_model.OnnxPairModel(threads=1)
    together = model.probabilities(pairs, batch_size=8)
    alone = np.concatenate([model.probabilities([pair]) for pair in pairs[:3]])
    assert np.allclose(together[:3], alone, atol=1e-5)
    assert np.allclose(together[3:6], alone, atol=1e-5)
    assert np.allclose(together.sum(axis=1), 1.0, atol=1e-4)


def test_the_shipped_weights_were_trained_on_the_development_pairs_of_this_tree():
    from bench.datasets import train_pairs
    from bench.train_pair_model import data_digest

    card = json.loads(pair_model.CARD.read_text())
    assert card["data_sha256"] == data_digest(train_pairs())
    assert card["trained_layers"] == pair_model.TRAINED_LAYERS
    assert pair_model.WEIGHTS.stat().st_size < 20_000_000  # only the fine-tuned layers ship


@pytest.mark.slow
def test_onnx_and_torch_read_the_same_probabilities():
    pairs = [
        ("The API gateway times out after 60 s.", "Gateway requests time out after one minute."),
        ("The API gateway times out after 60 s.", "The API gateway times out after 90 s."),
        ("Use tabs for indentation in the Go code.", "The Go service exposes metrics on port 9090."),
    ]
    onnx = pair_model.OnnxPairModel(threads=1).probabilities(pairs)
    torch = pair_model.TorchPairModel(threads=1).probabilities(pairs)
    assert np.allclose(onnx, torch, atol=2e-3), (onnx, torch)
    assert np.allclose(onnx.sum(axis=1), 1.0, atol=1e-4)


def test_the_second_reading_is_on_by_default_and_can_be_turned_off(settings):
    # the settings module as an install without ENGRAM_PAIR_MODEL reads it (the test session pins
    # the rules alone for its other tests: tests/conftest.py)
    env = {k: v for k, v in os.environ.items() if k != "ENGRAM_PAIR_MODEL"}
    code = "import config.settings as s; print(s.ENGRAM_PAIR_MODEL)"
    assert (
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()
        == "True"
    )
    off = subprocess.run(
        [sys.executable, "-c", code], env={**env, "ENGRAM_PAIR_MODEL": "0"}, capture_output=True, text=True, check=True
    )
    assert off.stdout.strip() == "False"
    settings.ENGRAM_PAIR_MODEL = False
    assert not pair_model.enabled()
    settings.ENGRAM_PAIR_MODEL = True
    assert pair_model.enabled()


def outside_transactions(monkeypatch) -> list[int]:
    """From now on the pair model refuses to run inside a transaction beyond the test's own, and
    records how many pairs each call read; its cache is emptied so every pair is read again."""
    baseline = len(connection.atomic_blocks)
    real = pair_model.get()

    class Guarded:
        def probabilities(self, pairs):
            assert len(connection.atomic_blocks) == baseline, "pair model inference inside a transaction"
            calls.append(len(pairs))
            return real.probabilities(pairs)

    calls: list[int] = []
    monkeypatch.setattr(pair_model, "get", lambda: Guarded())
    pair_model._cache.clear()
    return calls


def test_a_proposal_runs_the_pair_model_before_it_takes_its_locks(monkeypatch, world, settings):
    """The second reading runs while no transaction is open beyond the test's own: under the
    topic lock the write path finds the model's answers cached."""
    from memory.actors import Actor
    from memory.services.facts import FactInput, propose_fact

    settings.ENGRAM_PAIR_MODEL = True
    domain, by = world.architecture, Actor.of_agent(world.coder)
    propose_fact(
        domain=domain,
        data=FactInput(
            topic="freeze", content="Deploy freezes start 48 hours before a release.", memory_type="convention"
        ),
        by=by,
    )
    calls = outside_transactions(monkeypatch)
    result = propose_fact(
        domain=domain,
        data=FactInput(
            topic="freeze", content="Deploy freezes start 36 hours before each release.", memory_type="convention"
        ),
        by=by,
    )
    assert calls, "the second reading was not asked"
    assert result.outcome in ("possible_conflict", "conflict_won", "conflict_lost", "created", "re_mentioned")


@pytest.mark.slow
def test_training_on_cached_frozen_states_computes_what_the_full_model_computes():
    import torch

    from bench import train_pair_model

    tokenizer, encoder, head = pair_model.build(1, attention="eager")
    encoder.eval()
    head.eval()
    pairs = [
        ("Backups run nightly at 02:00 UTC.", "Nightly backups start at 2 am UTC."),
        ("A.", "A much longer text here."),
    ]
    train_pair_model._frozen_states(tokenizer, encoder, pairs)
    with torch.inference_mode():
        cached = train_pair_model._top_logits(encoder, head, pairs)
        full = pair_model.logits(tokenizer, encoder, head, pairs)
    assert torch.allclose(cached, full, atol=1e-4), (cached, full)


def test_with_the_model_off_nothing_is_read_before_the_locks(db, settings, django_assert_num_queries):
    from memory.services.facts import read_before_locking

    settings.ENGRAM_PAIR_MODEL = False
    with django_assert_num_queries(0):
        read_before_locking([((1, "topic"), "Some text.", [0.0] * 384)])


@pytest.mark.parametrize("job", ["harmonize", "merge"])
def test_harmonize_and_merge_run_the_pair_model_before_they_take_their_locks(monkeypatch, world, settings, job):
    """Consolidation reads a topic's pairs with the model before it locks the topic: under the
    lock the answers come from the cache."""
    from memory.embeddings import embed_texts, fact_text
    from memory.models import Fact
    from memory.services.hot import harmonize, merge_near_duplicates

    settings.ENGRAM_PAIR_MODEL = True
    texts = ("Deploy freezes start 48 hours before a release.", "Deploy freezes start 36 hours before each release.")
    common = dict(workspace=world.workspace, domain=world.architecture, topic="freeze", memory_type="convention")
    for text, agent, vector in zip(
        texts, (world.coder, world.planner), embed_texts([fact_text("freeze", t) for t in texts]), strict=True
    ):
        Fact.objects.create(content=text, confidence=0.7, created_by_agent=agent, embedding=vector, **common)
    calls = outside_transactions(monkeypatch)
    if job == "harmonize":
        harmonize(agent=world.coder, domain=world.architecture)
    else:
        merge_near_duplicates(domain_id=world.architecture.pk, topic="freeze", by=Actor.of_agent(world.coder))
    assert calls == [1], "the pair was not read once, before the lock"


def test_an_import_runs_the_pair_model_before_it_takes_its_locks(monkeypatch, world, settings):
    from memory.services.batch import IngestItem, ingest_facts
    from memory.services.facts import FactInput, propose_fact

    settings.ENGRAM_PAIR_MODEL = True
    by = Actor.of_agent(world.coder)
    data = dict(topic="freeze", memory_type="convention")
    propose_fact(
        domain=world.architecture,
        data=FactInput(content="Deploy freezes start 48 hours before a release.", **data),
        by=by,
    )
    calls = outside_transactions(monkeypatch)
    items = [
        IngestItem(
            domain=world.architecture,
            data=FactInput(content="Deploy freezes start 36 hours before each release.", **data),
        )
    ]
    counts = ingest_facts(items=items, by=by)
    assert calls and sum(counts.values()) == 1


def test_an_import_reads_a_pair_its_plan_missed_outside_the_transaction_and_writes(monkeypatch, world, settings):
    """A pair the plan did not read (here: the plan reads nothing, as when an earlier item of the
    batch changed an item's neighbours) is read outside the transaction and the batch written
    again; it used to fail the import with NeedsInference (found by `make bench`'s ingest)."""
    from memory.services import facts
    from memory.services.batch import IngestItem, ingest_facts
    from memory.services.facts import FactInput, propose_fact

    settings.ENGRAM_PAIR_MODEL = True
    by = Actor.of_agent(world.coder)
    data = dict(topic="freeze", memory_type="convention")
    propose_fact(
        domain=world.architecture,
        data=FactInput(content="Deploy freezes start 48 hours before a release.", **data),
        by=by,
    )
    calls = outside_transactions(monkeypatch)
    monkeypatch.setattr(facts, "read_before_locking", lambda items: None)
    items = [
        IngestItem(
            domain=world.architecture,
            data=FactInput(content="Deploy freezes start 36 hours before each release.", **data),
        )
    ]
    counts = ingest_facts(items=items, by=by)
    assert calls, "the missed pair was never read"
    assert sum(counts.values()) == 1
