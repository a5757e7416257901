"""Write streams through the real write path (issue 34): what people pay, and what the machine knows.

A stream (bench/data/writes/stream_*.jsonl) is what an agent stores over weeks or months, one
statement a line, in order: mostly distinct statements, with restatements, updates and
contradictions of earlier lines (`role`, `of`), under the topics a tagging agent would set. Each
stream is proposed line by line through `memory.services.facts.propose_fact` (its embedding
computed beforehand in one batch, as an agent's runtime would have it) into a domain of its own, in
a database of its own (ENGRAM_DB_NAME=engram_eval_streams, recreated), with the line's
`observed_at`. Printed per stream:

- person decisions per 100 writes (the possible conflicts opened) and the share of them that were
  real (an update or a contradiction asked about the statement it updates or contradicts);
- updates recognised: the statement it replaces is superseded by it (or the two are asked about);
- contradictions caught (superseded either way, or asked) and missed;
- restatements merged (re-mentioned into the fact they restate), asked, superseded, missed;
- distinct statements merged, superseded or asked about (each is a wrong outcome);
- writes per second (embeddings excluded).

`of` points to the line whose value a line restates, updates or contradicts; lines linked by `of`
form one attribute's chain, and a pair inside one chain is the real relation.

    python -m bench.eval_streams [--part tune|held-out|all] [--stream NAME ...]

The tuning streams (TUNE: W, and the held-out streams of rounds 6 and 7, S, T, HC and HD) are what
the write path's choices are made on; the held-out streams (HELD_OUT: HG and HH, round 8) are scored
once per frozen design.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_eval_streams")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.datasets import STREAM_ROLES as ROLES  # noqa: E402
from bench.datasets import stream_rows  # noqa: E402

DATA = ROOT / "bench" / "data" / "writes"
# Round 7: the held-out streams of round 6 (S, T), scored twice, are tuned on beside W. Round 8: so
# are round 7's (HC, HD); the held-out streams are HG (a chat with an assistant, and 200 distinct
# statements on one topic) and HH (a team's agent, and an assistant's memory of one person).
TUNE = (
    "w_mixed", "w_distinct", "s_chat", "s_distinct", "t_team", "t_personal",
    "hc_chat", "hc_distinct", "hd_team", "hd_personal",
)  # fmt: skip
HELD_OUT = ("hg_chat", "hg_distinct", "hh_team", "hh_personal")


@dataclass(frozen=True)
class Line:
    i: int
    observed_at: datetime
    topic: str
    content: str
    role: str
    of: int | None


def load(name: str) -> list[Line]:
    """One stream's lines, checked by bench.datasets (sequential, `of` earlier, a known role)."""
    return [
        Line(
            row["i"],
            datetime.fromisoformat(row["observed_at"].replace("Z", "+00:00")),
            row["topic"].strip()[:200] or "notes",
            row["content"].strip(),
            row["role"],
            row["of"],
        )
        for row in stream_rows(name)
    ]


class Chains:
    """Union-find over `of` links: the lines that state one attribute."""

    def __init__(self, lines: list[Line]) -> None:
        self.parent = list(range(len(lines)))
        for line in lines:
            if line.of is not None:
                self.parent[self.find(line.i)] = self.find(line.of)

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def same(self, a: int, b: int) -> bool:
        return self.find(a) == self.find(b)


@dataclass
class StreamScore:
    name: str
    writes: int = 0
    seconds: float = 0.0
    decisions: int = 0
    real_decisions: int = 0
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (role, what happened)
    examples: list[str] = field(default_factory=list)

    def per_100(self, n: int) -> float:
        return 100.0 * n / max(self.writes, 1)

    def share(self, role: str, *whats: str) -> tuple[int, int]:
        total = sum(n for (r, _), n in self.outcomes.items() if r == role)
        return sum(self.outcomes[(role, w)] for w in whats), total


