"""The benchmarks' labelled sets: read, checked and pinned in one place.

Every set is JSONL under bench/data/, one object a line; its file name says its kind:

- `recall/search_<set>.jsonl`, a search set for bench.eval (`search_set`). Rows are told apart by
  `row`: `fact` (key, domain, repo or null, topic, memory_type, veracity, age_days: days before
  "today", content), `supersession` (old and new fact key, reason), `episode` (kind, title, facts:
  fact keys, optional key) and `query` (id, category, query, relevant: {fact key: grade 1–3},
  optional repo passed to search). `tune` is the tuning set (Larkspur, a billing SaaS); G to L were
  written after the ranking's design froze, by authors who never saw it.
- `recall/conv_<set>.jsonl`, long conversations for bench.eval_conversations (`conversation_rows`):
  `turn` and `question` rows, told apart by `kind`.
- `recall/preamble_<set>.jsonl`, dispatch tasks for bench.eval_preamble (`preamble_rows`): rows
  `policy` (key, domain, rule), `fact` (key, domain, topic, content, memory_type, restates: the key
  of the policy it says again in other words, or null) and `task` (id, task, relevant: the facts
  that help it, never a restatement; empty when nothing stored helps).
- `writes/pairs_<author>.jsonl`, labelled write pairs (`pairs`): topic, old, new, label
  (same, contradicts, separate), category; from round 6 on also new_topic and kind (the relation).
- `writes/stream_<name>.jsonl`, what an agent stores over weeks, for bench.eval_streams
  (`stream_rows`): i, observed_at, topic, content, role and `of` (the earlier line it changes).

Loading a set validates it (`DataError` names file and line). bench/data/MANIFEST.sha256 pins the
digest of every file the validator checks, so a changed label is a visible data change, never a
silent one: `python -m bench.datasets` validates everything and checks the manifest;
`--write-manifest` records a deliberate change.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, NamedTuple

DATA = Path(__file__).resolve().parent / "data"
RECALL = DATA / "recall"
WRITES = DATA / "writes"
MANIFEST = DATA / "MANIFEST.sha256"

# Mirrors memory.models' choices (tests/test_bench_data.py holds them equal) without importing Django.
MEMORY_TYPES = ("commitment", "event", "observation", "decision", "convention", "procedure", "profile")
VERACITIES = ("human_stated", "agent_inferred", "imported", "tool_generated")
EPISODE_KINDS = ("session", "meeting", "incident", "run")
QUERY_CATEGORIES = ("identifier", "paraphrase", "recent", "connected")
QUESTION_TYPES = ("single", "multi", "temporal", "latest")
LABELS = ("same", "contradicts", "separate")
RELATIONS = ("update", "contradiction", "restatement", "reported", "related", "similar", "unrelated")
STREAM_ROLES = ("distinct", "restatement", "update", "contradiction")
OPTIONAL_TEXT = (str, type(None))

# Write pairs. DEV: authors A (engineering notes) and B (conversations, tickets, runbooks,
# decisions), what the rules of `memory.classifier.classify` were written against. TRAIN: what the
# pair model (memory/pair_model.py) is trained on; each round's held-out authors, once scored on
# their round's frozen design, joined it. Authors with streams (TF, X, Y, Z) give pairs through
# `stream_pairs`. TUNE_AUTHORS: the second reading's thresholds are chosen on them, each with a
# probability from a model trained without its fold (bench.eval_writes --tune); A and B never are.
# HELD_OUT_AUTHORS (round 8): HE (conversations, personal memory) and HF (a container-port
# operator's engineering), written by two authors who saw neither the classifier, the model nor
# any other pairs, scored once on the frozen design; never read while developing.
DEV_AUTHORS = ("a", "b")
TRAIN_AUTHORS = (
    "a", "b", "c", "d", "e", "f", "k", "l", "m", "n", "o", "p", "u", "v", "x", "y", "z", "q", "r", "tf",
    "ha", "hb", "tg1", "tg2", "tg3", "tg4",
)  # fmt: skip
TUNE_AUTHORS = ("c", "d", "e", "f", "k", "l", "m", "n")
HELD_OUT_AUTHORS = ("he", "hf")


class DataError(ValueError):
    """A data file is malformed: the message names the file and line of each fault."""


class SetMissing(DataError):
    """No file holds the asked-for set (a held-out set not written yet)."""


class Pair(NamedTuple):
    topic: str
    old: str
    new: str
    label: str
    category: str
    author: str
    new_topic: str = ""  # the new side's topic when the author gave one ("" = `topic`)
    kind: str = ""  # one of RELATIONS when the author gave it

    @property
    def across_topics(self) -> bool:
        return bool(self.new_topic) and self.new_topic != self.topic


@dataclass(frozen=True)
class SearchSet:
    """A search set as bench.eval loads it; rows keep the file's order (it fixes the primary keys)."""

    name: str
    facts: list[dict[str, Any]]
    supersessions: list[tuple[str, str, str]]
    episodes: list[dict[str, Any]]
    queries: list[dict[str, Any]]

    def superseded_keys(self) -> set[str]:
        return {old for old, _new, _reason in self.supersessions}


