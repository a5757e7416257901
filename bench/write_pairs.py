"""The labelled write-path pairs (issue 14): development pairs, and a held-out set scored once.

`DEV`: authors A (bench/write_pairs_a.py: engineering notes) and B (bench/write_pairs_b.py:
conversations, tickets, runbooks, decisions), 465 pairs, free to read while developing. Round 1
split them once into tuning and held-out halves and spent the held-out half on 2026-12-01; the two
authors write in different styles, so developing on one and checking on the other (`DEV_A`,
`DEV_B`) approximates a new author.

`HELD_OUT`: 1,004 pairs by four authors who saw neither the classifier nor each other's pairs: C and
D (bench/write_pairs_c.py, _d.py, 506 pairs), E and F (bench/write_pairs_e.py, _f.py, 498 pairs,
written after round 2 was scored). The round-2 design has not changed since it was frozen, so all
four are held out for it. Never read while developing; scored once per frozen design. Imported
lazily on first use of `HELD_OUT`, so the development pairs work without them.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from bench.write_pairs_a import PAIRS as PAIRS_A
from bench.write_pairs_b import PAIRS as PAIRS_B

LABELS = ("same", "contradicts", "separate")
HELD_OUT_AUTHORS = ("c", "d", "e", "f")


class Pair(NamedTuple):
    topic: str
    old: str
    new: str
    label: str
    category: str
    author: str


class HeldOutMissing(RuntimeError):
    """The held-out pairs (bench/write_pairs_c.py to _f.py) are not written yet."""


def _pairs(rows: list[tuple[str, str, str, str, str]], author: str) -> list[Pair]:
    return [Pair(topic, old, new, label, category, author) for topic, old, new, label, category in rows]


DEV_A: list[Pair] = _pairs(PAIRS_A, "a")
DEV_B: list[Pair] = _pairs(PAIRS_B, "b")
DEV: list[Pair] = DEV_A + DEV_B


def held_out() -> list[Pair]:
    """All held-out pairs (authors C to F). Raises HeldOutMissing if a file is not there yet."""
    pairs: list[Pair] = []
    for author in HELD_OUT_AUTHORS:
        name = f"bench.write_pairs_{author}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:
                raise
            raise HeldOutMissing(f"{name.replace('.', '/')}.py is not written yet: no held-out pairs") from None
        pairs.extend(_pairs(module.PAIRS, author))
    return pairs


def __getattr__(name: str) -> list[Pair]:
    # `from bench.write_pairs import HELD_OUT` imports the held-out authors only when asked for
    if name == "HELD_OUT":
        return held_out()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
