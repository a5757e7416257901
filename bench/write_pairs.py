"""The labelled write-path pairs (issue 14): development pairs, and a held-out set scored once.

`DEV`: authors A (bench/write_pairs_a.py: engineering notes) and B (bench/write_pairs_b.py:
conversations, tickets, runbooks, decisions), 465 pairs: what the rules of
`memory.classifier.classify` were written against (round 2, then memory/similarity.py, frozen at
sha256 2dd06644…).

`TRAIN`: authors A to F and K to N, 2,469 pairs — what the second reading (memory/pair_model.py)
is trained on (bench/train_pair_model.py, round 5). C to F were the held-out authors of round 2,
K and L of round 3, M and N of round 4, each scored once on its round's frozen design before
becoming training data.

`TUNE_AUTHORS`: C to F and K to N (2,004 pairs): the second reading's thresholds are chosen on them
(`python -m bench.eval_writes --tune`), each with a probability from a model trained without its
two-author fold. A and B, the rules' own development pairs, are never tuned on.

`HELD_OUT`: authors O and P (bench/write_pairs_o.py, _p.py, 500 pairs), written on 2026-12-02 by
two authors who saw neither the classifier, the model nor any other pairs, and scored once on the
frozen round-5 design. Never read while developing. Imported lazily on first use of `HELD_OUT`, so
the development pairs work without them.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import NamedTuple

from bench.write_pairs_a import PAIRS as PAIRS_A
from bench.write_pairs_b import PAIRS as PAIRS_B

LABELS = ("same", "contradicts", "separate")
TRAIN_AUTHORS = ("a", "b", "c", "d", "e", "f", "k", "l", "m", "n", "o", "p", "u", "v")
TUNE_AUTHORS = ("c", "d", "e", "f", "k", "l", "m", "n")
HELD_OUT_AUTHORS = ("q", "r")
# Round 6 (issue 34): pairs as data, one JSON object a line (bench/data/writes/pairs_X.jsonl), with
# the topic of each side and the kind of relation (update, contradiction, restatement, …).
JSONL = Path(__file__).resolve().parent / "data" / "writes"


class Pair(NamedTuple):
    topic: str
    old: str
    new: str
    label: str
    category: str
    author: str
    new_topic: str = ""  # the new side's topic when the author gave one ("" = `topic`)
    kind: str = ""  # update, contradiction, restatement, reported, related, similar, unrelated

    @property
    def across_topics(self) -> bool:
        return bool(self.new_topic) and self.new_topic != self.topic


class HeldOutMissing(RuntimeError):
    """A pair file (bench/write_pairs_X.py) is not written yet."""


def _pairs(rows: list[tuple[str, str, str, str, str]], author: str) -> list[Pair]:
    return [Pair(topic, old, new, label, category, author) for topic, old, new, label, category in rows]


DEV_A: list[Pair] = _pairs(PAIRS_A, "a")
DEV_B: list[Pair] = _pairs(PAIRS_B, "b")
DEV: list[Pair] = DEV_A + DEV_B


def held_out() -> list[Pair]:
    """All held-out pairs (HELD_OUT_AUTHORS). Raises HeldOutMissing if a file is not there yet."""
    return _authors(HELD_OUT_AUTHORS)


def _authors(authors: tuple[str, ...]) -> list[Pair]:
    pairs: list[Pair] = []
    for author in authors:
        if (path := JSONL / f"pairs_{author}.jsonl").exists():
            for raw in path.read_text().splitlines():
                if raw.strip():
                    row = json.loads(raw)
                    pairs.append(
                        Pair(row["topic"], row["old"], row["new"], row["label"], row.get("category", ""), author,
                             row.get("new_topic", ""), row.get("kind", ""))
                    )  # fmt: skip
            continue
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
    if name == "TRAIN":
        return _authors(TRAIN_AUTHORS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
