"""Batch writes over HTTP (issue 19): facts/s from one client through a live gunicorn, embeddings
included, posting `POST facts/batch/` with BENCH_BATCH items each against `POST facts/` one by one.

In its own database (ENGRAM_DB_NAME=engram_bench_writes, recreated). The same generated facts
(bench.corpus) for both paths, each its own slice, written into an empty workspace after a warm-up
(every worker's encoders loaded). The rate limit is lifted for the server: this measures the
write path, not the throttle (a batch counts one request per item against it).

    .venv/bin/python -m bench.batch_writes          # `make bench` runs it after bench.run

Options (environment): BENCH_BATCH_FACTS=2000  BENCH_SINGLE_FACTS=300  BENCH_BATCH=100
  BENCH_WRITES_PORT=8767  BENCH_WORKERS=1
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_bench_writes")
os.environ.setdefault("BENCH_PORT", os.environ.get("BENCH_WRITES_PORT", "8767"))
os.environ.setdefault("BENCH_WORKERS", "1")  # one client: one request at a time
os.environ.setdefault("ENGRAM_THROTTLE_RATE", "10000000/min")

from bench import corpus  # noqa: E402
from bench.common import busy_cpu_seconds, postgres_cpu_seconds  # noqa: E402
from bench.run import PORT, setup, start_server, stop_server  # noqa: E402  (sets Django up)

BATCH_FACTS = int(os.environ.get("BENCH_BATCH_FACTS", "2000"))
SINGLE_FACTS = int(os.environ.get("BENCH_SINGLE_FACTS", "300"))
BATCH = int(os.environ.get("BENCH_BATCH", "100"))
TARGET = 100.0  # facts/s from one client, embeddings included (issue 19)


def body_of(fact: corpus.GeneratedFact) -> dict[str, Any]:
    return {
        "domain": fact.domain,
        "repo": fact.repo,
        "topic": fact.topic,
        "content": fact.content,
        "memory_type": fact.memory_type,
        "veracity": fact.veracity,
    }


def post(path: str, body: Any, key: str) -> tuple[int, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{PORT}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
        return response.status, json.loads(response.read())


def one_by_one(key: str, facts: list[corpus.GeneratedFact]) -> tuple[float, Counter[str]]:
    outcomes: Counter[str] = Counter()
    began = time.monotonic()
    for fact in facts:
        status, answer = post("/api/v1/facts/", body_of(fact), key)
        outcomes[answer["outcome"] if status == 201 else f"error {status}"] += 1
    return len(facts) / (time.monotonic() - began), outcomes


def batched(key: str, facts: list[corpus.GeneratedFact]) -> tuple[float, Counter[str]]:
    outcomes: Counter[str] = Counter()
    began = time.monotonic()
    for first in range(0, len(facts), BATCH):
        status, answer = post(
            "/api/v1/facts/batch/", {"items": [body_of(f) for f in facts[first : first + BATCH]]}, key
        )
        if status != 200:
            raise RuntimeError(f"facts/batch/ answered {status}: {answer}")
        for result in answer["results"]:
            outcomes[result["outcome"] if result["status"] == 201 else result["error"]["code"]] += 1
    return len(facts) / (time.monotonic() - began), outcomes


class CpuUse:
    """The CPU seconds a phase used on the whole machine, in PostgreSQL, and in this client."""

    def __enter__(self) -> CpuUse:
        self.began = (busy_cpu_seconds(), postgres_cpu_seconds(), time.process_time(), time.monotonic())
        return self

    def __exit__(self, *exc: object) -> None:
        self.ended = (busy_cpu_seconds(), postgres_cpu_seconds(), time.process_time(), time.monotonic())

    def report(self, facts: int) -> str:
        """Per 100 facts: the machine's CPU seconds and their split, and the most this machine
        could write if every core were busy all the time on this work."""
        (busy0, pg0, own0, wall0), (busy1, pg1, own1, wall1) = self.began, self.ended
        if busy0 is None or busy1 is None or pg0 is None or pg1 is None:
            return "CPU use: not measurable here (no Linux /proc)"
        per = 100 / facts
        busy, postgres, client = (busy1 - busy0) * per, (pg1 - pg0) * per, (own1 - own0) * per
        cores = os.cpu_count() or 1
        return (
            f"CPU per 100 facts: {busy:.2f} s on the whole machine (PostgreSQL {postgres:.2f}, this client "
            f"{client:.2f}, the web server and the rest {busy - postgres - client:.2f}); {cores} cores "
            f"{(busy1 - busy0) / (wall1 - wall0) / cores:.0%} busy; at most {cores * 100 / busy:.0f} facts/s "
            "on this machine were every core busy all the time"
        )


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


TOPIC_SIZE = int(os.environ.get("BENCH_TOPIC_FACTS", "1000"))
TOPIC_PROBES = int(os.environ.get("BENCH_TOPIC_PROBES", "40"))


def p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] * 1000


def timed_proposals(key: str, facts: list[corpus.GeneratedFact], **where: str) -> list[float]:
    """Each fact proposed alone (POST facts/) with `where` (domain, topic) overriding its own."""
    seconds = []
    for fact in facts:
        body = {**body_of(fact), "repo": None, **where}
        began = time.monotonic()
        status, answer = post("/api/v1/facts/", body, key)
        seconds.append(time.monotonic() - began)
        if status != 201:
            raise RuntimeError(f"facts/ answered {status}: {answer}")
    return seconds


# Statements people wrote to be distinct from each other (the tuning streams of bench/eval_streams.py
# that hold nothing else: 400, two speakers), for the rate of distinct statements into one topic.
DISTINCT_STREAMS = ("w_distinct", "s_distinct")


def post_batch(key: str, items: list[dict[str, Any]], outcomes: Counter[str]) -> None:
    """POST facts/batch/ with `items`, counting each item's outcome (or error code) in `outcomes`."""
    status, answer = post("/api/v1/facts/batch/", {"items": items}, key)
    if status != 200:
        raise RuntimeError(f"facts/batch/ answered {status}: {answer}")
    for result in answer["results"]:
        outcomes[result["outcome"] if result["status"] == 201 else result["error"]["code"]] += 1


