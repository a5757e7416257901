"""The preamble's facts (issue 39, point 2): are they small and relevant? On labelled dispatch tasks.

A set (bench/data/recall/preamble_X.jsonl, bench.datasets) holds a workspace's active policies,
its facts — some of which say a policy again in other words (`restates`) — and tasks, each with the
facts that would help it (none for some: nothing stored helps them). Every policy and fact is
stored directly (no write path: the set says what is stored), the facts embedded as the write path
embeds them, in a database of its own (ENGRAM_DB_NAME=engram_eval_preamble, wiped per set); then
each task's preamble is built (`build_preamble`, as POST preamble/ builds it) and its fact list read.

Printed per set: facts listed per task; **precision** (listed facts that help the task / listed);
recall (helpful facts listed / min(helpful, 5)); restatements listed (facts that only say a policy
again); and on the tasks nothing stored helps, the share that still got a fact.

    python -m bench.eval_preamble [--part tune|held-out|all] [--set NAME ...]

TUNE: PA (a freight-tracking SaaS's engineering team). HELD_OUT: PB (a household's personal
assistant: personal facts, preferences, values that changed) and PC (a design agency's chat
history and client meetings). All three were written on 2026-12-04 by authors who saw neither the
preamble's code nor each other's sets.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_eval_preamble")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ENGRAM_RECALL_MODE", "sync")

TUNE = ("pa",)
HELD_OUT = ("pb", "pc")
MAX_FACTS = 5


@dataclass
class Score:
    """Sums over a set's tasks."""

    tasks: int = 0
    listed: int = 0
    helpful_listed: int = 0
    helpful_reachable: int = 0
    restatements: int = 0
    empty_tasks: int = 0
    empty_with_facts: int = 0

    @property
    def precision(self) -> float:
        return self.helpful_listed / self.listed if self.listed else 1.0

    @property
    def recall(self) -> float:
        return self.helpful_listed / self.helpful_reachable if self.helpful_reachable else 1.0

    def line(self, name: str) -> str:
        empty = f"{self.empty_with_facts}/{self.empty_tasks}"
        return (
            f"{name:<10}{self.tasks:>6}{self.listed / max(self.tasks, 1):>9.2f}{self.precision:>11.3f}"
            f"{self.recall:>9.3f}{self.restatements:>14}{empty:>18}"
        )


HEADER = (
    f"{'set':<10}{'tasks':>6}{'listed':>9}{'precision':>11}{'recall':>9}{'restatements':>14}{'no-help w/ facts':>18}"
)


def load(name: str) -> tuple[Any, dict[int, str], list[dict[str, Any]]]:
    """Store set `name` in a fresh database; returns (agent, fact key by id, rows)."""
    from django.db import connection, transaction

    from agents.services import create_agent
    from bench.common import recreate_database
    from bench.datasets import preamble_rows
    from memory.actors import Actor
    from memory.embeddings import embed_texts, fact_text
    from memory.models import Fact, Policy
    from memory.search import voices
    from memory.services.tenancy import create_domain, get_or_create_role, get_or_create_workspace

    rows = preamble_rows(name)
    recreate_database()
    by = Actor.system("eval")
    facts = [r for r in rows if r["row"] == "fact"]
    vectors = embed_texts([fact_text(f["topic"], f["content"]) for f in facts])
    with transaction.atomic():
        workspace = get_or_create_workspace(slug="eval", name="Evaluation", by=by)
        role = get_or_create_role(workspace=workspace, name="evaluator", by=by)
        domains = {}
        for row in rows:
            if row["row"] != "task" and row["domain"] not in domains:
                domains[row["domain"]] = create_domain(workspace=workspace, name=row["domain"], by=by)
        for row in rows:
            if row["row"] == "policy":
                Policy.objects.create(workspace=workspace, domain=domains[row["domain"]], rule=row["rule"])
        keys = {}
        for fact, vector in zip(facts, vectors, strict=True):
            stored = Fact.objects.create(
                workspace=workspace,
                domain=domains[fact["domain"]],
                topic=fact["topic"],
                content=fact["content"],
                memory_type=fact["memory_type"],
                veracity="human_stated",
                confidence=1.0,
                embedding=vector,
                origin="eval",
            )
            keys[stored.pk] = fact["key"]
        agent, _ = create_agent(workspace=workspace, name="evaluator", role=role, by=by)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_fact")
    voices._stats = None  # read the fresh statistics
    return agent, keys, rows


def score(name: str, *, verbose: bool = False) -> Score:
    from memory.search.preamble import build_preamble

    agent, keys, rows = load(name)
    restating = {r["key"] for r in rows if r["row"] == "fact" and r["restates"] is not None}
    result = Score()
    for task in (r for r in rows if r["row"] == "task"):
        listed = [keys[f.pk] for f in build_preamble(agent=agent, task=task["task"]).facts]
        helpful = set(task["relevant"])
        result.tasks += 1
        result.listed += len(listed)
        result.helpful_listed += len(helpful & set(listed))
        result.helpful_reachable += min(len(helpful), MAX_FACTS)
        result.restatements += len(restating & set(listed))
        if not helpful:
            result.empty_tasks += 1
            result.empty_with_facts += bool(listed)
        if verbose:
            marks = " ".join(("+" if k in helpful else "R" if k in restating else "-") + k for k in listed)
            print(f"  {task['id']}: {task['task'][:70]!r} want {sorted(helpful)} got {marks}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="preamble precision on labelled dispatch tasks")
    parser.add_argument("--part", choices=("tune", "held-out", "all"), default="tune")
    parser.add_argument("--set", nargs="*", help="set names (pa, pb, pc); overrides --part")
    parser.add_argument("--verbose", action="store_true", help="each task's listed facts")
    args = parser.parse_args()
    import django

    django.setup()
    names = args.set or {"tune": TUNE, "held-out": HELD_OUT, "all": TUNE + HELD_OUT}[args.part]
    started = time.monotonic()
    lines = []
    for name in names:
        lines.append(score(name, verbose=args.verbose).line(name))
    print(HEADER)
    print("\n".join(lines))
    print(f"done in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
