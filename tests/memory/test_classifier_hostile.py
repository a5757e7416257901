"""The write classifier on hostile input (issue 33): one ordinary agent write must not pin a core.

Its readers were quadratic on repetitive text — 24 s of CPU for one 16,000-character "a a a …"
(the maximum fact length), holding the GIL all along, and /healthz stalled for 58 s while a second
such proposal was read. bench/hostile_text.py repeats every token class the readers know; here
each reader must be linear on all of it (16k against 1k), the classifier must read each text
against a topic of facts within a CPU budget, and two such proposals over the API must each cost
under a second of CPU while /healthz keeps answering. CPU time (time.thread_time /
process_time), not the wall clock that CI's other worker stretches.
"""

from __future__ import annotations

import gc
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from django.db import connections
from django.test import Client

from bench.hostile_text import MAX_FACT_CHARS, TOPIC_FACTS, repeated, texts
from memory import pair_model
from memory.classifier import (
    NEAREST_FACTS,
    READ_CHARS,
    Relation,
    Verdict,
    classify,
    classify_many,
    normalise,
    quantities,
    reading,
)
from memory.classifier.model_reading import NOT_READ
from memory.classifier.reading import COMPARE_STEPS, PROPOSAL_CHARS
from memory.classifier.verdict import close_spelling

READ_LIMIT_S = 0.25  # one proposal read against a topic's facts, at the maximum fact length
LINEAR_RATIO = 40  # 16x the text: a linear reader costs ~16x, a quadratic one ~256x
RATIO_FLOOR_S = 0.001  # below this a 1k reading is timer noise, not a base to scale from
REQUEST_CPU_S = 1.0
HEALTHZ_S = 1.0
SMALL, LARGE = 1_000, MAX_FACT_CHARS

CORPUS_SMALL, CORPUS_LARGE = texts(SMALL), texts(LARGE)


@contextmanager
def no_gc() -> Iterator[None]:
    """A collection of the whole test process (hundreds of thousands of objects) may land in any
    measurement; what is measured here is the reader's own work."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def cpu(fn: Callable[[], object], *, tries: int = 1, limit: float | None = None) -> float:
    """This thread's CPU seconds for fn(): the least of `tries` runs, and up to two more runs
    when over `limit` (a measurement only errs upwards)."""
    best = float("inf")
    for attempt in range(tries + 2):
        if attempt >= tries and (limit is None or best <= limit):
            break
        with no_gc():
            started = time.thread_time()
            fn()
            best = min(best, time.thread_time() - started)
    return best


def neighbour(text: str) -> str:
    """Another text of the same class and length: what a second proposal on the topic reads."""
    return text[1:] + "z"


def read_cold(text: str) -> Callable[[], object]:
    """Read `text` whole (no window), forgetting every earlier reading first."""

    def run() -> object:
        reading.forget_readings()
        return reading.read(text)

    return run


def propose(text: str) -> Callable[[], list[Verdict]]:
    """Classify `text` as the write path does: against the topic's facts and a neighbour of its
    own class (the first proposal), nearest first, with no reading cached."""
    items = [(fact, text, 0.8) for fact in TOPIC_FACTS] + [(neighbour(text), text, 0.95)]

    def run() -> list[Verdict]:
        reading.forget_readings()
        return classify_many(items, nearest=NEAREST_FACTS, model=pair_model.active())

    return run


# --- every reader is linear --------------------------------------------------------------------


def _readers() -> dict[str, Callable[[str], object]]:
    prepared = {
        f"quantities: {kind}": (lambda p: lambda t: p.sub("", t.lower()))(pattern)
        for kind, pattern in quantities.QTY_PATTERNS
    }
    return {
        "the whole reading": lambda t: read_cold(t)(),  # _prepare, _names, the quantities, the tokens…
        "normalise": normalise,
        **prepared,
    }


@pytest.mark.parametrize("label", sorted(CORPUS_LARGE))
def test_every_reader_is_linear_on_the_hostile_corpus(label):
    """Each reader, on the whole text (no window): 16x the characters costs under LINEAR_RATIO x
    the CPU. The patterns `wordnum`, `times` and `timesword` (unbounded runs of number words and
    of "1,1,1") made this ratio 300x and more."""
    small, large = CORPUS_SMALL[label], CORPUS_LARGE[label]
    slow = []
    for name, reader in _readers().items():
        base = max(cpu(lambda r=reader: r(small), tries=3), RATIO_FLOOR_S)
        spent = cpu(lambda r=reader: r(large), limit=base * LINEAR_RATIO)
        if spent > base * LINEAR_RATIO:
            slow.append(f"{name}: {spent * 1000:.1f} ms at {LARGE:,} characters, {spent / base:.0f}x {SMALL:,}")
    assert not slow, f"{label!r}: " + "; ".join(slow)


def test_no_pattern_holds_the_gil_for_long_on_what_it_reads():
    """A regular expression runs in C without releasing the GIL: each pattern's whole pass over a
    text's window (what the write path reads) stays within a few milliseconds, for every text."""
    patterns = [p for _, p in quantities.QTY_PATTERNS] + [reading.TOKEN, reading.RAW_WORD]
    worst = (0.0, "", "")
    for label, text in CORPUS_LARGE.items():
        window = reading.window(text).lower()
        for pattern in patterns:
            spent = cpu(lambda: pattern.sub("", window), limit=0.005)  # noqa: B023
            worst = max(worst, (spent, label, pattern.pattern[:40]))
    assert worst[0] < 0.005, f"{worst[0] * 1000:.1f} ms: {worst[2]!r} on {worst[1]!r}"


