"""The labelled write-path pairs (issue 14): development pairs, and a held-out set scored once.

`DEV`: authors A (bench/write_pairs_a.py: engineering notes) and B (bench/write_pairs_b.py:
conversations, tickets, runbooks, decisions), 465 pairs, free to read while developing. Round 1
split them once by a hash of each pair's text into tuning (223) and held-out (242) pairs and scored
its classifier once on the held-out half: contradictions swallowed 6.0 %, restatements superseded
10.0 %, separate facts superseded 5.1 %, unsure 18.2 % (targets ≤ 2 %, ≤ 5 %, —, ≤ 25 %). That
half was spent on 2026-12-01 and has been development data since. The two authors write in
different styles, so developing on one and checking on the other (`DEV_A`, `DEV_B`) approximates
a new author.

`HELD_OUT`: authors C and D (bench/write_pairs_c.py, bench/write_pairs_d.py), written by two new
authors without seeing the classifier. Never read while developing; scored once per frozen
design. Imported lazily on first use of `HELD_OUT`, so the development pairs work without them.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from bench.write_pairs_a import PAIRS as PAIRS_A
from bench.write_pairs_b import PAIRS as PAIRS_B

LABELS = ("same", "contradicts", "separate")
HELD_OUT_AUTHORS = ("c", "d")


class Pair(NamedTuple):
    topic: str
    old: str
    new: str
    label: str
    category: str
    author: str


class HeldOutMissing(RuntimeError):
    """The held-out pairs (bench/write_pairs_c.py and _d.py) are not written yet."""


def _pairs(rows: list[tuple[str, str, str, str, str]], author: str) -> list[Pair]:
    return [Pair(topic, old, new, label, category, author) for topic, old, new, label, category in rows]


DEV_A: list[Pair] = _pairs(PAIRS_A, "a")
DEV_B: list[Pair] = _pairs(PAIRS_B, "b")
DEV: list[Pair] = DEV_A + DEV_B


def held_out() -> list[Pair]:
    """All pairs of authors C and D. Raises HeldOutMissing if a file is not there yet."""
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
    # `from bench.write_pairs import HELD_OUT` imports authors C and D only when asked for
    if name == "HELD_OUT":
        return held_out()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