def run_stream(name: str, lines: list[Line], workspace, agent) -> StreamScore:
    from memory.actors import Actor
    from memory.embeddings import embed_meanings
    from memory.models import Fact
    from memory.services.facts import FactInput, propose_fact
    from memory.services.tenancy import create_domain

    by = Actor.of_agent(agent)
    domain = create_domain(workspace=workspace, name=f"s-{name}", by=Actor.system("eval"))
    meanings = embed_meanings([(line.topic, line.content) for line in lines], batch_size=32, bulk=True)
    chains = Chains(lines)
    fact_of: dict[int, int] = {}  # line → the fact that holds what it said
    origin: dict[int, int] = {}  # fact → the line that created it
    score = StreamScore(name, writes=len(lines))
    began = time.perf_counter()
    for line, meaning in zip(lines, meanings, strict=True):
        result = propose_fact(
            domain=domain,
            data=FactInput(
                topic=line.topic, content=line.content, memory_type="observation", observed_at=line.observed_at
            ),
            by=by,
            embedding=meaning,
        )
        fact_of[line.i] = result.fact.pk
        origin.setdefault(result.fact.pk, line.i)
        other = origin.get(result.compared_with) if result.compared_with else None
        related = other is not None and chains.same(other, line.i)
        outcome = result.outcome
        # one question per disagreement: a pair joined to a waiting question costs no new decision
        if outcome == "possible_conflict" and result.conflict is not None and result.conflict.question_id is None:
            score.decisions += 1
            real = related and line.role in ("update", "contradiction")
            score.real_decisions += real
            if not real and len(score.examples) < 6:
                score.examples.append(
                    f"asked ({line.role}): {lines[other].content[:90]!r} / {line.content[:90]!r}"
                    if other is not None
                    else ""
                )
        if line.role == "distinct":
            what = {"created": "created", "re_mentioned": "merged", "possible_conflict": "asked"}.get(
                outcome, "superseded"
            )
        elif line.role == "restatement":
            what = (
                "merged" if outcome == "re_mentioned" and related
                else "asked" if outcome == "possible_conflict" and related
                else "superseded" if outcome in ("conflict_won", "conflict_lost") and related
                else "missed"
            )  # fmt: skip
        else:  # update, contradiction
            target = fact_of.get(line.of) if line.of is not None else None
            replaced = (
                target is not None
                and not Fact.objects.filter(pk=target).live().exists()
                and Fact.objects.filter(pk=result.fact.pk).live().exists()
            )
            what = (
                "superseded" if replaced
                else "asked" if outcome == "possible_conflict" and related
                else "lost" if outcome == "conflict_lost" and related  # the older value stays current
                else "merged" if outcome == "re_mentioned" and related  # swallowed as a restatement
                else "missed"
            )  # fmt: skip
        score.outcomes[(line.role, what)] += 1
    score.seconds = time.perf_counter() - began
    return score


# ---------------------------------------------------------------- choosing the second reading


