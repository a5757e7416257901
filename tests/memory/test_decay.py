"""Weibull decay at the curve's known points (SPEC §3)."""

import itertools
import math
from datetime import timedelta

import pytest
from django.conf import settings
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
    # softened by the floor, as hybrid's _adjust (relevance leads; decay orders near-equals)
    floor = settings.ENGRAM_DECAY_FLOOR
    assert scores[old.pk] / scores[fresh.pk] == pytest.approx(floor + (1 - floor) * weight, rel=1e-3)