# --- the classifier's budget --------------------------------------------------------------------


@pytest.mark.parametrize("label", sorted(CORPUS_LARGE))
def test_a_hostile_proposal_is_read_against_its_topic_within_the_budget(label):
    """Every text of the corpus at the maximum fact length, read against a topic of ordinary facts
    and a first proposal of its own class: under READ_LIMIT_S of CPU, and roughly linear against
    the same at 1,000 characters."""
    spent = cpu(propose(CORPUS_LARGE[label]), limit=READ_LIMIT_S)
    assert spent < READ_LIMIT_S, f"{label!r}: {spent:.3f} s of CPU at {LARGE:,} characters"
    base = max(cpu(propose(CORPUS_SMALL[label]), tries=3), RATIO_FLOOR_S)
    assert spent < base * LINEAR_RATIO, f"{label!r}: {spent / base:.0f}x the CPU of {SMALL:,} characters"


def test_the_issue_s_three_texts_are_read_in_milliseconds():
    """The three texts of the issue ("a a a …": 24 s before; "1,1,1,…"; "every a …"), each read
    against the other proposal of its class: a few tens of milliseconds."""
    for unit in ("a ", "1,", "every a "):
        text = repeated(unit, LARGE)
        spent = cpu(lambda: classify(neighbour(text), text, 0.95), limit=0.1)  # noqa: B023
        assert spent < 0.1, f"{unit!r}: {spent:.3f} s"


def test_a_long_text_is_read_in_its_window_and_never_merged_or_superseded_on_it():
    """Past READ_CHARS a text is compared on its first READ_CHARS characters: what differs later is
    not seen, so a SAME or CONTRADICTS read there becomes UNSURE — a person decides."""
    body = " ".join(f"Step {i}: restart worker w{i} after the cache flush." for i in range(200))
    assert len(body) > READ_CHARS
    tail_changed = body + " Deploys happen on Tuesdays."
    verdict = classify(body + " Deploys happen on Fridays.", tail_changed, 0.99)
    assert verdict.kind == Relation.UNSURE, verdict
    assert f"first {READ_CHARS:,} characters" in verdict.reason
    head_changed = classify("Deploys happen on Tuesdays. " + body, "Deploys happen on Fridays. " + body, 0.99)
    assert head_changed.kind == Relation.UNSURE, head_changed  # a contradiction, but only in the window
    assert "`fridays` replaces `tuesdays`" in head_changed.reason
    assert classify(body, body.upper() + ".", 0.99).kind == Relation.SAME  # identical text: read whole