def simulate(
    lines: list[Line],
    meanings: list,
    t,
    probabilities,
    name: str = "",
    floor: float | None = None,
    reads: int | None = None,
) -> StreamScore:
    """The write path of `run_stream`, in memory, under second-reading thresholds `t`: each line
    read against its NEIGHBOURS nearest live lines at least RELATED_COSINE close, the rules, the
    pair model's second reading, the topic rule (conflicts.across_topics), one relation acted on
    (conflicts.choose) and applied as the database would (the later statement wins). What it leaves
    out: a person's earlier decisions (none in a stream) and veracity (all agent-inferred)."""
    import numpy as np

    from memory.classifier import (
        COMPARE_STEPS,
        MODEL_READS,
        RELATED_COSINE,
        Budget,
        Relation,
        Verdict,
        announces_update,
        asks_model,
        classify_bounded,
        second_reading,
    )
    from memory.services.nearby import NEIGHBOURS

    vectors = np.asarray([m.content for m in meanings])
    floor = RELATED_COSINE if floor is None else floor
    reads = MODEL_READS if reads is None else reads
    chains = Chains(lines)
    precedence = {Relation.SAME: 0, Relation.CONTRADICTS: 1, Relation.UNSURE: 2}
    live: list[int] = []
    holder: dict[int, int] = {}
    asked: set[int | None] = set()  # lines already one side of a waiting question
    score = StreamScore(name, writes=len(lines))
    for line in lines:
        i = line.i
        best: tuple[int, float, int, Verdict] | None = None
        read = 0  # pairs the model read for this line (at most `reads`: MODEL_READS)
        if live:
            sims = vectors[live] @ vectors[i]
            for j in np.argsort(-sims)[:NEIGHBOURS]:
                s = float(sims[j])
                if s < floor:
                    break
                k = live[j]
                old, new = lines[k].content, line.content
                verdict, whole = _RULES.get((k, i, name)) or _RULES.setdefault(
                    (k, i, name), classify_bounded(old, new, s, Budget(COMPARE_STEPS))
                )
                if probabilities is not None and whole and read < reads and asks_model(verdict, s, old, new, t):
                    read += 1
                    if (old, new) not in _PROBS:
                        _PROBS[(old, new)] = tuple(map(float, next(iter(probabilities([(old, new)])))))
                    verdict = second_reading(verdict, _PROBS[(old, new)], s, t, announced=announces_update(new))
                if verdict.kind == Relation.CONTRADICTS and lines[k].topic != line.topic and not announces_update(new):
                    verdict = Verdict(Relation.UNSURE, verdict.reason)
                if verdict.kind in precedence:
                    key = (precedence[verdict.kind], -s)
                    if best is None or key < (best[0], -best[1]):
                        best = (precedence[verdict.kind], s, k, verdict)
        other = best[2] if best else None
        kind = best[3].kind if best else Relation.SEPARATE
        if kind == Relation.SAME:
            holder[i], outcome = other, "re_mentioned"
        elif kind == Relation.CONTRADICTS:
            assert other is not None
            if line.observed_at >= lines[other].observed_at:
                live.remove(other)
                live.append(i)
                holder[i], outcome = i, "conflict_won"
            else:
                holder[i], outcome = i, "conflict_lost"
        else:
            live.append(i)
            holder[i] = i
            outcome = "possible_conflict" if kind == Relation.UNSURE else "created"
        related = other is not None and chains.same(other, i)
        if outcome == "possible_conflict" and other not in asked:  # else joined to its question
            asked.update((other, i))
            score.decisions += 1
            score.real_decisions += related and line.role in ("update", "contradiction")
        score.outcomes[(line.role, _what(line, outcome, related, holder, live))] += 1
    return score


_RULES: dict = {}
_PROBS: dict = {}


def _what(line: Line, outcome: str, related: bool, holder: dict[int, int], live: list[int]) -> str:
    if line.role == "distinct":
        return {"created": "created", "re_mentioned": "merged", "possible_conflict": "asked"}.get(outcome, "superseded")
    if line.role == "restatement":
        return (
            "merged" if outcome == "re_mentioned" and related
            else "asked" if outcome == "possible_conflict" and related
            else "superseded" if outcome in ("conflict_won", "conflict_lost") and related
            else "missed"
        )  # fmt: skip
    target = holder.get(line.of) if line.of is not None else None
    replaced = target is not None and target not in live and holder[line.i] in live
    return (
        "superseded" if replaced
        else "asked" if outcome == "possible_conflict" and related
        else "lost" if outcome == "conflict_lost" and related
        else "merged" if outcome == "re_mentioned" and related
        else "missed"
    )  # fmt: skip


