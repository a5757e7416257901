"""The labelled write-path pairs (issue 14), split once into a tuning and a held-out part.

Two authors wrote the pairs independently of the classifier (bench/write_pairs_a.py: engineering
notes; bench/write_pairs_b.py: conversations, tickets, runbooks, decisions). The split is fixed
by a hash of each pair's text, so it never moves: thresholds and rules are tuned on `TUNING`
only, and `HELD_OUT` is only ever scored, never looked at while tuning.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from bench.write_pairs_a import PAIRS as PAIRS_A
from bench.write_pairs_b import PAIRS as PAIRS_B

LABELS = ("same", "contradicts", "separate")


class Pair(NamedTuple):
    topic: str
    old: str
    new: str
    label: str
    category: str
    author: str


def _held_out(pair: Pair) -> bool:
    digest = hashlib.sha256(f"{pair.old}\x00{pair.new}".encode()).digest()
    return digest[0] % 2 == 1


ALL: list[Pair] = [Pair(*p, author="a") for p in PAIRS_A] + [Pair(*p, author="b") for p in PAIRS_B]
TUNING: list[Pair] = [p for p in ALL if not _held_out(p)]
HELD_OUT: list[Pair] = [p for p in ALL if _held_out(p)]
