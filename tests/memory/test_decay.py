"""Weibull decay at the curve's known points (SPEC §3)."""

import itertools
import math
from datetime import timedelta

import pytest
from django.utils import timezone

from memory import decay
from memory.models import DecayProfile


@pytest.mark.parametrize("memory_type,scale,shape", [(k, *v) for k, v in decay.DEFAULT_PARAMETERS.items()])
def test_weight_is_one_now_and_one_over_e_at_the_scale(db, memory_type, scale, shape):
    decay.clear_cache()
    now = timezone.now()
    assert decay.weight_at(memory_type, now, now) == 1.0
    assert decay.weight_at(memory_type, now - timedelta(days=scale), now) == pytest.approx(math.exp(-1), rel=1e-6)
    twice = decay.weight_at(memory_type, now - timedelta(days=2 * scale), now)
    assert twice == pytest.approx(math.exp(-(2**shape)), rel=1e-6)


def test_commitments_fade_faster_than_profiles(db):
    decay.clear_cache()
    now = timezone.now()
    month_ago = now - timedelta(days=30)
    assert decay.weight_at("commitment", month_ago, now) < 0.02
    assert decay.weight_at("profile", month_ago, now) > 0.9


def test_admins_tune_a_curve_and_it_applies(db):
    DecayProfile.objects.update_or_create(memory_type="event", defaults={"scale_days": 10, "shape": 1.0})
    decay.clear_cache()
    now = timezone.now()
    assert decay.weight_at("event", now - timedelta(days=10), now) == pytest.approx(math.exp(-1))


def test_curve_points_start_at_one_and_fall(db):
    decay.clear_cache()
    points = decay.curve_points("observation", days=90, steps=9)
    assert points[0] == (0.0, 1.0)
    assert all(a[1] > b[1] for a, b in itertools.pairwise(points))


@pytest.mark.parametrize("memory_type", sorted(decay.DEFAULT_PARAMETERS))
def test_the_lexical_voice_applies_the_same_curve_in_sql(world, memory_type):
    """The ranking SQL computes decay itself (voices._decay_sql); it must equal decay.weight_at."""
    from memory.search import voices
    from tests.factories import FactFactory

    decay.clear_cache()
    now = timezone.now()
    scale = decay.DEFAULT_PARAMETERS[memory_type][0]
    fresh, old = (
        FactFactory(
            workspace=world.workspace,
            domain=world.architecture,
            topic=f"t{i}",
            memory_type=memory_type,
            confidence=0.9,
            content="The quarterly zephyrine audit runs on the ledger.",
            last_mentioned_at=now - timedelta(days=days),
        )
        for i, days in enumerate([0, scale * 0.7])
    )
    scores = dict(voices.lexical(voices.Scope(agent=world.coder), "zephyrine audit", limit=5))
    weight = decay.weight_at(memory_type, old.last_mentioned_at, now)
    assert weight < 0.8  # the old one did decay
    # applied fully, or above the type's floor (issue 39), as hybrid's _adjust applies it
    factor = decay.factor_at(memory_type, old.last_mentioned_at, now)
    assert factor == pytest.approx(decay.DEFAULT_FLOORS[memory_type] + (1 - decay.DEFAULT_FLOORS[memory_type]) * weight)
    assert scores[old.pk] / scores[fresh.pk] == pytest.approx(factor, rel=1e-3)


# --- Issue 39, point 1: decay applies fully in every mode; recalls stretch the curve -------------
def _commitment(world, content: str, days: float, **extra):
    from memory.services.embedding import embed_missing
    from tests.factories import FactFactory

    when = timezone.now() - timedelta(days=days)
    fact = FactFactory(
        domain=world.architecture,
        topic="release commitment",
        content=content,
        memory_type="commitment",
        confidence=1.0,
        created_at=when,
        observed_at=when,
        last_mentioned_at=when,
        **extra,
    )
    embed_missing()
    return fact


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_a_commitment_a_year_old_fades_to_nothing_in_every_mode(world, mode):
    """Design note 003: a deadline-bound commitment fades fast. A year-old one (weight ≈ 0) scored
    0.83 against 1.45 fresh in hybrid under the old 0.8 floor and still ranked second; now its score
    is its weight, next to nothing, and a fresh fact on the subject ranks above it."""
    from memory.search.hybrid import search_memory

    decay.clear_cache()
    old = _commitment(world, "We promised the zephyrine export to Acme by the end of the sprint.", 365)
    fresh = _commitment(world, "We promised Acme the zephyrine export dashboard next week.", 0)
    hits = search_memory(agent=world.coder, query="zephyrine export promised to Acme", mode=mode, record=False).hits
    scores = {h.fact.pk: h.score for h in hits}
    assert hits[0].fact.pk == fresh.pk
    assert scores[old.pk] < 1e-100 * scores[fresh.pk]