def test_a_comparison_past_its_steps_is_too_long_to_decide():
    """Two windows full of different values spend COMPARE_STEPS aligning them: the pair is neither
    merged nor superseded — UNSURE when the embeddings are close, else SEPARATE."""
    a = " ".join(f"id-{i}" for i in range(250))
    b = " ".join(f"key-{i}" for i in range(250))
    assert len(a) < READ_CHARS and len(b) < READ_CHARS and COMPARE_STEPS < 250 * 250
    close, far = classify(a, b, 0.9), classify(a, b, 0.3)
    assert close.kind == Relation.UNSURE and "too long to compare" in close.reason, close
    assert far.kind == Relation.SEPARATE and "too long to compare" in far.reason, far


def test_a_proposal_reads_only_the_nearest_live_facts_of_a_crowded_topic():
    """However many live facts a topic has, a proposal reads its NEAREST_FACTS closest (by
    cosine); the others are separate, not read — and the cost stays that of NEAREST_FACTS."""
    rng = random.Random(33)
    facts = [f"Service s{i} listens on port {8000 + i} and logs to /var/log/s{i}." for i in range(600)]
    items = [(fact, "Service s7 listens on port 9999 and logs to /var/log/s7.", rng.random()) for fact in facts]
    items[7] = (facts[7], items[7][1], 0.99)
    verdicts = classify_many(items, nearest=NEAREST_FACTS, model=pair_model.active())
    read = [v for v in verdicts if v is not NOT_READ]
    assert len(read) == NEAREST_FACTS
    assert verdicts[7].kind == Relation.CONTRADICTS, verdicts[7]
    nearest = sorted(range(len(items)), key=lambda i: -items[i][2])[:NEAREST_FACTS]
    assert {i for i, v in enumerate(verdicts) if v is not NOT_READ} == set(nearest)
    assert all(v.kind == Relation.SEPARATE for v in verdicts if v is NOT_READ)


