"""Quantities in canonical units (the write classifier's first pass over a text): "60 s" = "one
minute", "twice a day" = "every 12 hours", "80%" = "0.8", dates, clock times and cron lines.

`extract_quantities` replaces each quantity of a lower-cased text by a placeholder (`§A`, `§B`…)
that memory.classifier.reading reads as one token. Every pattern is linear in its input (issue 33:
tests/memory/test_classifier_hostile.py times them on bench/hostile_text.py's worst cases).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from memory.classifier.vocabulary import (
    BYTES,
    DURATION_PREPOSITIONS,
    FREQ_WORDS,
    METRES,
    MONEY,
    MONTHS,
    NUMBER_VALUES,
    PERCENT,
    SCALES,
    SECONDS,
    TIMES,
)


@dataclass(frozen=True)
class Qty:
    dim: str  # time, size, length, money, percent, freq, clock, date, count
    value: float
    noun: str  # what a bare count counts ("replica"), or ""
    surface: str

    def agrees(self, other: Qty) -> bool:
        if self.dim != other.dim and not self.compatible(other):
            return False
        if self.dim == "date":
            return _dates_agree(self.value, other.value)
        a, b = self.value, other.value
        # sizes: 1 GB ≈ 1024 MB; durations and rates: 30 days ≈ a month, 12 months = a year
        tolerance = {"size": 0.05, "time": 0.02, "freq": 0.02}.get(self.dim, 1e-6)
        return math.isclose(a, b, rel_tol=tolerance, abs_tol=1e-9)

    def compatible(self, other: Qty) -> bool:
        if self.dim == other.dim:
            return self.dim != "count" or not (self.noun and other.noun) or self.noun == other.noun
        dims = {self.dim, other.dim}
        # "80%" and a bare "0.75" are both fractions
        return dims == {"percent", "count"} and min(self.value, other.value) <= 1 and not (self.noun or other.noun)


def _dates_agree(a: float, b: float) -> bool:
    ya, ma, da = int(a) // 10000, int(a) // 100 % 100, int(a) % 100
    yb, mb, db = int(b) // 10000, int(b) // 100 % 100, int(b) % 100
    return (ya == yb or not ya or not yb) and ma == mb and (da == db or not da or not db)


_NUM = r"\d[\d,]*(?:\.\d+)?"
# Where a pattern may start at every digit of "1,1,1,…" (at each word boundary) and fail only after
# the number, an unbounded number would be read again from each of its digits: quadratic (issue 33).
# 24 digits and commas: more than any count of times a real text says.
_SHORT_NUM = r"\d[\d,]{0,23}(?:\.\d+)?"
# At most six words before the last ("twenty five", "a hundred"): unbounded, every word of "a a a …"
# started a match that read to the end of the run before failing — quadratic (issue 33).
_WORDNUM = r"(?:(?:a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)[- ]?){0,6}(?:hundred|thousand|million|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|dozen)"
_UNIT_WORDS = sorted(
    [*SECONDS, *BYTES, *METRES, "percent", "pct", "per cent", "dollars", "dollar", "euros", "euro", "usd", "eur"],
    key=len,
    reverse=True,
)
_UNIT = "|".join(re.escape(u) for u in _UNIT_WORDS)
_TIME_UNIT = "|".join(re.escape(u) for u in sorted(SECONDS, key=len, reverse=True))
_NOT_IN_WORD = r"(?<![\w.#/@:-])"
QTY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("cron", re.compile(r"`?(\d{1,2}|\*) (\d{1,2}|\*) \* \* \*`?")),
    ("iso", re.compile(_NOT_IN_WORD + r"(\d{4})-(\d{2})-(\d{2})(?![\w-])")),
    (
        "date",
        re.compile(
            r"\b(?:(\d{1,2})(?:st|nd|rd|th)? ("
            + "|".join(MONTHS)
            + r")\.?|("
            + "|".join(MONTHS)
            + r")\.? (\d{1,2})(?:st|nd|rd|th)?)(?:,? (\d{4}))?(?:\s?-\s?(\d{1,2})\b(?!:))?(?![\w:])"
        ),
    ),
    (
        "month",
        re.compile(
            r"\b(?:until|till|before|after|in|by|from|through|since|of|end of) (january|february|march|april|june|july|august|september|october|november|december)\b"
        ),
    ),
    ("clock", re.compile(_NOT_IN_WORD + r"(\d{1,2}):(\d{2})(?:\s?([ap])\.?m\.?\b)?")),
    ("clock12", re.compile(_NOT_IN_WORD + r"(\d{1,2})\s?([ap])\.?m\.?(?![\w])")),
    ("midnight", re.compile(r"\b(midnight|noon|midday)\b")),
    (
        "times",
        re.compile(
            r"\b(once|twice|thrice|("
            + _SHORT_NUM
            + r"|"
            + _WORDNUM
            + r")\s?(?:times|x)) (?:a|an|per|every|each) ("
            + _TIME_UNIT
            + r")\b"
        ),
    ),
    (
        "every",
        re.compile(
            r"\b(?:every|each) (?:("
            + _NUM
            + r"|"
            + _WORDNUM
            + r"|other) )?("
            + _TIME_UNIT
            + r"|morning|evening|night|weekday)\b"
        ),
    ),
    (
        "timesword",
        re.compile(
            r"\b(once|twice|thrice|("
            + _SHORT_NUM
            + r"|"
            + _WORDNUM
            + r")\s?(?:times|x)) ("
            + "|".join(FREQ_WORDS)
            + r")\b"
        ),
    ),
    ("freqword", re.compile(r"\b(" + "|".join(FREQ_WORDS) + r")\b")),
    (
        "quarter",
        re.compile(r"\b(three quarters|a quarter|one quarter|half|a half) (?:of )?(?:an? )?(" + _UNIT + r")\b"),
    ),
    ("money", re.compile(r"([$€£])\s?(" + _NUM + r")(k|m)?\b")),
    ("num", re.compile(_NOT_IN_WORD + r"(" + _NUM + r")(k\b)?\s?(" + _UNIT + r"|%)?(?:\b|(?<=%))(?![-/.]\w)")),
    ("wordnum", re.compile(r"\b(" + _WORDNUM + r")(?:[- ](" + _UNIT + r"))?\b")),
    ("per", re.compile(r"(?:\bper |/|\b(?:a|an) )(" + _TIME_UNIT + r")\b")),
]


def _parse_number(text: str) -> float | None:
    text = text.replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        pass
    total, current = 0.0, 0.0
    seen = False
    for word in re.split(r"[- ]+", text):
        if word in ("a", "an"):
            continue
        elif word in NUMBER_VALUES:
            current += NUMBER_VALUES[word]
            seen = True
        elif word in SCALES:
            current = (current or 1) * SCALES[word]
            seen = True
            if SCALES[word] >= 1000:
                total, current = total + current, 0.0
        elif word == "other":
            current = 2
            seen = True
        else:
            return None
    return total + current if seen else None


def _unit_quantity(value: float, unit: str | None, surface: str, noun: str = "") -> Qty:
    unit = (unit or "").lower()
    if unit in SECONDS:
        return Qty("time", value * SECONDS[unit], "", surface)
    if unit in BYTES:
        return Qty("size", value * BYTES[unit], "", surface)
    if unit in METRES:
        return Qty("length", value * METRES[unit], "", surface)
    if unit in PERCENT:
        return Qty("percent", value * 0.01, "", surface)
    if unit in MONEY:
        return Qty("money", value, "", surface)
    return Qty("count", value, noun, surface)


def _mark(index: int) -> str:
    """A placeholder no quantity pattern can match again (they all read lower case)."""
    letters = ""
    while True:
        index, digit = divmod(index, 26)
        letters = chr(65 + digit) + letters
        if not index:
            return "§" + letters


def unmark(mark: str) -> int:
    index = 0
    for c in mark[1:]:
        index = index * 26 + ord(c) - 65
    return index


def extract_quantities(text: str) -> tuple[str, list[Qty]]:
    """Replace every quantity in lower-cased `text` by a placeholder (`§A`, `§B`…) and return them
    in placeholder order."""
    found: list[Qty] = []

    def keep(*qtys: Qty) -> str:
        marks = []
        for q in qtys:
            found.append(q)
            marks.append(f" {_mark(len(found) - 1)} ")
        return "".join(marks)

    for kind, pattern in QTY_PATTERNS:
        text = pattern.sub(functools.partial(_quantity_match, kind, keep=keep), text)
    return text, found


def word_before(text: str, at: int) -> str:
    """The last whitespace-separated word of `text[:at]` ("" if none): `text[:at].split()[-1]`
    without splitting the whole prefix again at every match (quadratic on "a day a day …")."""
    end = at
    while end and text[end - 1].isspace():
        end -= 1
    start = end
    while start and not text[start - 1].isspace():
        start -= 1
    return text[start:end]


def _quantity_match(kind: str, m: re.Match[str], keep: Callable[..., str]) -> str:
    s = m.group(0).strip()
    if kind == "cron":
        minute, hour = m.group(1), m.group(2)
        if minute.isdigit() and hour.isdigit():
            return keep(Qty("freq", 1.0, "", s), Qty("clock", int(hour) * 60 + int(minute), "", s))
        return m.group(0)
    if kind == "iso":
        return keep(Qty("date", int(m.group(1)) * 10000 + int(m.group(2)) * 100 + int(m.group(3)), "", s))
    if kind == "date":
        day = m.group(1) or m.group(4)
        month = MONTHS[(m.group(2) or m.group(3)).lower()]
        if (m.group(3) or "").lower() == "may" and not m.group(4):
            return m.group(0)
        year = int(m.group(5)) if m.group(5) else 0
        qtys = [Qty("date", year * 10000 + month * 100 + int(day), "", s)]
        if m.group(6):
            qtys.append(Qty("date", year * 10000 + month * 100 + int(m.group(6)), "", s))
        return keep(*qtys)
    if kind == "month":
        prefix = m.group(0)[: -len(m.group(1))]
        return prefix + keep(Qty("date", MONTHS[m.group(1)] * 100, "", s))
    if kind == "clock":
        hour, minute = int(m.group(1)), int(m.group(2))
        if m.group(3) == "p" and hour < 12:
            hour += 12
        if m.group(3) == "a" and hour == 12:
            hour = 0
        return keep(Qty("clock", hour * 60 + minute, "", s))
    if kind == "clock12":
        hour = int(m.group(1)) % 12 + (12 if m.group(2) == "p" else 0)
        return keep(Qty("clock", hour * 60, "", s))
    if kind == "midnight":
        return keep(Qty("clock", 0 if m.group(1) == "midnight" else 720, "", s))
    if kind == "times":
        count = TIMES.get(m.group(1)) or _parse_number(m.group(2) or "") or 1
        return keep(Qty("freq", count * 86400 / SECONDS[m.group(3)], "", s))
    if kind == "every":
        unit = m.group(2)
        if unit == "night":
            return keep(Qty("freq", 1.0, "", s))
        if unit in ("morning", "evening"):
            return keep(Qty("freq", 1.0, "", s)) + f" {unit} "
        if unit == "weekday":
            return " weekday "
        n = _parse_number(m.group(1)) if m.group(1) else 1
        return keep(Qty("freq", 86400 / ((n or 1) * SECONDS[unit]), "", s))
    if kind == "timesword":
        count = TIMES.get(m.group(1)) or _parse_number(m.group(2) or "") or 1
        return keep(Qty("freq", count * FREQ_WORDS[m.group(3)], "", s))
    if kind == "freqword":
        return keep(Qty("freq", FREQ_WORDS[m.group(1)], "", s))
    if kind == "quarter":
        fraction = {"three quarters": 0.75, "a quarter": 0.25, "one quarter": 0.25, "half": 0.5, "a half": 0.5}[
            m.group(1)
        ]
        return keep(_unit_quantity(fraction, m.group(2), s))
    if kind == "money":
        value = float(m.group(2).replace(",", "")) * {"k": 1e3, "m": 1e6}.get(m.group(3) or "", 1)
        return keep(Qty("money", value, "", s))
    if kind == "num":
        value = float(m.group(1).replace(",", "")) * (1000 if m.group(2) else 1)
        unit = m.group(3)
        if unit == "%":
            return keep(Qty("percent", value / 100, "", s))
        if unit in ("m", "min") and re.search(r"\.\d\d", m.group(1)):
            return keep(Qty("count", value, "", m.group(1))) + f" {unit} "  # "Py 3.12 min": a version
        return keep(_unit_quantity(value, unit, s))
    if kind == "wordnum":
        number = _parse_number(m.group(1))
        if number is None:
            return m.group(0)
        # "one" alone is a pronoun far more often than a number ("the new one")
        if m.group(1) == "one" and not m.group(2):
            return m.group(0)
        return keep(_unit_quantity(number, m.group(2), s))
    if kind == "per":
        if not s.startswith(("per", "/")) and word_before(m.string, m.start()) in DURATION_PREPOSITIONS:
            return keep(Qty("time", SECONDS[m.group(1)], "", s))  # "within an hour" is a duration
        return keep(Qty("freq", 86400 / SECONDS[m.group(1)], "", s))
    return m.group(0)
