"""Recall on conversations (issue 35): long chats stored turn by turn, as an agent runtime would.

A set (bench/data/recall/conv_X.jsonl) holds one or more long conversations — between people, or
between a user and an assistant, over months of dated sessions, small talk between the facts — and
questions about them, each with the turns that answer it (`answers`) and, for a value that changed,
the turns that stated the older value (`stale`). Question types: `single` (one turn, asked in other
words), `multi` (2–4 turns far apart), `temporal` (when something happened) and `latest` (a value
stated, then changed: the newest statement answers it).

Every turn is proposed through the real write path (`memory.services.facts.propose_fact`, its
embedding computed beforehand in one batch, as an agent's runtime would have it) into a domain per
conversation, under the topic of its session ("session 2025-02-14"), with `observed_at` its
session's date, and linked to one episode per session. A turn the write path merges into an earlier
fact is answered by that fact; a stale turn it superseded is no longer live (it cannot outrank the
answer). Then every question is searched (`search_memory`, limit 10, not recorded) in each mode, and
with each voice alone, in a database of its own (ENGRAM_DB_NAME=engram_eval_conversations).

Printed per set, per ranker, overall and per question type: recall@5, recall@10, nDCG@10 and
MRR@10; and **current first**: of the `latest` questions, the share where the newest statement is
in the top 10 and above every stale one still live.

    python -m bench.eval_conversations [--part tune|held-out|all] [--set NAME ...]

TUNE: CA and CB (friends, siblings, and two users with an assistant); HELD_OUT: CC and CD
(coworkers, an elderly user with an assistant, three housemates, a student with an assistant) and
CE (current first: three users with an assistant whose facts change, 80 `latest` questions),
written on 2026-12-03 by authors who saw neither the ranking nor any other set.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_eval_conversations")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ENGRAM_RECALL_MODE", "sync")

from bench.datasets import QUESTION_TYPES as TYPES  # noqa: E402
from bench.datasets import conversation_rows  # noqa: E402

DATA = ROOT / "bench" / "data" / "recall"
TUNE = ("ca", "cb")
HELD_OUT = ("cc", "cd", "ce")
K = 10


@dataclass(frozen=True)
class Turn:
    conv: str
    session: int
    date: str
    id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Question:
    id: str
    conv: str
    type: str
    question: str
    answers: tuple[str, ...]
    stale: tuple[str, ...]


@dataclass
class ConversationSet:
    name: str
    turns: list[Turn]
    questions: list[Question]


def load(name: str) -> ConversationSet:
    turns: list[Turn] = []
    questions: list[Question] = []
    for row in conversation_rows(name):
        if row["kind"] == "turn":
            turns.append(Turn(row["conv"], int(row["session"]), row["date"], row["id"], row["speaker"], row["text"]))
        else:
            questions.append(
                Question(
                    row["id"], row["conv"], row["type"], row["question"],
                    tuple(row["answers"]), tuple(row.get("stale") or ()),
                )
            )  # fmt: skip
    return ConversationSet(name, turns, questions)


def observed(turn: Turn, index: int) -> datetime:
    """A turn's time: its session's date, a minute per turn in order (sessions run in the day)."""
    day = datetime.strptime(turn.date, "%Y-%m-%d").replace(tzinfo=UTC, hour=9)
    return day + timedelta(minutes=index)


# ---------------------------------------------------------------- metrics


def recall_at(ranked: list[int], relevant: set[int], k: int) -> float:
    return len(set(ranked[:k]) & relevant) / len(relevant) if relevant else 0.0


def ndcg_at(ranked: list[int], relevant: set[int], k: int = K) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, pk in enumerate(ranked[:k]) if pk in relevant)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / idcg if idcg else 0.0


def mrr_at(ranked: list[int], relevant: set[int], k: int = K) -> float:
    for i, pk in enumerate(ranked[:k]):
        if pk in relevant:
            return 1 / (i + 1)
    return 0.0


def current_first(ranked: list[int], answer: set[int], stale: set[int]) -> bool:
    """The newest statement is in the top K and above every stale statement returned."""
    top = ranked[:K]
    first_answer = next((i for i, pk in enumerate(top) if pk in answer), None)
    if first_answer is None:
        return False
    return all(i > first_answer for i, pk in enumerate(top) if pk in stale)


@dataclass
class Row:
    sums: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0] * 5))

    def add(self, bucket: str, r5: float, r10: float, ndcg: float, mrr: float) -> None:
        s = self.sums[bucket]
        s[0] += r5
        s[1] += r10
        s[2] += ndcg
        s[3] += mrr
        s[4] += 1

    def get(self, bucket: str) -> tuple[float, float, float, float, int]:
        s = self.sums.get(bucket)
        if not s or not s[4]:
            return (0.0, 0.0, 0.0, 0.0, 0)
        return (s[0] / s[4], s[1] / s[4], s[2] / s[4], s[3] / s[4], int(s[4]))


# ---------------------------------------------------------------- ingesting and asking


def ingest(data: ConversationSet, workspace, agent) -> tuple[dict[str, int], dict[str, int], float]:
    """Propose every turn through the write path; (turn id → the fact that holds it, outcomes, s)."""
    from memory.actors import Actor
    from memory.embeddings import embed_meanings
    from memory.models import Episode
    from memory.services.facts import FactInput, propose_fact
    from memory.services.tenancy import create_domain

    by = Actor.of_agent(agent)
    topics = [f"session {t.date}" for t in data.turns]
    texts = [f"{t.speaker}: {t.text}" for t in data.turns]
    meanings = embed_meanings(list(zip(topics, texts, strict=True)), batch_size=32, bulk=True)
    domains = {
        conv: create_domain(workspace=workspace, name=f"{data.name}-{conv}", by=Actor.system("eval"))
        for conv in dict.fromkeys(t.conv for t in data.turns)
    }
    fact_of: dict[str, int] = {}
    outcomes: dict[str, int] = defaultdict(int)
    episodes: dict[tuple[str, int], int] = {}
    index_in_session: dict[tuple[str, int], int] = defaultdict(int)
    began = time.perf_counter()
    for turn, topic, text, meaning in zip(data.turns, topics, texts, meanings, strict=True):
        key = (turn.conv, turn.session)
        if key not in episodes:
            episodes[key] = Episode.objects.create(
                workspace=workspace,
                agent=agent,
                kind="session",
                title=f"{data.name} {turn.conv} session {turn.session}",
            ).pk
        minute = index_in_session[key]
        index_in_session[key] += 1
        result = propose_fact(
            domain=domains[turn.conv],
            data=FactInput(
                topic=topic,
                content=text,
                memory_type="observation",
                observed_at=observed(turn, minute),
                episode_id=episodes[key],
                session_key=f"{data.name}-{turn.conv}-s{turn.session}",
            ),
            by=by,
            embedding=meaning,
        )
        fact_of[turn.id] = result.fact.pk
        outcomes[result.outcome] += 1
    return fact_of, dict(outcomes), time.perf_counter() - began


def rankers(agent, ablations: bool = False):
    """Each mode, and each voice alone (bench.eval.rankers); with `ablations`, hybrid with one part
    changed at a time (`_ablations`)."""
    from bench.eval import rankers as eval_rankers

    found = eval_rankers(agent)
    if ablations:
        hybrid = found["mode: hybrid"]
        for name, patch in _ablations().items():
            found[f"hybrid {name}"] = _patched(hybrid, patch)
    return found


def _patched(rank, patch):
    def ranked(q, v, repo=None):
        with patch():
            return rank(q, v, repo)

    return ranked


def _setting(target, name: str, value):
    """A context that sets `target.name` (a module attribute or a dict key) to `value`."""
    from contextlib import contextmanager

    @contextmanager
    def patch():
        is_dict = isinstance(target, dict)
        before = target[name] if is_dict else getattr(target, name)
        if is_dict:
            target[name] = value
        else:
            setattr(target, name, value)
        try:
            yield
        finally:
            if is_dict:
                target[name] = before
            else:
                setattr(target, name, before)

    return patch


def _weights(**changes):
    """A context that sets these voice weights in every intent."""
    from contextlib import contextmanager

    from memory.search.intent import WEIGHTS

    @contextmanager
    def patch():
        before = {intent: dict(w) for intent, w in WEIGHTS.items()}
        for w in WEIGHTS.values():
            w.update(changes)
        try:
            yield
        finally:
            for intent, w in before.items():
                WEIGHTS[intent].clear()
                WEIGHTS[intent].update(w)

    return patch


def _ablations():
    from memory.search import hybrid, voices
    from memory.search.intent import Intent

    return {
        "- graph": _weights(graph=0.0),
        "- recency": _weights(recency=0.0),
        "- lexical": _weights(lexical=0.0),
        "lexical 0.25": _weights(lexical=0.25),
        "- MMR": _setting(hybrid, "_mmr", lambda ranked, limit, *_: ranked[:limit]),
        "- current first": _setting(hybrid, "_current_first", lambda ranked, same: None),
        **{f"within {x}": _setting(hybrid, "CURRENT_WITHIN", x) for x in (0.0, 0.3, 0.7)},
        "coverage": _setting(hybrid, "LEXICAL_SCALE", "coverage"),
        "rrf": _setting(hybrid, "FUSION", "rrf"),
        "intent general": _setting(hybrid, "classify", lambda query: Intent.GENERAL),
        "graph gated": _setting(hybrid.GATES, "graph", 1.0),
        "fan-out 8": _setting(voices, "GRAPH_FANOUT", 8.0),
        "fan-out 4": _setting(voices, "GRAPH_FANOUT", 4.0),
    }


def evaluate(
    data: ConversationSet, agent, fact_of: dict[str, int], ablations: bool = False
) -> tuple[dict[str, Row], dict[str, list[bool]]]:
    from memory.embeddings import embed_texts

    vectors = embed_texts([q.question for q in data.questions])
    table: dict[str, Row] = {}
    first: dict[str, list[bool]] = {}
    for name, rank in rankers(agent, ablations).items():
        row = Row()
        hits: list[bool] = []
        for q, vector in zip(data.questions, vectors, strict=True):
            relevant = {fact_of[a] for a in q.answers}
            stale = {fact_of[s] for s in q.stale} - relevant
            ranked = rank(q.question, vector)
            scores = (
                recall_at(ranked, relevant, 5),
                recall_at(ranked, relevant, K),
                ndcg_at(ranked, relevant),
                mrr_at(ranked, relevant),
            )
            for bucket in ("all", q.type):
                row.add(bucket, *scores)
            if q.type == "latest":
                hits.append(current_first(ranked, relevant, stale))
        table[name] = row
        first[name] = hits
    return table, first


def report(name: str, table: dict[str, Row], first: dict[str, list[bool]]) -> None:
    buckets = ["all", *[t for t in TYPES if any(r.get(t)[4] for r in table.values())]]
    print(f"\nrecall@5 / recall@10 / nDCG@10 / MRR@10 — {name}")
    header = f"{'ranker':<22}" + "".join(
        f"{b + ' (' + str(table['mode: hybrid'].get(b)[4]) + ')':>30}" for b in buckets
    )
    print(header + f"{'current first':>16}")
    print("-" * (len(header) + 16))
    for ranker, row in table.items():
        cells = "".join(f"{' / '.join(f'{x:.3f}' for x in row.get(b)[:4]):>30}" for b in buckets)
        hits = first.get(ranker) or []
        current = f"{sum(hits)}/{len(hits)} {100 * sum(hits) / len(hits):.0f} %" if hits else "—"
        print(f"{ranker:<22}{cells}{current:>16}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("tune", "held-out", "all"), default="all")
    parser.add_argument("--set", nargs="*", default=None)
    parser.add_argument("--ablate", action="store_true", help="hybrid with one part changed at a time")
    from bench.common import chosen_sets, fresh_agent

    args = parser.parse_args(argv)
    names = chosen_sets(args.set, args.part, TUNE, HELD_OUT, lambda n: DATA / f"conv_{n}.jsonl")
    if not names:
        print("no conversation sets", file=sys.stderr)
        return 1

    import django

    django.setup()
    from django.db import connection

    from memory.search import voices

    for name in names:
        started = time.monotonic()
        data = load(name)
        workspace, agent = fresh_agent("conversations", "Conversations", "conversation-agent")
        fact_of, outcomes, seconds = ingest(data, workspace, agent)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_fact")
        voices._stats = None
        print(
            f"== conv_{name}: {len(data.turns)} turns ({len(data.turns) / seconds:.1f} writes/s: "
            + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
            + f"), {len(data.questions)} questions",
            flush=True,
        )
        table, first = evaluate(data, agent, fact_of, args.ablate)
        report(f"conv_{name}", table, first)
        print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