def distinct_rate(key: str) -> None:
    """Issue 34: 300 distinct statements into one topic through POST facts/batch/ (the target is
    ≥ 30 facts/s), in a domain of their own: statements people wrote to be distinct
    (DISTINCT_STREAMS), not the bench's templated corpus, whose look-alike facts with other values
    are mostly asked about (topic_cost)."""
    texts = [
        json.loads(raw)["content"]
        for name in DISTINCT_STREAMS
        for raw in (ROOT / "bench" / "data" / "writes" / f"stream_{name}.jsonl").read_text().splitlines()
        if raw.strip()
    ][:300]
    began = time.monotonic()
    outcomes: Counter[str] = Counter()
    for first in range(0, len(texts), BATCH):
        items = [
            {"domain": "distinct-domain", "topic": "conversation", "content": text, "memory_type": "observation"}
            for text in texts[first : first + BATCH]
        ]
        post_batch(key, items, outcomes)
    print(
        f"{len(texts)} distinct statements people wrote into one topic (POST facts/batch/): "
        f"{len(texts) / (time.monotonic() - began):.1f} facts/s {dict(outcomes)} (target ≥ 30)",
        flush=True,
    )


def topic_cost(key: str, pool: list[corpus.GeneratedFact]) -> None:
    """Issue 34: what a proposal costs does not grow with its topic. TOPIC_SIZE statements of the
    bench's corpus are written into one topic through POST facts/batch/ (facts/s), then
    TOPIC_PROBES further statements are proposed one by one into that topic and as many into an
    empty topic of an empty domain: p50 over HTTP, and their ratio (the target is ≤ 2)."""
    fill, probes = pool[:TOPIC_SIZE], pool[TOPIC_SIZE : TOPIC_SIZE + 2 * TOPIC_PROBES]
    began = time.monotonic()
    outcomes: Counter[str] = Counter()
    for first in range(0, len(fill), BATCH):
        items = [
            {**body_of(f), "repo": None, "domain": "architecture", "topic": "one-busy-topic"}
            for f in fill[first : first + BATCH]
        ]
        post_batch(key, items, outcomes)
        if first + BATCH == 300:
            print(
                f"300 statements of the corpus into one topic (POST facts/batch/): {300 / (time.monotonic() - began):.1f} facts/s",
                flush=True,
            )
    print(
        f"{len(fill)} statements into one topic: {len(fill) / (time.monotonic() - began):.1f} facts/s {dict(outcomes)}"
    )
    busy = timed_proposals(key, probes[:TOPIC_PROBES], domain="architecture", topic="one-busy-topic")
    empty = timed_proposals(key, probes[TOPIC_PROBES:], domain="empty-domain", topic="empty-topic")
    print(
        f"a proposal into a topic of {len(fill)} live facts: p50 {p50(busy):.1f} ms; into an empty topic of an empty "
        f"domain: p50 {p50(empty):.1f} ms; ratio {p50(busy) / p50(empty):.2f} (target ≤ 2)"
    )


def main() -> None:
    print(
        f"batch writes: one client, gunicorn {os.environ['BENCH_WORKERS']} worker(s); {BATCH_FACTS} facts in "
        f"batches of {BATCH} vs {SINGLE_FACTS} one by one",
        flush=True,
    )
    key, ctx = setup()
    from memory.actors import Actor
    from memory.services.tenancy import create_domain

    create_domain(workspace=ctx["workspace"], name="empty-domain", by=Actor.system("bench"))
    create_domain(workspace=ctx["workspace"], name="distinct-domain", by=Actor.system("bench"))
    pool = list(corpus.facts(BATCH_FACTS + SINGLE_FACTS + 40))
    warm, single, batch = pool[:40], pool[40 : 40 + SINGLE_FACTS], pool[40 + SINGLE_FACTS :]
    proc = start_server()
    try:
        for _ in range(int(os.environ["BENCH_WORKERS"])):  # both encoders of every worker loaded
            batched(key, warm[:20])
            one_by_one(key, warm[20:25])
        single_rate, single_outcomes = one_by_one(key, single)
        single_load = load_average()
        with CpuUse() as batch_cpu:
            batch_rate, batch_outcomes = batched(key, batch)
        batch_load = load_average()
        distinct_rate(key)
        topic_cost(key, list(corpus.facts(TOPIC_SIZE + 2 * TOPIC_PROBES, start=BATCH_FACTS + SINGLE_FACTS + 40)))
    finally:
        stop_server(proc)
    # The load average after each run: the figures are only comparable on an equally busy machine.
    print(f"one by one (POST facts/):         {single_rate:7.1f} facts/s  {dict(single_outcomes)}  load {single_load}")
    print(
        f"batches of {BATCH} (POST facts/batch/): {batch_rate:7.1f} facts/s  {dict(batch_outcomes)}  load {batch_load}"
    )
    print(batch_cpu.report(len(batch)))
    print(
        f"batch speed-up ×{batch_rate / single_rate:.1f}; target ≥ {TARGET:g} facts/s: "
        + ("met" if batch_rate >= TARGET else "NOT met")
    )


if __name__ == "__main__":
    main()
