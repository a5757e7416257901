"""`make eval-writes`: what a write means (issue 14) — the write classifier on labelled pairs.

For the development pairs of bench/write_pairs.py (all, then author A and author B apart) and for
the held-out pairs (authors C to F) it prints, for the classifier (`memory.similarity.classify`)
and for the one it replaces (`classify_pair`, conflict read as contradicts and unrelated as
separate): the confusion matrix, each class's accuracy, the rates that matter (contradictions
swallowed as restatements, restatements and separate facts superseded as contradictions, unsure
pairs sent to a person), errors per category and the classification latency. Then the
distinct-statement stream: hundreds of different facts from bench/eval_data.py written one after
another on one topic, each compared with every earlier one; a sentence counts as hit when any
earlier one is called SAME or CONTRADICTS (it would be merged or would supersede a true fact).

The held-out pairs are scored once per frozen design: never tune on what this prints for them.

    python -m bench.eval_writes [--part dev|held-out|all] [--no-stream]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

GOLD = ("same", "contradicts", "separate")
PREDICTED = ("same", "contradicts", "separate", "unsure")
# The targets, on the held-out pairs.
MAX_SWALLOWED = 0.02  # contradictions classified SAME
MAX_SUPERSEDED = 0.05  # restatements classified CONTRADICTS
MAX_UNSURE = 0.25  # of all pairs
MAX_STREAM_HIT = 0.02  # distinct sentences merged into or superseding an earlier one

Classifier = Callable[[str, str, float], str]


def new_classifier(old: str, new: str, similarity: float) -> str:
    from memory.similarity import classify

    return classify(old, new, similarity).kind.value


def old_classifier(old: str, new: str, similarity: float) -> str:
    from memory.similarity import PairKind, classify_pair

    # the write path called classify_pair(similarity, proposal, live fact)
    kind = classify_pair(similarity, new, old)
    return {PairKind.SAME: "same", PairKind.CONFLICT: "contradicts", PairKind.UNRELATED: "separate"}[kind]


def forget_readings() -> None:
    """Empty the classifier's cache of read texts, so a timing includes reading both texts."""
    from memory.similarity import _read

    _read.cache_clear()


@dataclass
class Scores:
    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: Counter[tuple[str, str]] = field(default_factory=Counter)  # (category, gold->predicted)
    seconds: list[float] = field(default_factory=list)

    def gold(self, label: str) -> int:
        return sum(n for (g, _), n in self.confusion.items() if g == label)

    def rate(self, gold: str, predicted: str) -> float:
        return self.confusion[(gold, predicted)] / max(self.gold(gold), 1)

    def accuracy(self, label: str) -> float:
        return self.rate(label, label)

    @property
    def total(self) -> int:
        return sum(self.confusion.values())

    @property
    def swallowed(self) -> float:
        return self.rate("contradicts", "same")

    @property
    def superseded(self) -> float:
        return self.rate("same", "contradicts")

    @property
    def separate_superseded(self) -> float:
        return self.rate("separate", "contradicts")

    @property
    def unsure(self) -> float:
        return sum(n for (_, p), n in self.confusion.items() if p == "unsure") / max(self.total, 1)

    @property
    def meets_targets(self) -> bool:
        return self.swallowed <= MAX_SWALLOWED and self.superseded <= MAX_SUPERSEDED and self.unsure <= MAX_UNSURE


def similarities(pairs: Sequence) -> list[float]:
    """The cosine of each pair's texts, embedded in one batch with the real model."""
    from memory.embeddings import embed_texts

    vectors = np.asarray(embed_texts([text for p in pairs for text in (p.old, p.new)], bulk=True))
    return [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(len(pairs))]