# ---------------------------------------------------------------- loading


def search_sets() -> list[str]:
    return sorted(p.stem.removeprefix("search_") for p in RECALL.glob("search_*.jsonl"))


def search_set(name: str) -> SearchSet:
    """The search set `name` (tune, g, …), validated. Raises SetMissing or DataError."""
    rows = _load(RECALL / f"search_{name}.jsonl")
    by_row: dict[str, list[dict[str, Any]]] = {"fact": [], "supersession": [], "episode": [], "query": []}
    for row in rows:
        by_row[row["row"]].append({k: v for k, v in row.items() if k != "row"})
    return SearchSet(
        name,
        by_row["fact"],
        [(s["old"], s["new"], s["reason"]) for s in by_row["supersession"]],
        by_row["episode"],
        by_row["query"],
    )


def conversation_rows(name: str) -> list[dict[str, Any]]:
    """The turns and questions of conversation set `name` (ca, cb, …), validated."""
    return _load(RECALL / f"conv_{name}.jsonl")


def preamble_rows(name: str) -> list[dict[str, Any]]:
    """The policies, facts and tasks of preamble set `name` (pa, pb, pc), validated."""
    return _load(RECALL / f"preamble_{name}.jsonl")


def stream_rows(name: str) -> list[dict[str, Any]]:
    """The lines of write stream `name` (w_mixed, hg_chat, …), validated."""
    return _load(WRITES / f"stream_{name}.jsonl")


def pairs(authors: Iterable[str]) -> list[Pair]:
    """The labelled pairs of `authors`, in order: an author's pairs file, or the pairs drawn from
    its streams (`stream_pairs`). Raises SetMissing if an author has neither."""
    out: list[Pair] = []
    for author in authors:
        if streams := sorted(WRITES.glob(f"stream_{author}_*.jsonl")):
            for path in streams:
                out.extend(stream_pairs(_load(path), author))
            continue
        for row in _load(WRITES / f"pairs_{author}.jsonl"):
            out.append(
                Pair(row["topic"], row["old"], row["new"], row["label"], row["category"], author,
                     row.get("new_topic", ""), row.get("kind", ""))
            )  # fmt: skip
    return out


def dev_pairs() -> list[Pair]:
    return pairs(DEV_AUTHORS)


def train_pairs() -> list[Pair]:
    return pairs(TRAIN_AUTHORS)


def held_out_pairs() -> list[Pair]:
    """Scored once per frozen design: never tune on what they give. Raises SetMissing."""
    return pairs(HELD_OUT_AUTHORS)


_TOKEN = re.compile(r"[a-z0-9]+")


def stream_pairs(rows: list[dict[str, Any]], author: str, negatives: int = 2) -> list[Pair]:
    """Labelled pairs from a stream's rows: each restatement with the line it restates (same),
    each update or contradiction with the line it changes (contradicts), and for every line the
    `negatives` earlier lines outside its chain that share the most words with it (separate:
    statements that look alike and say something else, the hard case of a conversation)."""
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
                    rows[j]["topic"], rows[j]["content"], row["content"], "separate", "look-alike", author,
                    row["topic"], "similar",
                )
            )  # fmt: skip
    return out