def objective(scores: list[StreamScore]) -> tuple[bool, float, dict[str, float]]:
    """Whether the tuning margins hold over `scores`, and what is maximised under them: updates
    recognised, contradictions caught and restatements merged, less every question that was not a
    real contradiction."""
    total = StreamScore("all")
    one_topic = StreamScore("distinct streams")
    for s in scores:
        for into in (total, one_topic) if s.name.endswith("_distinct") else (total,):
            into.writes += s.writes
            into.decisions += s.decisions
            into.real_decisions += s.real_decisions
            into.outcomes.update(s.outcomes)
    wrong_distinct, n_distinct = total.share("distinct", "merged", "superseded")
    superseded, n_restated = total.share("restatement", "superseded")
    swallowed, n_changed = total.share("update", "merged")
    swallowed_c, n_contra = total.share("contradiction", "merged")
    updates, n_updates = total.share("update", "superseded")
    caught, _ = total.share("contradiction", "superseded", "asked", "lost")
    merged, _ = total.share("restatement", "merged")
    figures = {
        "decisions_per_100": total.per_100(total.decisions),
        "real": total.real_decisions / max(total.decisions, 1),
        "updates": updates / max(n_updates, 1),
        "merged": merged / max(n_restated, 1),
        "caught": caught / max(n_contra, 1),
        "distinct_wrong": wrong_distinct / max(n_distinct, 1),
    }
    # the margin on questions about distinct statements is on a stream of distinct statements
    # on one topic (round 8; until round 7 every distinct line of every stream counted, among them
    # the look-alike progressions of a mixed stream — "expecting a baby" / "the baby arrived")
    asked_distinct, n_one_topic = one_topic.share("distinct", "asked")
    figures["distinct_asked"] = asked_distinct / max(n_one_topic, 1)
    figures["outside"] = outside(
        (wrong_distinct, 0.01 * n_distinct),
        (asked_distinct, 0.03 * n_one_topic),
        (superseded, 0.03 * n_restated),
        (swallowed + swallowed_c, 0.02 * (n_changed + n_contra)),
        (total.per_100(total.decisions), 10),
    )
    ok = figures["outside"] == 0
    return ok, updates + caught + merged - (total.decisions - total.real_decisions), figures


def outside(*measured: tuple[float, float]) -> float:
    """How far (value, limit) pairs are beyond their limits, each relative to its limit: 0 when
    every margin holds. The tuner climbs this down first when it starts outside the margins (a
    retrained model may read the shipped thresholds differently)."""
    return sum(max(0.0, value - limit) / max(limit, 1e-9) for value, limit in measured)


GRID = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.62, 0.65, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 2.0)
COSINE_GRID = (0.0, 0.3, 0.4, 0.5, 0.55, 0.6, 0.61, 0.65, 0.7, 0.8)
# (none above 0.5: Mia / Omar, MUST, are 0.51 apart; a floor above it can never read them)
FLOORS = (0.3, 0.35, 0.4, 0.45, 0.5)
# Round 7: pairs the thresholds must also hold on — an author the shipped model never trained on
# (TA, written for round 7; Q and R, round 6's held-out pairs scored twice, are training pairs now).
TUNE_PAIRS = ("ta",)


# The named cases (tests/memory/test_knowing_current.py): thresholds that leave one of them
# silent are not chosen, whatever they score. (old topic, old, new topic, new, what the write must do)
MUST = (
    ("deploy tool", "We deploy the web service with Helm charts.", "deploy tool",
     "We deploy the web service with Kustomize overlays.", ("contradicts", "unsure")),
    # round 8: the exclusive owner the write path's own tests ask about (tests/memory/test_write_relations.py;
    # content cosine 0.51: a floor above it leaves a new lead and the old one two silent live facts)
    ("team", "Mia leads the platform team.", "team", "Omar leads the platform team.", ("contradicts", "unsure")),
    ("ci", "The nightly build takes 40 minutes.", "ci", "The nightly build now takes 25 minutes.", ("contradicts",)),
    ("arch-sync", "Release freeze starts on December 20.", "planning", "Release freeze starts on January 5.",
     ("contradicts", "unsure")),
    ("arch-sync", "Release freeze starts on December 20.", "planning", "Release freeze now starts on January 5.",
     ("contradicts",)),
)  # fmt: skip