def score(pairs: Sequence, sims: Sequence[float], classifier: Classifier, *, cold: bool = True) -> Scores:
    """Classify every pair; `cold` times reading both texts, else both are read beforehand."""
    scores = Scores()
    if not cold:
        for pair, similarity in zip(pairs, sims, strict=True):
            classifier(pair.old, pair.new, similarity)
    for pair, similarity in zip(pairs, sims, strict=True):
        if cold:
            forget_readings()
        started = time.perf_counter()
        predicted = classifier(pair.old, pair.new, similarity)
        scores.seconds.append(time.perf_counter() - started)
        scores.confusion[(pair.label, predicted)] += 1
        if predicted != pair.label:
            scores.errors[(pair.category, f"{pair.label}->{predicted}")] += 1
    return scores


@dataclass
class StreamResult:
    sentences: int
    pairs: int
    hit: list[tuple[int, int, str]]  # (earlier, later, verdict) for the first hit of each sentence
    unsure_sentences: int
    unsure_pairs: int
    seconds: float

    @property
    def hit_rate(self) -> float:
        return len(self.hit) / max(self.sentences, 1)


def stream_sentences() -> list[str]:
    """Distinct real facts from the recall eval set: each one's current version (no `-old` or
    `-restated` variant, which restate or contradict another on purpose)."""
    from bench import eval_data

    return [f["content"] for f in eval_data.FACTS if not re.search(r"-(old|older|restated)\b", f["key"])]


def stream_clauses() -> list[str]:
    """The same facts cut into clauses (at `;` and sentence ends): shorter, closer statements."""
    clauses = []
    for text in stream_sentences():
        for part in re.split(r";\s+|(?<=\.)\s+(?=[A-Z])", text):
            part = part.strip()
            if len(part.split()) >= 4:
                clauses.append(part[0].upper() + part[1:])
    return clauses


def stream(sentences: Sequence[str], classifier: Classifier) -> StreamResult:
    """Write `sentences` one after another on one topic: each is compared with all earlier ones."""
    from memory.embeddings import embed_texts

    vectors = np.asarray(embed_texts(list(sentences), bulk=True))
    cosines = vectors @ vectors.T
    hit: list[tuple[int, int, str]] = []
    unsure_sentences = unsure_pairs = pairs = 0
    started = time.perf_counter()
    for i in range(len(sentences)):
        first_hit = None
        unsure = False
        for j in range(i):
            verdict = classifier(sentences[j], sentences[i], float(cosines[i, j]))
            pairs += 1
            if verdict == "unsure":
                unsure, unsure_pairs = True, unsure_pairs + 1
            elif verdict in ("same", "contradicts") and first_hit is None:
                first_hit = (j, i, verdict)
        if first_hit:
            hit.append(first_hit)
        unsure_sentences += unsure
    return StreamResult(len(sentences), pairs, hit, unsure_sentences, unsure_pairs, time.perf_counter() - started)


# ---------------------------------------------------------------- printing


def _pct(x: float) -> str:
    return f"{100 * x:5.1f} %"


def print_scores(title: str, scores: Scores, *, with_unsure: bool = True) -> None:
    columns = PREDICTED if with_unsure else PREDICTED[:3]
    print(f"\n{title} — {scores.total} pairs")
    print("  gold \\ predicted " + "".join(f"{c:>13}" for c in columns) + f"{'accuracy':>11}")
    for g in GOLD:
        row = "".join(f"{scores.confusion[(g, c)]:>13}" for c in columns)
        print(f"  {g:<17}{row}{_pct(scores.accuracy(g)):>11}   (of {scores.gold(g)})")
    print(
        f"  contradictions swallowed (→ same) {_pct(scores.swallowed)} ({scores.confusion[('contradicts', 'same')]})"
        f" · restatements superseded (→ contradicts) {_pct(scores.superseded)}"
        f" ({scores.confusion[('same', 'contradicts')]})"
        f" · separate superseded (→ contradicts) {_pct(scores.separate_superseded)}"
        f" ({scores.confusion[('separate', 'contradicts')]})"
        + (f" · unsure {_pct(scores.unsure)}" if with_unsure else "")
    )


def print_errors(scores: Scores) -> None:
    by_category: dict[str, Counter[str]] = {}
    for (category, kind), n in scores.errors.items():
        by_category.setdefault(category, Counter())[kind] += n
    print("  errors by category:")
    for category in sorted(by_category):
        kinds = by_category[category]
        detail = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
        print(f"    {category:<20} {sum(kinds.values()):>3}   {detail}")