# ---------------------------------------------------------------- validation


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _read(path: Path) -> list[dict[str, Any]]:
    """The file's rows, each with its line number under `_line` (blank lines skipped)."""
    if not path.exists():
        raise SetMissing(f"{_name(path)} is not written")
    rows = []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as error:
            raise DataError(f"{_name(path)}:{n}: not JSON ({error})") from None
        if not isinstance(row, dict):
            raise DataError(f"{_name(path)}:{n}: not an object")
        rows.append({**row, "_line": n})
    return rows


def _load(path: Path) -> list[dict[str, Any]]:
    rows = _read(path)
    if errors := _check(path, rows):
        raise DataError("\n".join(errors))
    return [{k: v for k, v in row.items() if k != "_line"} for row in rows]


class _Faults:
    """Collects a file's faults as `file:line: message`."""

    def __init__(self, path: Path) -> None:
        self.name = _name(path)
        self.errors: list[str] = []

    def add(self, row: dict[str, Any] | None, message: str) -> None:
        self.errors.append(f"{self.name}:{'-' if row is None else row['_line']}: {message}")

    def fields(self, row: dict[str, Any], required: dict[str, Any], optional: dict[str, Any] | None = None) -> bool:
        """Each required field present with its type, optional ones typed when present, no other
        field. A type is a Python type (or tuple of them), or a tuple of allowed strings."""
        optional = optional or {}
        ok = True
        for name in row.keys() - {"_line"} - required.keys() - optional.keys():
            self.add(row, f"unknown field {name!r}")
            ok = False
        for name, want in [*required.items(), *((k, v) for k, v in optional.items() if k in row)]:
            if name not in row:
                self.add(row, f"missing field {name!r}")
                ok = False
            elif not _fits(row[name], want):
                self.add(row, f"{name} {row[name]!r} is not {_describe(want)}")
                ok = False
        return ok

    def kind(self, row: dict[str, Any], field: str, kinds: tuple[str, ...]) -> bool:
        """Whether the row's discriminating `field` is one of `kinds` (its other fields are checked by kind)."""
        if _fits(row.get(field), kinds):
            return True
        self.add(row, f"{field} {row.get(field)!r} is not {_describe(kinds)}")
        return False

    def unique(self, rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any], what: str) -> None:
        seen: set[Any] = set()
        for row in rows:
            value = key(row)
            if value in seen:
                self.add(row, f"duplicate {what} {value!r}")
            seen.add(value)


def _fits(value: Any, want: Any) -> bool:
    if isinstance(want, tuple) and want and isinstance(want[0], str):
        return value in want
    if want is str:
        return isinstance(value, str) and bool(value.strip())
    if want is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, want)


def _describe(want: Any) -> str:
    if isinstance(want, tuple) and want and isinstance(want[0], str):
        return f"one of {', '.join(want)}"
    if isinstance(want, tuple):
        return " or ".join(t.__name__ for t in want)
    return "a non-empty string" if want is str else f"a {want.__name__}"


def _check_search(rows: list[dict[str, Any]], faults: _Faults) -> None:
    kinds = ("fact", "supersession", "episode", "query")
    good = [r for r in rows if faults.kind(r, "row", kinds)]
    fact_fields = {
        "row": kinds, "key": str, "domain": str, "repo": OPTIONAL_TEXT, "topic": str,
        "memory_type": MEMORY_TYPES, "veracity": VERACITIES, "age_days": int, "content": str,
    }  # fmt: skip
    facts = [r for r in good if r["row"] == "fact" and faults.fields(r, fact_fields)]
    faults.unique(facts, lambda r: r["key"], "fact key")
    keys = {r["key"] for r in facts}
    for r in facts:
        if r["age_days"] < 0:
            faults.add(r, "age_days is negative")
    olds: set[str] = set()
    for r in good:
        if r["row"] == "supersession" and faults.fields(r, {"row": kinds, "old": str, "new": str, "reason": str}):
            for end in ("old", "new"):
                if r[end] not in keys:
                    faults.add(r, f"{end} {r[end]!r} is no fact's key")
            if r["old"] == r["new"]:
                faults.add(r, "a fact supersedes itself")
            if r["old"] in olds:
                faults.add(r, f"{r['old']!r} is superseded twice")
            olds.add(r["old"])
    episodes = [
        r
        for r in good
        if r["row"] == "episode"
        and faults.fields(r, {"row": kinds, "kind": EPISODE_KINDS, "title": str, "facts": list}, {"key": str})
    ]
    faults.unique([r for r in episodes if "key" in r], lambda r: r["key"], "episode key")
    for r in episodes:
        if not r["facts"] or any(k not in keys for k in r["facts"]) or len(set(r["facts"])) != len(r["facts"]):
            faults.add(r, "facts must be distinct keys of facts in this set")
    queries = [
        r
        for r in good
        if r["row"] == "query"
        and faults.fields(
            r,
            {"row": kinds, "id": str, "category": QUERY_CATEGORIES, "query": str, "relevant": dict},
            {"repo": str},
        )
    ]
    faults.unique(queries, lambda r: r["id"], "query id")
    for r in queries:
        if not r["relevant"]:
            faults.add(r, "no relevant fact")
        for key, grade in r["relevant"].items():
            if key not in keys:
                faults.add(r, f"relevant {key!r} is no fact's key")
            elif key in olds:
                faults.add(r, f"relevant {key!r} is superseded")
            if grade not in (1, 2, 3) or isinstance(grade, bool):
                faults.add(r, f"grade of {key!r} is {grade!r}, not 1, 2 or 3")
    if not facts or not queries:
        faults.add(None, "a search set needs facts and queries")


