"""The words the write classifier knows, read once at import from memory/classifier/data/.

Plain-text lists (`*.txt`: whitespace-separated words, `#` comment lines) become frozensets; the
tables (`*.json`) keep the order they are written in, which the quantity patterns rely on (their
alternatives are tried longest first, ties in the file's order; a key listed twice keeps its last
value). Editing a file changes verdicts: `make eval-writes` measures the classifier on the
labelled pairs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"


def _words(name: str) -> frozenset[str]:
    lines = (DATA / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(word for line in lines if not line.startswith("#") for word in line.split())


def _table(name: str) -> Any:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


def _folded(table: dict[str, list[str]]) -> dict[str, str]:
    """Each variant to its key, in the file's order (a later key wins a variant listed twice)."""
    return {variant: key for key, variants in table.items() for variant in variants}


STOP = _words("stop")
WEAK = _words("weak")
ADDITIVE = _words("additive")
UPDATE = _words("update")
NEGATORS = _words("negators")
ORDER_WORDS = _words("order")
KNOWN_NAMES = _words("known_names")
ENVS = _words("envs")
DURATION_PREPOSITIONS = _words("duration_prepositions")
CONTRASTS = _words("contrasts")
HEDGES = _words("hedges")
AUXILIARIES = _words("auxiliaries")
COPULAS = _words("copulas")
LIKE_SUBJECTS = _words("like_subjects")
QUALIFIERS = _words("qualifiers")

# Negative and positive poles of the same predicate: their parity is what a text asserts.
_polar = _table("polar")
POLAR: dict[str, tuple[str, int]] = {}
for _axis in _polar["axes"]:
    POLAR.update({w: (_axis["axis"], 1) for w in _axis["plus"]})
    POLAR.update({w: (_axis["axis"], -1) for w in _axis["minus"]})
ATTITUDES = frozenset(_polar["attitudes"])
# Upper (-1) and lower (+1) bounds agree with each other only, never with a flip of polarity.
BOUND: dict[str, int] = _table("bounds")

# Abbreviations, spellings and synonyms, folded to one key; phrases are tuples of words.
PHRASES: dict[tuple[str, ...], str] = {tuple(v.split()): k for v, k in _folded(_table("phrases")).items()}
MAX_PHRASE = max(len(p) for p in PHRASES)
SYNONYMS: dict[str, str] = _folded(_table("synonyms"))
IRREGULAR: dict[str, str] = _table("irregular")
DAYS: dict[str, str] = _table("days")
MONTHS: dict[str, int] = _table("months")

_numbers = _table("numbers")
NUMBER_VALUES: dict[str, int] = _numbers["values"]
SCALES: dict[str, int] = _numbers["scales"]
TIMES: dict[str, int] = _numbers["times"]  # once, twice, thrice
FREQ_WORDS: dict[str, float] = _numbers["frequency_words"]  # per day

_units = _table("units")  # to seconds, bytes, metres, the currency's unit, a fraction
SECONDS: dict[str, float] = _units["seconds"]
BYTES: dict[str, float] = _units["bytes"]
METRES: dict[str, float] = _units["metres"]
MONEY: dict[str, float] = _units["money"]
PERCENT: dict[str, float] = _units["percent"]
