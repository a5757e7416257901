"""The second reading of a write (issue 14, rounds 3–5): a pair model's probabilities revise the
rules' verdicts under tuned thresholds.

The package does not load the model: `classify_many(…, model=…)` is given something that maps
(old, new) pairs to p(same), p(contradicts), p(separate) — memory.pair_model.active() on the write
path, None for the rules alone. The thresholds ship with the model, in its card
(memory/data/pair_model.json, "second_reading": the values and how each round chose them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from memory.classifier.reading import (
    COMPARE_STEPS,
    PROPOSAL_CHARS,
    PROPOSAL_STEPS,
    READ_CHARS,
    Budget,
    announces_update,
    normalise,
)
from memory.classifier.verdict import RELATED_COSINE, Relation, Verdict, classify_bounded

# What gives the pair model's p(same), p(contradicts), p(separate) for each (old, new) pair.
PairProbabilities = Callable[[Sequence[tuple[str, str]]], Iterable[Sequence[float]]]
# The pair model's card, which holds the thresholds chosen for it (memory.pair_model.CARD).
CARD = Path(__file__).resolve().parent.parent / "data" / "pair_model.json"


@dataclass(frozen=True)
class SecondReading:
    """When the pair model (memory/pair_model.py) overrides the rules. Probabilities are the
    model's p(same), p(contradicts), p(separate) for (old, new); a threshold above 1 never fires.

    - the rules say SAME, the model p(contradicts) ≥ `doubt_same` → UNSURE (never swallow);
    - the rules say CONTRADICTS, the model p(same) ≥ `doubt_contradicts` → UNSURE (never supersede a
      restatement);
    - the rules are UNSURE: p(same) ≥ `settle_same` → SAME, else p(contradicts) ≥ `settle_contradicts`
      → CONTRADICTS, else p(separate) ≥ `settle_separate` → SEPARATE, else UNSURE;
    - the rules say SEPARATE (cosine ≥ RELATED_COSINE): p(contradicts) ≥ `overrule_separate` and
      cosine ≥ `overrule_cosine` → CONTRADICTS, p(same) ≥ `merge_separate` and cosine ≥
      `merge_cosine` → SAME, else p(contradicts) ≥ `doubt_separate` and cosine ≥ `doubt_cosine` →
      UNSURE (round 6, issue 34: an update or a restatement inside a chat turn is rarely worded
      closely enough for the rules).

    Chosen by `python -m bench.eval_writes --tune` on out-of-author predictions of the
    development pairs (bench/train_pair_model.py --cv), never on held-out pairs; the shipped ones
    and the history of their rounds are in the model's card (`shipped_thresholds`)."""

    doubt_same: float
    doubt_contradicts: float
    settle_same: float
    settle_contradicts: float
    settle_separate: float
    doubt_separate: float
    overrule_separate: float = 2.0
    merge_separate: float = 2.0
    # …and only when the pair is at least this close in meaning (round 6: a look-alike statement
    # about another person or service reads as a contradiction more often when it is further away)
    overrule_cosine: float = 0.0
    merge_cosine: float = 0.0
    doubt_cosine: float = 0.0
    # round 7: the rules say SEPARATE or UNSURE, the new statement announces an update ("now",
    # "switched to", "moved", "no longer"…: announces_update) and p(contradicts) ≥ this → CONTRADICTS
    supersede_announced: float = 2.0

    @classmethod
    def never(cls) -> SecondReading:
        """Thresholds that never fire (all above 1): the rules' verdicts stand unchanged."""
        return cls(*(NEVER,) * len(fields(cls)))


NEVER = 2.0  # a threshold no probability reaches


def shipped_thresholds(card: Path = CARD) -> SecondReading:
    """The thresholds of the card's "second_reading" (a value "never": NEVER); the card's "history"
    says when and on what each round chose them."""
    values = json.loads(card.read_text(encoding="utf-8"))["second_reading"]["thresholds"]
    return SecondReading(
        **{
            f.name: NEVER if values[f.name] == "never" else float(values[f.name])
            for f in fields(SecondReading)
            if f.name in values
        }
    )


SECOND_READING = shipped_thresholds()


def second_reading(
    verdict: Verdict, p: tuple[float, float, float], similarity: float, t: SecondReading, *, announced: bool = False
) -> Verdict:
    """The rules' verdict, revised by the pair model's probabilities under thresholds `t`;
    `announced`: the new statement announces an update (announces_update)."""
    same, contradicts, separate = p
    kind = verdict.kind
    if announced and kind in (Relation.SEPARATE, Relation.UNSURE) and contradicts >= t.supersede_announced:
        detail = verdict.reason.split(": ", 1)[-1]
        return Verdict(Relation.CONTRADICTS, f"contradicts: an update, read together ({detail})")
    if kind == Relation.SAME and contradicts >= t.doubt_same:
        return Verdict(
            Relation.UNSURE, f"unsure: reads alike, but may contradict ({verdict.reason.split(': ', 1)[-1]})"
        )
    if kind == Relation.CONTRADICTS and same >= t.doubt_contradicts:
        return Verdict(Relation.UNSURE, f"unsure: may say the same ({verdict.reason.split(': ', 1)[-1]})")
    if kind == Relation.UNSURE:
        detail = verdict.reason.split(": ", 1)[-1]
        if same >= t.settle_same:
            return Verdict(Relation.SAME, f"same meaning: read together ({detail})")
        if contradicts >= t.settle_contradicts:
            return Verdict(Relation.CONTRADICTS, f"contradicts: read together ({detail})")
        if separate >= t.settle_separate:
            return Verdict(Relation.SEPARATE, f"separate: read together, different claims ({detail})")
    if kind == Relation.SEPARATE and similarity >= RELATED_COSINE:
        detail = verdict.reason.split(": ", 1)[-1]
        if contradicts >= t.overrule_separate and similarity >= t.overrule_cosine:
            return Verdict(Relation.CONTRADICTS, f"contradicts: read together ({detail})")
        if same >= t.merge_separate and similarity >= t.merge_cosine:
            return Verdict(Relation.SAME, f"same meaning: read together ({detail})")
        if contradicts >= t.doubt_separate and similarity >= t.doubt_cosine:
            return Verdict(Relation.UNSURE, f"unsure: may contradict ({detail})")
    return verdict