def _check_conversation(rows: list[dict[str, Any]], faults: _Faults) -> None:
    kinds = ("turn", "question")
    good = [r for r in rows if faults.kind(r, "kind", kinds)]
    turns = [
        r
        for r in good
        if r["kind"] == "turn"
        and faults.fields(
            r, {"kind": kinds, "conv": str, "session": int, "date": str, "id": str, "speaker": str, "text": str}
        )
    ]
    questions = [
        r
        for r in good
        if r["kind"] == "question"
        and faults.fields(
            r,
            {"kind": kinds, "id": str, "conv": str, "type": QUESTION_TYPES, "question": str, "answers": list},
            {"stale": list},
        )
    ]
    faults.unique(turns + questions, lambda r: r["id"], "id")
    for r in turns:
        try:
            date.fromisoformat(r["date"])
        except ValueError:
            faults.add(r, f"date {r['date']!r} is not YYYY-MM-DD")
    ids = {r["id"] for r in turns}
    convs = {r["conv"] for r in turns}
    for r in questions:
        if r["conv"] not in convs:
            faults.add(r, f"conv {r['conv']!r} has no turns")
        if not r["answers"]:
            faults.add(r, "no answer")
        for ref in [*r["answers"], *r.get("stale", [])]:
            if ref not in ids:
                faults.add(r, f"{ref!r} is no turn's id")


def _check_pairs(rows: list[dict[str, Any]], faults: _Faults) -> None:
    good = [
        r
        for r in rows
        if faults.fields(
            r,
            {"topic": str, "old": str, "new": str, "label": LABELS, "category": str},
            {"new_topic": str, "kind": RELATIONS},
        )
    ]
    faults.unique(good, lambda r: (r["old"], r["new"]), "pair")


def _check_stream(rows: list[dict[str, Any]], faults: _Faults) -> None:
    for n, r in enumerate(rows):
        if not faults.fields(
            r,
            {"i": int, "observed_at": str, "topic": str, "content": str, "role": STREAM_ROLES, "of": (int, type(None))},
        ):
            continue
        if r["i"] != n:
            faults.add(r, f"i is {r['i']}, not {n}: lines are numbered in order from 0")
        try:
            datetime.fromisoformat(r["observed_at"].replace("Z", "+00:00"))
        except ValueError:
            faults.add(r, f"observed_at {r['observed_at']!r} is not an ISO time")
        if r["of"] is not None and not 0 <= r["of"] < n:
            faults.add(r, f"of {r['of']} is not an earlier line")
        if (r["role"] == "distinct") != (r["of"] is None):
            faults.add(r, "`of` is for restatements, updates and contradictions, and only for them")


