"""memory.classifier (issue 34, point 6) is plain Python: it imports no Django, reads its words from
its data files and its second reading's thresholds from the pair model's card."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, fields
from pathlib import Path

import memory.classifier
from memory import pair_model
from memory.classifier import NEVER, RELATED_COSINE, SECOND_READING, SecondReading, classify_many, shipped_thresholds

ROOT = Path(__file__).resolve().parents[2]

# Imports the package and classifies a pair with `django` unimportable (a finder that refuses it).
NO_DJANGO = """
import sys

class NoDjango:
    def find_spec(self, name, path=None, target=None):
        if name == "django" or name.startswith("django."):
            raise ImportError(f"memory.classifier imported {name}")
        return None

sys.meta_path.insert(0, NoDjango())
import memory.classifier as c  # which imports every module of the package

verdict = c.classify("Logs are kept for 30 days.", "Logs are kept for 90 days.", 0.93)
many = c.classify_many([("Logs are kept for 30 days.", "Logs are kept for 90 days.", 0.93)], nearest=c.NEAREST_FACTS)
print(verdict.kind.value, many[0].kind.value, sorted(m for m in sys.modules if m.split(".")[0] == "django"))
"""


def test_the_classifier_imports_and_runs_without_django():
    done = subprocess.run(
        [sys.executable, "-c", NO_DJANGO], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["contradicts", "contradicts", "[]"]


def test_the_package_data_is_there_and_read():
    names = {p.name for p in (Path(memory.classifier.__file__).parent / "data").iterdir()}
    assert {"stop.txt", "polar.json", "units.json", "synonyms.json", "phrases.json"} <= names


def test_the_thresholds_are_the_cards():
    card = json.loads(pair_model.CARD.read_text())["second_reading"]
    assert shipped_thresholds(pair_model.CARD) == shipped_thresholds() == SECOND_READING
    assert asdict(SECOND_READING) == {k: NEVER if v == "never" else v for k, v in card["thresholds"].items()}
    assert all({"round", "date", "chosen_by", "figures"} <= set(entry) for entry in card["history"])
    assert SecondReading.never() == SecondReading(*(NEVER,) * len(fields(SecondReading)))
    # the relatedness floor the write path reads down to is the one the card's last round chose
    assert card["history"][-1].get("related_cosine", RELATED_COSINE) == RELATED_COSINE


def test_the_model_is_given_not_looked_up():
    """classify_many asks the `model` it is given, only for the pairs the rules may be wrong about,
    and the rules alone decide without one."""
    asked: list[list[tuple[str, str]]] = []

    def model(pairs):
        asked.append(list(pairs))
        return [(1.0, 0.0, 0.0) for _ in pairs]

    items = [("Logs are kept for 30 days.", "Logs are kept in S3 for audits.", 0.75), ("A.", "B.", 0.1)]
    rules = classify_many(items)
    assert [v.kind.value for v in rules] == ["unsure", "separate"] and asked == []
    revised = classify_many(items, model=model)
    assert asked == [[items[0][:2]]]  # the far-apart pair the rules call separate is not asked
    assert revised[0].reason.startswith("same meaning: read together") and revised[1] == rules[1]
