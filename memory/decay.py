"""Weibull decay (SPEC §3): a fact's weight at age t days is exp(-(t/λ)^k), with λ and k per
memory type, tunable by admins (DecayProfile). Age runs from the last mention: when it was said
(`observed_at` of the statement or of its latest restatement), not when Engram heard it, so
imported history is as old as it is (issue 35)."""

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
_CACHE_SECONDS = 30.0


@dataclass(frozen=True)
class Weibull:
    scale_days: float
    shape: float

    def weight(self, age_days: float) -> float:
        """exp(-(t/λ)^k); 1.0 for a fact mentioned now (or in the future)."""
        if age_days <= 0:
            return 1.0
        return math.exp(-((age_days / self.scale_days) ** self.shape))


_cache: tuple[float, dict[str, Weibull]] | None = None


def parameters() -> dict[str, Weibull]:
    """The current curves, read from DecayProfile at most every 30 s per process."""
    global _cache
    now = time.monotonic()
    if _cache is None or now - _cache[0] > _CACHE_SECONDS:
        from memory.models import DecayProfile

        curves = {name: Weibull(scale, shape) for name, (scale, shape) in DEFAULT_PARAMETERS.items()}
        for row in DecayProfile.objects.values("memory_type", "scale_days", "shape"):
            curves[row["memory_type"]] = Weibull(row["scale_days"], row["shape"])
        _cache = (now, curves)
    return _cache[1]


def clear_cache() -> None:
    global _cache
    _cache = None


def age_days(since: datetime, now: datetime | None = None) -> float:
    return ((now or timezone.now()) - since).total_seconds() / 86400.0


def weight_at(memory_type: str, since: datetime, now: datetime | None = None) -> float:
    """Decay weight of a fact of `memory_type` last mentioned at `since`, evaluated at `now`."""
    curve = parameters().get(memory_type) or Weibull(*DEFAULT_PARAMETERS["decision"])
    return curve.weight(age_days(since, now))


def curve_points(memory_type: str, *, days: int, steps: int = 60) -> list[tuple[float, float]]:
    """(age in days, weight) samples for drawing a fact's curve."""
    curve = parameters().get(memory_type) or Weibull(*DEFAULT_PARAMETERS["decision"])
    return [(d, curve.weight(d)) for d in (days * i / steps for i in range(steps + 1))]