def _check_preamble(rows: list[dict[str, Any]], faults: _Faults) -> None:
    kinds = ("policy", "fact", "task")
    good = [r for r in rows if faults.kind(r, "row", kinds)]
    policies = [
        r
        for r in good
        if r["row"] == "policy" and faults.fields(r, {"row": kinds, "key": str, "domain": str, "rule": str})
    ]
    facts = [
        r
        for r in good
        if r["row"] == "fact"
        and faults.fields(
            r,
            {"row": kinds, "key": str, "domain": str, "topic": str, "content": str, "memory_type": MEMORY_TYPES,
             "restates": (str, type(None))},
        )
    ]  # fmt: skip
    tasks = [
        r
        for r in good
        if r["row"] == "task" and faults.fields(r, {"row": kinds, "id": str, "task": str, "relevant": list})
    ]
    faults.unique(policies + facts, lambda r: r["key"], "key")
    faults.unique(tasks, lambda r: r["id"], "task id")
    rules = {r["key"] for r in policies}
    restating = {r["key"] for r in facts if r["restates"] is not None}
    for r in facts:
        if r["restates"] is not None and r["restates"] not in rules:
            faults.add(r, f"restates {r['restates']!r}, no policy's key")
    keys = {r["key"] for r in facts}
    for r in tasks:
        for ref in r["relevant"]:
            if ref not in keys:
                faults.add(r, f"{ref!r} is no fact's key")
            elif ref in restating:
                faults.add(r, f"{ref!r} restates a policy: it is never relevant")


_CHECKS: dict[tuple[str, str], Callable[[list[dict[str, Any]], _Faults], None]] = {
    ("recall", "search_"): _check_search,
    ("recall", "preamble_"): _check_preamble,
    ("recall", "conv_"): _check_conversation,
    ("writes", "pairs_"): _check_pairs,
    ("writes", "stream_"): _check_stream,
}


def _check(path: Path, rows: list[dict[str, Any]]) -> list[str]:
    faults = _Faults(path)
    for (folder, prefix), check in _CHECKS.items():
        if path.parent.name == folder and path.name.startswith(prefix):
            if not rows:
                faults.add(None, "empty")
            check(rows, faults)
            return faults.errors
    return [f"{faults.name}: not a known kind of set ({', '.join(f'{f}/{p}*.jsonl' for f, p in _CHECKS)})"]


def data_files() -> list[Path]:
    """Every set the validator checks: the JSONL files under bench/data/."""
    return sorted(DATA.rglob("*.jsonl"))


def validate(path: Path) -> list[str]:
    """Every fault of one data file (none: an empty list)."""
    try:
        return _check(path, _read(path))
    except DataError as error:
        return [str(error)]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_lines() -> list[str]:
    """The manifest the files on disk make, in `sha256sum` format (check with `sha256sum -c` in bench/data)."""
    return [f"{digest(p)}  {p.relative_to(DATA).as_posix()}" for p in data_files()]


def _by_file(lines: list[str]) -> dict[str, str]:
    """{file: sha256} from `sha256sum` lines."""
    out = {}
    for line in lines:
        if line.strip():
            sha, name = line.split("  ", 1)
            out[name] = sha
    return out


def manifest_faults() -> list[str]:
    """How MANIFEST.sha256 and the files on disk differ (none: an empty list)."""
    if not MANIFEST.exists():
        return [f"{MANIFEST.name} is missing: python -m bench.datasets --write-manifest"]
    recorded = _by_file(MANIFEST.read_text().splitlines())
    actual = _by_file(manifest_lines())
    faults = [f"{name}: not in {MANIFEST.name}" for name in actual.keys() - recorded.keys()]
    faults += [f"{name}: in {MANIFEST.name} but not on disk" for name in recorded.keys() - actual.keys()]
    faults += [f"{name}: sha256 differs from {MANIFEST.name}" for name in actual.keys() & recorded.keys()
               if actual[name] != recorded[name]]  # fmt: skip
    return sorted(faults)


def main() -> int:
    parser = argparse.ArgumentParser(description="validate every labelled set and check MANIFEST.sha256")
    parser.add_argument("--write-manifest", action="store_true", help="record the files' digests (after validating)")
    args = parser.parse_args()
    faults = [fault for path in data_files() for fault in validate(path)]
    if not faults and args.write_manifest:
        MANIFEST.write_text("".join(f"{line}\n" for line in manifest_lines()))
    faults += manifest_faults()
    print("\n".join(faults) or f"{len(data_files())} sets valid, {MANIFEST.name} matches")
    return 1 if faults else 0


if __name__ == "__main__":
    raise SystemExit(main())
