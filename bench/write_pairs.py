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

Round 6 (issue 34): O and P (the held-out authors of round 5, scored once) and two new authors, U
(conversations: personal facts, chat turns, assistant replies, reported speech) and V (engineering,
exclusive choices, numbers and dates, partial updates, long notes), join `TRAIN` (3,969 pairs);
U and V wrote JSONL (bench/data/writes/pairs_u.jsonl, _v.jsonl) with each side's topic and the kind
of relation (update or contradiction, restatement or reported, related, similar or unrelated).

Round 6's held-out authors were Q (conversations and personal facts) and R (engineering, exclusive
choices, across topics), 600 pairs in bench/data/writes/pairs_q.jsonl and _r.jsonl. Scored on the
round-6 design and again after its last change, they joined `TRAIN` in round 7, with the training
streams TF (bench/data/writes/stream_tf_*.jsonl, as pairs: `stream_pairs`). TA (500 pairs, half
conversations, half engineering) was written for tuning: the model never trains on it
(bench/eval_streams.py TUNE_PAIRS, `--tune`).

Round 7's held-out authors HA (conversations) and HB (engineering), scored on the round-7 design
and again after its last change, join `TRAIN` in round 8 (issue 34), with four training authors
written for it: TG1 (personal facts against casual chat turns that share few words with them:
implied updates, denials), TG2 (exclusive attributes: only the value or only the entity differs),
TG3 (long messages in which one sentence bears on the stored fact) and TG4 (heavy paraphrase,
reported speech, updates stated without "now"), 600 pairs each.

`HELD_OUT` (round 8): authors HE (conversations and personal memory of users in several countries,
chat turns sharing few words with the stored note) and HF (engineering knowledge of a container-port
operator: services, owners, tools, versions, limits, schedules), 600 pairs in
bench/data/writes/pairs_he.jsonl and _hf.jsonl, written on 2026-12-03 by two authors who saw
neither the classifier, the model nor any other pairs, and scored once on the frozen round-8
design. Never read while developing.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import NamedTuple

from bench.write_pairs_a import PAIRS as PAIRS_A
from bench.write_pairs_b import PAIRS as PAIRS_B

LABELS = ("same", "contradicts", "separate")
TRAIN_AUTHORS = (
    "a", "b", "c", "d", "e", "f", "k", "l", "m", "n", "o", "p", "u", "v", "x", "y", "z", "q", "r", "tf",
    "ha", "hb", "tg1", "tg2", "tg3", "tg4",
)  # fmt: skip
TUNE_AUTHORS = ("c", "d", "e", "f", "k", "l", "m", "n")
HELD_OUT_AUTHORS = ("he", "hf")
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
        if streams := sorted(JSONL.glob(f"stream_{author}_*.jsonl")):
            for path in streams:
                pairs.extend(stream_pairs(path, author))
            continue
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


_TOKEN = re.compile(r"[a-z0-9]+")


def stream_pairs(path: Path, author: str, negatives: int = 2) -> list[Pair]:
    """Labelled pairs from a training stream (bench/data/writes/stream_X_*.jsonl, the format of
    bench/eval_streams.py): each restatement with the line it restates (same), each update or
    contradiction with the line it changes (contradicts), and for every line the `negatives`
    earlier lines outside its chain that share the most words with it (separate: statements that
    look alike and say something else, the hard case of a conversation)."""
    rows = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
    parent = list(range(len(rows)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for row in rows:
        if row.get("of") is not None:
            parent[find(row["i"])] = find(row["of"])
    words = [set(_TOKEN.findall(row["content"].lower())) for row in rows]
    out: list[Pair] = []
    for row in rows:
        i = row["i"]
        if row.get("of") is not None:
            old = rows[row["of"]]
            label = "same" if row["role"] == "restatement" else "contradicts"
            out.append(
                Pair(
                    old["topic"], old["content"], row["content"], label, row["role"], author, row["topic"], row["role"]
                )
            )
        overlap = sorted(
            ((len(words[i] & words[j]) / max(len(words[i] | words[j]), 1), j) for j in range(i) if find(j) != find(i)),
            reverse=True,
        )
        for _, j in overlap[:negatives]:
            out.append(
                Pair(
                    rows[j]["topic"],
                    rows[j]["content"],
                    row["content"],
                    "separate",
                    "look-alike",
                    author,
                    row["topic"],
                    "similar",
                )
            )
    return out


def __getattr__(name: str) -> list[Pair]:
    # `from bench.write_pairs import HELD_OUT` imports the held-out authors only when asked for
    if name == "HELD_OUT":
        return held_out()
    if name == "TRAIN":
        return _authors(TRAIN_AUTHORS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