def test_a_proposal_reads_at_most_proposal_chars_of_its_neighbours_windows():
    """Nearest first, as long as the windows fit in PROPOSAL_CHARS: a topic of many long facts
    costs what reading PROPOSAL_CHARS // READ_CHARS windows costs."""
    text = repeated("every a ", LARGE)
    items = [(repeated(f"w{i} ", LARGE), text, 0.9 - i / 1000) for i in range(NEAREST_FACTS)]
    verdicts = classify_many(items, nearest=NEAREST_FACTS, model=pair_model.active())
    read = [i for i, v in enumerate(verdicts) if v is not NOT_READ]
    assert read == list(range(PROPOSAL_CHARS // READ_CHARS))


def test_the_pair_model_reads_a_bounded_window_of_each_text():
    long = repeated("a ", LARGE)
    assert pair_model.bounded([(long, "b")]) == [(long[: pair_model.MAX_CHARS], "b")]
    assert pair_model.bounded([("short", "texts")]) == [("short", "texts")]


# --- linear rewrites that answer as before ------------------------------------------------------


def test_the_linear_spelling_check_answers_as_the_quadratic_one():
    def quadratic(a: str, b: str) -> bool:  # _close_spelling before issue 33
        if not (a.isalpha() and b.isalpha()) or min(len(a), len(b)) < 5 or max(len(a), len(b)) < 6 or a[0] != b[0]:
            return False
        if len(a) == len(b):
            diff = [i for i in range(len(a)) if a[i] != b[i]]
            return len(diff) == 1 or (
                len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
            )
        short, long = (a, b) if len(a) < len(b) else (b, a)
        return len(long) == len(short) + 1 and any(long[:i] + long[i + 1 :] == short for i in range(len(long)))

    rng = random.Random(1)
    for _ in range(20_000):
        a = "a" + "".join(rng.choice("ab") for _ in range(rng.randint(3, 8)))
        i = rng.randint(1, len(a))
        for b in (
            a[:i] + rng.choice("ab") + a[i:],
            a[:i] + a[i + 1 :],
            "a" + "".join(rng.choice("ab") for _ in range(8)),
        ):
            assert close_spelling(a, b) == quadratic(a, b), (a, b)


def test_the_word_before_a_match_is_the_last_word_of_what_precedes_it():
    rng = random.Random(2)
    for _ in range(5_000):
        text = "".join(rng.choice(["a", "b", " ", "\n", "\t", "/", "\x1c"]) for _ in range(rng.randint(0, 12)))
        at = rng.randint(0, len(text))
        words = text[:at].split()
        assert quantities.word_before(text, at) == (words[-1] if words else "")


# --- end to end: two hostile proposals over the API ---------------------------------------------


def _warm_up(api) -> None:
    """Load the embedding model (and the pair model, when on) before anything is measured."""
    from memory.embeddings import embed_texts

    embed_texts(["warm up"])
    if pair_model.enabled():
        pair_model.probabilities([("warm", "up")])
    api.post(
        "/api/v1/facts/",
        {
            "domain": "architecture",
            "topic": "warm-up",
            "content": "Deploys happen on Tuesdays.",
            "memory_type": "convention",
        },
        format="json",
    )


class HealthProbe(threading.Thread):
    """GET /healthz every 20 ms from another thread (its own database connection) until stopped,
    keeping the slowest answer's wall time."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.slowest = 0.0
        self.answers: list[int] = []

    def run(self) -> None:
        client = Client()
        try:
            while not self.stop.is_set():
                started = time.perf_counter()
                self.answers.append(client.get("/healthz").status_code)
                self.slowest = max(self.slowest, time.perf_counter() - started)
                self.stop.wait(0.02)
        finally:
            connections.close_all()


@pytest.mark.parametrize(
    "second_reading", [False, pytest.param(True, marks=pytest.mark.second_reading)], ids=["rules", "pair-model"]
)
def test_two_16k_repetitive_proposals_on_one_topic_each_cost_under_a_second_of_cpu(world, api, second_reading):
    """The issue's case through POST facts/: for "a a a …", "1,1,1,…", "every a …" and the mix of
    every class, two 16,000-character proposals on one topic each take ≤ 1 s of this process's
    CPU (the second took 101.8 s before), while /healthz, asked from another thread all along,
    answers within a second (it stalled 57.8 s)."""
    _warm_up(api)
    probe = HealthProbe()
    probe.start()
    costs = []
    try:
        for n, label in enumerate(("a word", "1,1,1", "every a", "a mix of every class")):
            first = CORPUS_LARGE[label]
            for content in (first, neighbour(first)):
                body = {
                    "domain": "architecture",
                    "topic": f"hostile-{n}",
                    "content": content,
                    "memory_type": "decision",
                }
                started = time.process_time()
                response = api.post("/api/v1/facts/", body, format="json")
                costs.append((time.process_time() - started, label, response.json().get("outcome")))
                assert response.status_code == 201, response.json()
    finally:
        probe.stop.set()
        probe.join(timeout=30)
    worst = max(costs)
    print(f"CPU per proposal: {', '.join(f'{c:.3f} s ({label}: {outcome})' for c, label, outcome in costs)}")
    print(f"slowest /healthz of {len(probe.answers)}: {probe.slowest:.3f} s")
    assert worst[0] <= REQUEST_CPU_S, f"{worst[1]!r}: {worst[0]:.2f} s of CPU ({costs})"
    assert probe.answers and set(probe.answers) <= {200, 503}, probe.answers
    assert probe.slowest < HEALTHZ_S, f"/healthz took {probe.slowest:.2f} s during the proposals"


def test_a_proposal_on_a_topic_of_many_long_hostile_facts_costs_under_a_second(world, api):
    """The topic already holds 60 live facts of 16,000 hostile characters each, none read yet in
    this process: a further proposal reads the windows of its NEAREST_FACTS nearest, not all 60."""
    from memory.embeddings import embed_texts
    from tests.factories import FactFactory

    _warm_up(api)
    labels = sorted(CORPUS_LARGE)[:60]
    assert len(labels) > NEAREST_FACTS
    contents = [CORPUS_LARGE[label] for label in labels]
    for content, vector in zip(contents, embed_texts([f"crowded: {c}" for c in contents], bulk=True), strict=True):
        FactFactory(domain=world.architecture, topic="crowded", content=content, embedding=vector)
    reading.forget_readings()
    body = {
        "domain": "architecture",
        "topic": "crowded",
        "content": repeated("every a ", LARGE),
        "memory_type": "decision",
    }
    started = time.process_time()
    response = api.post("/api/v1/facts/", body, format="json")
    spent = time.process_time() - started
    print(f"CPU of a proposal beside {len(labels)} long hostile facts: {spent:.3f} s ({response.json()['outcome']})")
    assert response.status_code == 201, response.json()
    assert spent <= REQUEST_CPU_S, f"{spent:.2f} s of CPU"