def test_a_type_may_keep_a_floor_set_on_its_profile(world):
    from memory.search.hybrid import search_memory

    old = _commitment(world, "We promised the zephyrine export to Acme by the end of the sprint.", 365)
    fresh = _commitment(world, "We promised Acme the zephyrine export dashboard next week.", 0)
    DecayProfile.objects.update_or_create(
        memory_type="commitment", defaults={"scale_days": 14, "shape": 2, "floor": 0.5}
    )
    decay.clear_cache()
    for mode in ("keyword", "hybrid"):
        scores = {
            h.fact.pk: h.score
            for h in search_memory(agent=world.coder, query="zephyrine export", mode=mode, record=False).hits
        }
        assert 0.2 < scores[old.pk] / scores[fresh.pk] < 1.0
    decay.clear_cache()


def test_only_the_types_written_down_keep_a_floor(db):
    """Each floor kept is in DEFAULT_FLOORS with its reason, and the profile rows (migration 0024)
    carry the same; a commitment keeps none."""
    decay.clear_cache()
    floors = {name: c.floor for name, c in decay.parameters().items()}
    assert floors == decay.DEFAULT_FLOORS
    assert {name for name, floor in floors.items() if not floor} == {"commitment"}
    assert floors["commitment"] == 0.0


def test_the_floor_must_be_below_one(db):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        DecayProfile.objects.create(memory_type="event", scale_days=90, shape=1, floor=1.0)


def test_recalls_stretch_the_curve_slowly():
    curve = decay.Weibull(30.0, 1.0)
    assert curve.weight(30, recalls=0) == pytest.approx(math.exp(-1))
    assert curve.weight(30, recalls=1) == pytest.approx(math.exp(-1 / (1 + 0.5 * math.log(2))))
    assert curve.weight(30, recalls=100) > curve.weight(30, recalls=10) > curve.weight(30, recalls=1)
    assert curve.weight(0, recalls=0) == 1.0
    assert decay.Weibull(14.0, 2.0).weight(10_000) == pytest.approx(math.exp(-700))  # capped, as in SQL


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_fact_agents_keep_recalling_outranks_its_forgotten_twin(world, mode):
    """Design note 003: recallCount decides what surfaces. Two observations as old and as relevant:
    the one returned to agents 40 times has decayed less, in SQL (keyword) and in Python (hybrid)."""
    from memory.search.hybrid import search_memory
    from memory.services.embedding import embed_missing
    from tests.factories import FactFactory

    decay.clear_cache()
    when = timezone.now() - timedelta(days=60)
    twins = [
        FactFactory(
            domain=world.architecture,
            topic=f"zephyrine mirror {i}",
            content="The zephyrine mirror syncs nightly from the ledger replica.",
            memory_type="observation",
            confidence=1.0,
            last_mentioned_at=when,
            recall_count=recalls,
        )
        for i, recalls in enumerate([0, 40])
    ]
    embed_missing()
    forgotten, used = twins
    floored = {
        h.fact.pk: h.score
        for h in search_memory(agent=world.coder, query="zephyrine mirror sync", mode=mode, record=False).hits
    }
    assert floored[used.pk] > floored[forgotten.pk]  # above observation's floor too
    DecayProfile.objects.update_or_create(  # the stretch itself, unfloored
        memory_type="observation", defaults={"scale_days": 30, "shape": 1, "floor": 0.0}
    )
    decay.clear_cache()
    hits = search_memory(agent=world.coder, query="zephyrine mirror sync", mode=mode, record=False).hits
    scores = {h.fact.pk: h.score for h in hits}
    expected = decay.weight_at("observation", when, recalls=40) / decay.weight_at("observation", when)
    assert scores[used.pk] / scores[forgotten.pk] == pytest.approx(expected, rel=0.05)
    assert expected > 3
    decay.clear_cache()