class TuningPairs:
    """The tuning pairs with their cosine, the rules' verdict and the shipped model's probabilities,
    scored as the write path would act on them under thresholds `t` and relatedness floor `floor`
    (bench.eval_writes.as_written: a cross-topic contradiction not announced as an update is asked)."""

    def __init__(self, pairs: list) -> None:
        import numpy as np

        from memory import pair_model
        from memory.classifier import classify
        from memory.embeddings import embed_texts

        self.pairs = pairs
        vectors = np.asarray(embed_texts([x for p in self.pairs for x in (p.old, p.new)], bulk=True))
        self.cosines = [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(len(self.pairs))]
        self.probabilities = pair_model.probabilities([(p.old, p.new) for p in self.pairs])
        self.rules = [classify(p.old, p.new, c) for p, c in zip(self.pairs, self.cosines, strict=True)]

    def predicted(self, t, floor: float) -> list[str]:
        """What the write path does with each pair: same, contradicts, separate or unsure."""
        from memory.classifier import announces_update, asks_model, second_reading

        out = []
        for p, c, probs, verdict in zip(self.pairs, self.cosines, self.probabilities, self.rules, strict=True):
            predicted = "separate"
            if c >= floor:
                if asks_model(verdict, c, p.old, p.new, t):
                    verdict = second_reading(verdict, tuple(map(float, probs)), c, t, announced=announces_update(p.new))
                predicted = verdict.kind.value
                if predicted == "contradicts" and p.across_topics and not announces_update(p.new):
                    predicted = "unsure"
            out.append(predicted)
        return out

    def score(self, t, floor: float) -> tuple[bool, dict[str, float]]:
        confusion: Counter[tuple[str, str]] = Counter(
            (p.label, predicted) for p, predicted in zip(self.pairs, self.predicted(t, floor), strict=True)
        )

        def rate(gold: str, *predicted: str) -> float:
            total = sum(n for (g, _), n in confusion.items() if g == gold)
            return sum(confusion[(gold, x)] for x in predicted) / max(total, 1)

        figures = {
            "swallowed": rate("contradicts", "same"),
            "caught": rate("contradicts", "contradicts", "unsure"),
            "merged": rate("same", "same"),
            "restatements_superseded": rate("same", "contradicts"),
            "separate_superseded": rate("separate", "contradicts"),
        }
        figures["outside"] = outside(
            (figures["swallowed"], 0.02),
            (figures["restatements_superseded"], 0.03),
            (figures["separate_superseded"], 0.01),
        )
        return figures["outside"] == 0, figures


def tune(names: list[str]) -> None:
    """Coordinate search over the relatedness floor and the second reading's thresholds, simulated
    on the tuning streams, under the streams' margins (`objective`) and the pairs' (TUNE_PAIRS:
    ≤ 2 % of contradictions merged, ≤ 3 % of restatements and ≤ 1 % of separate statements
    superseded; each of the issue's named cases, MUST, handled as it must be); maximised: the streams' objective plus 100 × (restatements merged + contradictions
    caught) on the pairs."""
    from dataclasses import asdict, replace

    from memory import pair_model
    from memory.classifier import RELATED_COSINE, SECOND_READING
    from memory.classifier import second_reading as module
    from memory.embeddings import embed_meanings

    model = pair_model.active()
    streams = {n: load(n) for n in names}
    meanings = {
        n: embed_meanings([(x.topic, x.content) for x in v], batch_size=32, bulk=True) for n, v in streams.items()
    }
    from bench.datasets import Pair
    from bench.datasets import pairs as labelled_pairs

    pairs = TuningPairs(labelled_pairs(TUNE_PAIRS))
    must = TuningPairs([Pair(a, old, new, "contradicts", "", "must", b) for a, old, b, new, _ in MUST])

    def evaluate(t, floor):
        module.RELATED_COSINE = floor  # what second_reading revises from, as the write path would ship it
        ok, value, figures = objective([simulate(streams[n], meanings[n], t, model, n, floor) for n in names])
        pairs_ok, pair_figures = pairs.score(t, floor)
        missed = sum(got not in case[-1] for got, case in zip(must.predicted(t, floor), MUST, strict=True))
        value += 100 * (pair_figures["merged"] + pair_figures["caught"])
        figures = {**figures, **{f"pairs_{k}": v for k, v in pair_figures.items()}, "must_missed": missed}
        figures["outside"] += pair_figures["outside"] + missed
        return ok and pairs_ok and not missed, value, figures

    def better(c_ok, c_value, c_figures, ok, value, figures) -> bool:
        # inside the margins: the larger value; outside them: closer to inside
        if c_ok:
            return not ok or c_value > value
        return not ok and c_figures["outside"] < figures["outside"]

    best, floor = SECOND_READING, RELATED_COSINE
    ok, value, figures = evaluate(best, floor)
    print(f"shipped: ok={ok} value={value:.1f} {_rounded(figures)}", flush=True)
    for _round in range(3):
        for f in FLOORS:
            c_ok, c_value, c_figures = evaluate(best, f)
            if better(c_ok, c_value, c_figures, ok, value, figures):
                floor, ok, value, figures = f, c_ok, c_value, c_figures
        for name in asdict(best):
            for x in COSINE_GRID if name.endswith("cosine") else GRID:
                candidate = replace(best, **{name: x})
                c_ok, c_value, c_figures = evaluate(candidate, floor)
                if better(c_ok, c_value, c_figures, ok, value, figures):
                    best, ok, value, figures = candidate, c_ok, c_value, c_figures
        print(
            f"round {_round + 1}: ok={ok} value={value:.1f} floor={floor} {asdict(best)} {_rounded(figures)}",
            flush=True,
        )
    module.RELATED_COSINE = RELATED_COSINE


