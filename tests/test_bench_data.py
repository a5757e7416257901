"""The benchmarks' labelled sets (bench/data/, read by bench.datasets) are valid and pinned by the
manifest: a set edited by hand, or a row that no longer fits, fails here before a benchmark runs."""

import json

import pytest

from bench import datasets
from memory.models import MemoryType, Veracity


@pytest.mark.parametrize("path", datasets.data_files(), ids=lambda p: p.relative_to(datasets.DATA).as_posix())
def test_every_labelled_set_is_valid(path):
    assert datasets.validate(path) == []


def test_the_manifest_pins_every_labelled_set():
    assert datasets.manifest_faults() == []


def test_every_search_set_and_pair_author_loads():
    for name in datasets.search_sets():
        assert datasets.search_set(name).queries
    authors = {*datasets.TRAIN_AUTHORS, *datasets.TUNE_AUTHORS, *datasets.HELD_OUT_AUTHORS}
    assert {p.author for p in datasets.pairs(sorted(authors))} == authors


def test_the_allowed_labels_are_the_models_choices():
    assert set(datasets.MEMORY_TYPES) == set(MemoryType.values)
    assert set(datasets.VERACITIES) == set(Veracity.values)


def test_the_validator_names_each_bad_row_by_file_and_line(tmp_path):
    rows = [
        {"row": "fact", "key": "a", "domain": "ops", "repo": None, "topic": "t", "memory_type": "event",
         "veracity": "human_stated", "age_days": 3, "content": "The deploy ran."},
        {"row": "fact", "key": "a", "domain": "ops", "repo": None, "topic": "t", "memory_type": "rumour",
         "veracity": "human_stated", "age_days": 3, "content": "The deploy failed."},
        {"row": "supersession", "old": "a", "new": "gone", "reason": "r"},
        {"row": "query", "id": "q1", "category": "recent", "query": "deploy", "relevant": {"a": 4}},
    ]  # fmt: skip
    (tmp_path / "recall").mkdir()
    path = tmp_path / "recall" / "search_bad.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))

    faults = datasets.validate(path)

    assert any(f.startswith("recall/search_bad.jsonl:2: memory_type 'rumour'") for f in faults), faults
    assert any(f.startswith("recall/search_bad.jsonl:3: new 'gone' is no fact's key") for f in faults), faults
    assert any(f.startswith("recall/search_bad.jsonl:4: grade of 'a' is 4") for f in faults), faults
    assert any("superseded" in f for f in faults), faults


def test_a_set_not_written_is_missing_not_empty():
    with pytest.raises(datasets.SetMissing):
        datasets.pairs(["no_such_author"])