def print_latency(scores: Scores, warm: Scores) -> None:
    def ms(values: list[float], q: float) -> float:
        return 1000 * float(np.quantile(values, q))

    print(
        f"  latency per pair, base embedding excluded: median {ms(scores.seconds, 0.5):.2f} ms, "
        f"p95 {ms(scores.seconds, 0.95):.2f} ms reading both texts; "
        f"median {ms(warm.seconds, 0.5):.2f} ms, p95 {ms(warm.seconds, 0.95):.2f} ms with both already read "
        "(the write path reads each live fact once). Extra embeddings: none — the same figures include them."
    )


def print_stream(title: str, result: StreamResult, sentences: Sequence[str], *, examples: int = 5) -> None:
    print(
        f"\n{title}: {result.sentences} sentences, {result.pairs} pairs in {result.seconds:.1f} s — "
        f"hit (an earlier one called same or contradicts) {len(result.hit)} = {_pct(result.hit_rate)}; "
        f"with an unsure pair {result.unsure_sentences} = {_pct(result.unsure_sentences / max(result.sentences, 1))} "
        f"({result.unsure_pairs} unsure pairs, {_pct(result.unsure_pairs / max(result.pairs, 1))} of pairs)"
    )
    for j, i, verdict in result.hit[:examples]:
        print(f"    {verdict}: {sentences[j][:90]!r}\n      / {sentences[i][:90]!r}")


def evaluate(part: str, pairs: Sequence, *, authors: Sequence[str] = ()) -> Scores:
    """Print the new and the old classifier on `pairs`, then on each author's pairs apart."""
    sims = similarities(pairs)
    new = score(pairs, sims, new_classifier)
    warm = score(pairs, sims, new_classifier, cold=False)
    old = score(pairs, sims, old_classifier)
    print_scores(f"{part}: classify (new)", new)
    print_errors(new)
    print_latency(new, warm)
    print_scores(f"{part}: classify_pair (old)", old, with_unsure=False)
    print_errors(old)
    for author in authors:
        mine = [k for k, p in enumerate(pairs) if p.author == author]
        subset, subset_sims = [pairs[k] for k in mine], [sims[k] for k in mine]
        scores = score(subset, subset_sims, new_classifier)
        print_scores(f"{part}, author {author.upper()}: classify (new)", scores)
        print_errors(scores)
        print_scores(
            f"{part}, author {author.upper()}: classify_pair (old)",
            score(subset, subset_sims, old_classifier),
            with_unsure=False,
        )
    return new


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("dev", "held-out", "all"), default="all")
    parser.add_argument("--no-stream", action="store_true")
    args = parser.parse_args(argv)

    import django

    django.setup()
    from bench.write_pairs import DEV, HELD_OUT_AUTHORS, HeldOutMissing, held_out

    if args.part in ("dev", "all"):
        evaluate("DEV", DEV, authors=("a", "b"))
    if args.part in ("held-out", "all"):
        try:
            pairs = held_out()
        except HeldOutMissing as missing:
            print(f"\nHELD-OUT: {missing}")
            if args.part == "held-out":
                return 1
        else:
            held = evaluate("HELD-OUT", pairs, authors=HELD_OUT_AUTHORS)
            print(
                f"\n  held-out targets (swallowed ≤ {MAX_SWALLOWED:.0%}, superseded ≤ {MAX_SUPERSEDED:.0%}, "
                f"unsure ≤ {MAX_UNSURE:.0%}): {'met' if held.meets_targets else 'NOT MET'}"
            )
    if not args.no_stream:
        for title, sentences in (
            ("Distinct stream, facts", stream_sentences()),
            ("Distinct stream, clauses", stream_clauses()),
        ):
            print_stream(f"{title} (new)", stream(sentences, new_classifier), sentences)
            print_stream(f"{title} (old)", stream(sentences, old_classifier), sentences, examples=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