def _rounded(figures: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in figures.items()}


def _pct(n: int, total: int) -> str:
    return f"{n}/{total} ({100.0 * n / max(total, 1):.0f} %)"


def report(score: StreamScore) -> None:
    print(f"\n## stream {score.name}: {score.writes} writes, {score.writes / max(score.seconds, 1e-9):.1f} writes/s")
    print(
        f"person decisions: {score.decisions} = {score.per_100(score.decisions):.1f} per 100 writes; "
        f"real: {_pct(score.real_decisions, score.decisions)}"
    )
    for role in ROLES:
        total = sum(n for (r, _), n in score.outcomes.items() if r == role)
        if total:
            parts = ", ".join(f"{w} {n}" for (r, w), n in sorted(score.outcomes.items()) if r == role)
            print(f"{role:>13}: {total:4d}  {parts}")
    up, n_up = score.share("update", "superseded")
    co, n_co = score.share("contradiction", "superseded", "asked", "lost")
    re, n_re = score.share("restatement", "merged")
    di, n_di = score.share("distinct", "asked")
    print(
        f"updates recognised {_pct(up, n_up)}; contradictions caught {_pct(co, n_co)}; "
        f"restatements merged {_pct(re, n_re)}; distinct asked {_pct(di, n_di)}"
    )
    for example in filter(None, score.examples):
        print("   ", example)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("tune", "held-out", "all"), default="all")
    parser.add_argument("--stream", nargs="*", default=None)
    parser.add_argument(
        "--tune", action="store_true", help="choose the second reading's thresholds on the tuning streams"
    )
    from bench.common import chosen_sets

    args = parser.parse_args(argv)
    names = chosen_sets(args.stream, args.part, TUNE, HELD_OUT, lambda n: DATA / f"stream_{n}.jsonl")
    if not names:
        print("no stream files", file=sys.stderr)
        return 1

    import django

    django.setup()
    if args.tune:
        tune([n for n in names if n in TUNE])
        return 0
    from bench.common import fresh_agent

    workspace, agent = fresh_agent("streams", "Write streams", "stream-agent")
    total = StreamScore("all")
    for name in names:
        score = run_stream(name, load(name), workspace, agent)
        report(score)
        total.writes += score.writes
        total.decisions += score.decisions
        total.real_decisions += score.real_decisions
        total.outcomes.update(score.outcomes)
        total.seconds += score.seconds
    if len(names) > 1:
        report(total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