# How many of a proposal's pairs the pair model reads at most on the write path (`classify_many`
# with `nearest`): the closest ones it may revise. The model is the write's main cost. Simulated on
# the streams W, S and T (1,750 writes; `simulate(…, reads=…)` in bench/eval_streams.py), reading
# at most 3, 5 or 10 pairs a proposal gave the same outcomes line for line (2 caught fewer).
MODEL_READS = 3


def _nearest_per_proposal(indices: list[int], items: list[tuple[str, str, float]], most: int) -> list[int]:
    """Of `indices`, at most `most` per `new` text: the closest by cosine, in their first order."""
    kept: dict[str, list[int]] = {}
    for i in sorted(indices, key=lambda i: -items[i][2]):
        mine = kept.setdefault(items[i][1], [])
        if len(mine) < most:
            mine.append(i)
    keep = {i for mine in kept.values() for i in mine}
    return [i for i in indices if i in keep]


# What a proposal's pairs beyond its `nearest` closest facts are (classify_many).
NOT_READ = Verdict(Relation.SEPARATE, "separate: not read (the proposal read nearer live facts of the topic)")


def _separate_floor(t: SecondReading) -> float:
    """Below this cosine no threshold of `t` can revise a SEPARATE verdict: the model is not asked."""
    active = [
        cosine
        for threshold, cosine in (
            (t.overrule_separate, t.overrule_cosine),
            (t.merge_separate, t.merge_cosine),
            (t.doubt_separate, t.doubt_cosine),
        )
        if threshold <= 1.0
    ]
    return max(RELATED_COSINE, min(active)) if active else NEVER


def asks_model(verdict: Verdict, similarity: float, old: str, new: str, t: SecondReading | None = None) -> bool:
    """Whether the second reading may revise the rules' verdict: not for far-apart pairs the rules
    call separate (unless the new statement announces an update the model may recognise), nor for
    the same text up to case, spacing and punctuation (the pair model once read "deploys ship every
    tuesday after the standup" as contradicting its capitalised, full-stopped original)."""
    t = t or SECOND_READING
    announced = t.supersede_announced <= 1.0 and similarity >= RELATED_COSINE and announces_update(new)
    if verdict.kind == Relation.SEPARATE and similarity < _separate_floor(t) and not announced:
        return False
    return normalise(old) != normalise(new)


def classify_many(
    items: list[tuple[str, str, float]], *, nearest: int | None = None, model: PairProbabilities | None = None
) -> list[Verdict]:
    """`classify` for each (old, new, cosine), then the second reading for the pairs it may revise
    (one batch through `model`: memory.pair_model.active()). The rules alone when `model` is None.

    `nearest` (the write path: NEAREST_FACTS) bounds what one proposal costs: of the pairs
    sharing a `new` text, only the `nearest` closest by cosine are read, nearest first, as long
    as their windows fit in PROPOSAL_CHARS, sharing PROPOSAL_STEPS; the others are separate, not
    read."""
    verdicts: list[Verdict] = [NOT_READ] * len(items)
    whole = [False] * len(items)
    if nearest is None:
        for i, (old, new, similarity) in enumerate(items):
            verdicts[i], whole[i] = classify_bounded(old, new, similarity, Budget(COMPARE_STEPS))
    else:
        proposals: dict[str, list[int]] = {}
        for i, (_, new, _) in enumerate(items):
            proposals.setdefault(new, []).append(i)
        for indices in proposals.values():
            left, chars = PROPOSAL_STEPS, PROPOSAL_CHARS
            for i in sorted(indices, key=lambda i: -items[i][2])[:nearest]:
                old, new, similarity = items[i]
                read = min(len(old), READ_CHARS)
                if read > chars:
                    continue
                chars -= read
                budget = Budget(min(COMPARE_STEPS, left))
                verdicts[i], whole[i] = classify_bounded(old, new, similarity, budget)
                left -= min(COMPARE_STEPS, left) - max(budget.left, 0)
    if model is None:
        return verdicts
    asked = [
        i
        for i, (v, (old, new, s)) in enumerate(zip(verdicts, items, strict=True))
        if whole[i] and asks_model(v, s, old, new)
    ]
    if nearest is not None:
        asked = _nearest_per_proposal(asked, items, MODEL_READS)
    if not asked:
        return verdicts
    probs = model([(items[i][0], items[i][1]) for i in asked])
    for i, p in zip(asked, probs, strict=True):
        verdicts[i] = second_reading(
            verdicts[i],
            (float(p[0]), float(p[1]), float(p[2])),
            items[i][2],
            SECOND_READING,
            announced=announces_update(items[i][1]),
        )
    return verdicts
