"""Weibull decay (SPEC §3): a fact's weight at age t days is exp(-(t/λ)^k), with λ and k per
memory type, tunable by admins (DecayProfile). Age runs from the last mention: when it was said
(`observed_at` of the statement or of its latest restatement), not when Engram heard it, so
imported history is as old as it is (issue 35).

Search scales every candidate by its type's `factor`: the weight, applied fully — a commitment
a year past its date scores next to nothing in every mode (issue 39; design note 003: deadline-
bound commitments fade fast). A type may keep a floor (`floor + (1 − floor) × weight`, DecayProfile
.floor, DEFAULT_FLOORS), an explicit per-type setting with its reason beside it (DEFAULT_FLOORS).

Recall strengthens (design note 003: recallCount is a signal recall uses): a fact returned to
agents n times decays on a scale stretched to λ × (1 + RECALL_STRETCH × ln(1 + n)), so what
agents keep using fades slower than what nobody asks for, and one recall is no reprieve
(ln 2 ≈ 0.69: λ × 1.35), a hundred about λ × 3.3."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

# SPEC §3 defaults, used when the table has no row for a type (and mirrored by migration 0002).
DEFAULT_PARAMETERS: dict[str, tuple[float, float]] = {
    "commitment": (14.0, 2.0),
    "event": (90.0, 1.0),
    "observation": (30.0, 1.0),
    "decision": (365.0, 0.8),
    "convention": (730.0, 0.7),
    "procedure": (365.0, 0.8),
    "profile": (3650.0, 0.6),
}
# Decay applies fully in every mode (issue 39) except where a floor is written down here with its
# reason (mirrored on the DecayProfile rows by migration 0024; admins may change them). Chosen on
# the tuning sets of `make eval` (search set `tune`, conversations CA and CB), hybrid nDCG@10 on
# `tune` (`python -m bench.tune_decay`): no floor at all 0.615; floors on observation and event only
# 0.771; these 0.785 (0.796 with hybrid's CONFIDENCE_FLOOR); the old 0.8 for commitments too 0.804.
# - commitment: none. A promise fades fast once due (design note 003): a year-old one scores next
#   to nothing (it scored 0.83 against 1.45 fresh under the old global 0.8 and still ranked second).
# - observation (λ 30 days) and event (λ 90 days), 0.8: what was seen or said, and what happened,
#   is still asked about long after — chat history imported turn by turn is dated when it was
#   said, months before it is searched, and at full decay a month between two of last year's
#   statements outweighs any difference in how well they answer (issue 35); the conversations
#   CA and CB lost most of their recall without it.
# - decision, convention, procedure, profile, 0.8: these stay true until something replaces them,
#   and what replaces them supersedes them (the write path, current first): age alone is a weak
#   sign that a two-year-old convention no longer holds, so it only orders near-equals.
DEFAULT_FLOORS: dict[str, float] = {**dict.fromkeys(DEFAULT_PARAMETERS, 0.8), "commitment": 0.0}
RECALL_STRETCH = 0.5
_CACHE_SECONDS = 30.0


def stretch(recalls: int) -> float:
    """How much `recalls` returns to agents stretch a curve's scale: 1 + RECALL_STRETCH × ln(1 + n)."""
    return 1.0 + RECALL_STRETCH * math.log1p(max(recalls, 0))


@dataclass(frozen=True)
class Weibull:
    scale_days: float
    shape: float
    floor: float = 0.0

    def weight(self, age_days: float, recalls: int = 0) -> float:
        """exp(-(t/λ')^k) with λ' = λ × stretch(recalls); 1.0 for a fact mentioned now (or in the
        future). The exponent is capped at 700, as the ranking SQL caps it (float8 underflow)."""
        if age_days <= 0:
            return 1.0
        return math.exp(-min((age_days / (self.scale_days * stretch(recalls))) ** self.shape, 700.0))

    def factor(self, age_days: float, recalls: int = 0) -> float:
        """What search multiplies a score by: floor + (1 − floor) × weight (the weight itself
        without a floor)."""
        return self.floor + (1.0 - self.floor) * self.weight(age_days, recalls)


_cache: tuple[float, dict[str, Weibull]] | None = None


def parameters() -> dict[str, Weibull]:
    """The current curves, read from DecayProfile at most every 30 s per process."""
    global _cache
    now = time.monotonic()
    if _cache is None or now - _cache[0] > _CACHE_SECONDS:
        from memory.models import DecayProfile

        curves = {
            name: Weibull(scale, shape, DEFAULT_FLOORS[name]) for name, (scale, shape) in DEFAULT_PARAMETERS.items()
        }
        for row in DecayProfile.objects.values("memory_type", "scale_days", "shape", "floor"):
            curves[row["memory_type"]] = Weibull(row["scale_days"], row["shape"], row["floor"])
        _cache = (now, curves)
    return _cache[1]


def clear_cache() -> None:
    global _cache
    _cache = None


def age_days(since: datetime, now: datetime | None = None) -> float:
    return ((now or timezone.now()) - since).total_seconds() / 86400.0


def curve(memory_type: str) -> Weibull:
    return parameters().get(memory_type) or Weibull(*DEFAULT_PARAMETERS["decision"])


def weight_at(memory_type: str, since: datetime, now: datetime | None = None, recalls: int = 0) -> float:
    """Decay weight of a fact of `memory_type` last mentioned at `since` and recalled `recalls`
    times, evaluated at `now`."""
    return curve(memory_type).weight(age_days(since, now), recalls)


def factor_at(memory_type: str, since: datetime, now: datetime | None = None, recalls: int = 0) -> float:
    """What search scales the fact's score by (Weibull.factor): its weight, or above its type's floor."""
    return curve(memory_type).factor(age_days(since, now), recalls)


def curve_points(memory_type: str, *, days: int, steps: int = 60) -> list[tuple[float, float]]:
    """(age in days, weight) samples for drawing a fact's curve."""
    weibull = curve(memory_type)
    return [(d, weibull.weight(d)) for d in (days * i / steps for i in range(steps + 1))]
