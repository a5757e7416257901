"""Batch writes over HTTP (issue 19): facts/s from one client through a live gunicorn, embeddings
included, posting `POST facts/batch/` with BENCH_BATCH items each against `POST facts/` one by one.

In its own database (ENGRAM_DB_NAME=engram_bench_writes, recreated). The same generated facts
(bench.corpus) for both paths, each its own slice, written into an empty workspace after a warm-up
(every worker's encoders loaded). The rate limit is lifted for the server: this measures the
write path, not the throttle (a batch counts one request per item against it).

Issue 38 asks the batches to reach ≥ 90 % of the ceiling the same run measures: the facts/s this
machine could give were every core that other work left busy on the batches all the time, from
their CPU seconds (CpuUse says how). Printed beside it: the ceiling as printed before (every core,
whatever used it: the same on a quiet machine), and the rate of embedding the same texts alone,
the one part of the work no design avoids. The load average after each phase says how busy the
machine was: on a busy one the ratio is an upper bound (other work fills the idle time).

    .venv/bin/python -m bench.batch_writes          # `make bench` runs it after bench.run

Options (environment): BENCH_BATCH_FACTS=2000  BENCH_SINGLE_FACTS=300  BENCH_BATCH=100
  BENCH_WRITES_PORT=8767  BENCH_WORKERS=1
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_bench_writes")
os.environ.setdefault("BENCH_PORT", os.environ.get("BENCH_WRITES_PORT", "8767"))
os.environ.setdefault("BENCH_WORKERS", "1")  # one client: one request at a time
os.environ.setdefault("ENGRAM_THROTTLE_RATE", "10000000/min")

from django.db import connection  # noqa: E402

from bench import corpus  # noqa: E402
from bench.common import busy_cpu_seconds  # noqa: E402
from bench.run import PORT, setup, start_server, stop_server  # noqa: E402  (sets Django up)

BATCH_FACTS = int(os.environ.get("BENCH_BATCH_FACTS", "2000"))
SINGLE_FACTS = int(os.environ.get("BENCH_SINGLE_FACTS", "300"))
BATCH = int(os.environ.get("BENCH_BATCH", "100"))
TARGET = 100.0  # facts/s from one client, embeddings included (issue 19)
CEILING_SHARE = 0.9  # of the ceiling the same run measures (issue 38)


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


def process_cpu_seconds(wanted: Callable[[list[str], str], bool]) -> dict[int, float]:
    """The CPU seconds used so far (utime + stime, every thread) by each running process for which
    `wanted(stat fields after the name, command line)` holds, by pid; {} without a Linux /proc."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        rest = text[text.rindex(")") + 2 :].split()
        if wanted(rest, command):
            found[int(stat.parent.name)] = (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return found


class ProcessCpu:
    """The CPU seconds the processes `wanted` picks use between start() and stop(), read every
    SAMPLE seconds meanwhile, so that a process ending in between (a PostgreSQL backend whose
    connection closed) keeps what it used until its last reading; one starting in between counts
    whole. `own` is what the readings cost this client (not the work's)."""

    SAMPLE = 1.0

    def __init__(self, wanted: Callable[[list[str], str], bool]) -> None:
        self.wanted = wanted
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.own = 0.0
        self.done = threading.Event()

    def read(self) -> None:
        self.last.update(process_cpu_seconds(self.wanted))

    def start(self) -> None:
        self.first = process_cpu_seconds(self.wanted)
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while not self.done.wait(self.SAMPLE):
            self.read()
        self.own = time.thread_time()

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        self.read()
        return sum(used - self.first.get(pid, 0.0) for pid, used in self.last.items())


def work_processes(server: subprocess.Popen) -> tuple[ProcessCpu, ProcessCpu]:
    """This work's processes: the web server (gunicorn's process group) and the PostgreSQL
    backends connected to the bench database (their titles name it)."""
    database = connection.settings_dict["NAME"]
    group = str(server.pid)
    return (
        ProcessCpu(lambda stat, _: stat[2] == group),  # field 5 of stat: the process group
        ProcessCpu(lambda _, command: command.startswith("postgres: ") and f" {database} " in command),
    )


class CpuUse:
    """What a phase cost in CPU, and the most this machine could have written with that cost.

    The ceiling: the facts/s reached were every core this machine could give the work busy on it
    all the time. CPU seconds are read from /proc: the whole machine's busy time, this work's own
    (the web server's process group, the PostgreSQL backends of the bench database, this client)
    and, by difference, other work's (other benchmarks, test runs, PostgreSQL's background
    processes). The cores the work could have had are the machine's minus what other work used,
    so ceiling = (cores × wall − other CPU) / (this work's CPU per fact) / wall, and rate / ceiling
    = this work's CPU / (its CPU + the machine's idle time): the share of the free core-time the
    work kept busy. On a quiet machine that is the figure this bench printed before (cores /
    the machine's CPU per fact), still printed beside it; on a busy one other work fills idle
    time the work left, so the ratio is an upper bound and its other-work share is printed."""

    def __init__(self, server: subprocess.Popen) -> None:
        self.web, self.postgres = work_processes(server)

    def __enter__(self) -> CpuUse:
        self.web.start()
        self.postgres.start()
        self.began = (busy_cpu_seconds(), time.process_time(), time.monotonic())
        return self

    def __exit__(self, *exc: object) -> None:
        self.ended = (busy_cpu_seconds(), time.process_time(), time.monotonic())
        self.used = (self.web.stop(), self.postgres.stop())
        self.sampling = self.web.own + self.postgres.own

    def figures(self, facts: int) -> dict[str, float] | None:
        """CPU seconds per 100 facts (machine, server, postgres, client, other), the phase's wall
        time, and the ceilings (facts/s): `free` (the cores other work left) and `machine` (as
        before: every core, whatever used it)."""
        (busy0, own0, wall0), (busy1, own1, wall1) = self.began, self.ended
        if busy0 is None or busy1 is None:
            return None
        cores, wall = os.cpu_count() or 1, wall1 - wall0
        (web, pg), busy, own = self.used, busy1 - busy0, own1 - own0 - self.sampling
        work = web + pg + own
        other = max(busy - work, 0.0)
        per = 100 / facts
        return {
            "machine": busy * per,
            "web": web * per,
            "postgres": pg * per,
            "client": own * per,
            "other": other * per,
            "wall": wall,
            "other_share": other / (cores * wall),
            "busy_share": busy / (cores * wall),
            "free": (cores * wall - other) / wall / (work / facts),
            "every_core": cores * facts / busy,
        }

    def report(self, facts: int, rate: float) -> str:
        """The phase's CPU per 100 facts, split, and the rate beside its ceiling (issue 38: ≥ 90 %)."""
        f = self.figures(facts)
        if f is None:
            return "CPU use: not measurable here (no Linux /proc)"
        cores = os.cpu_count() or 1
        ratio = rate / f["free"]
        return (
            f"CPU per 100 facts: {f['machine']:.2f} s on the whole machine: this work "
            f"{f['web'] + f['postgres'] + f['client']:.2f} (web server {f['web']:.2f}, PostgreSQL backends "
            f"{f['postgres']:.2f}, this client {f['client']:.2f}), other work {f['other']:.2f} "
            f"({f['other_share']:.0%} of the machine); {cores} cores {f['busy_share']:.0%} busy\n"
            f"ceiling: at most {f['free']:.1f} facts/s on this machine were every core that other work left "
            f"busy on this work all the time (every core, whatever used it, as printed before: "
            f"{f['every_core']:.1f})\n"
            f"batch writes {rate:.1f} facts/s = {ratio:.0%} of the ceiling; target ≥ {CEILING_SHARE:.0%}: "
            + ("met" if ratio >= CEILING_SHARE else "NOT met")
            + (" (other work used over a quarter of the machine: an upper bound)" if f["other_share"] > 0.25 else "")
        )


def embedding_alone(facts: list[corpus.GeneratedFact]) -> float:
    """Facts/s of embedding the same texts alone, in this process, with the server's bulk encoder
    and settings (memory.services.batch._embed_items): one part of the batch path no design avoids."""
    from memory.embeddings import embed_meanings, get_encoder

    get_encoder(bulk=True)  # loading the model is not embedding time
    began = time.monotonic()
    for first in range(0, len(facts), BATCH):
        embed_meanings([(f.topic, f.content) for f in facts[first : first + BATCH]], batch_size=32, bulk=True)
    return len(facts) / (time.monotonic() - began)


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
        with CpuUse(proc) as batch_cpu:
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
    print(batch_cpu.report(len(batch), batch_rate))
    alone = embedding_alone(batch)
    print(
        f"embedding the same texts alone (this process, the bulk encoder): {alone:.1f} facts/s; "
        f"the batches reach {batch_rate / alone:.0%} of it  load {load_average()}"
    )
    print(
        f"batch speed-up ×{batch_rate / single_rate:.1f}; target ≥ {TARGET:g} facts/s: "
        + ("met" if batch_rate >= TARGET else "NOT met")
    )


if __name__ == "__main__":
    main()
