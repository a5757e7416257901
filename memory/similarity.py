"""Deciding whether a proposed fact restates, contradicts or is unrelated to a live one.

Embedding cosine alone cannot tell "deploys happen on Tuesdays" from "… on Fridays": MiniLM
puts minimal-edit contradictions as close as paraphrases (0.85–0.98 on our labelled pairs,
tests/data/labelled_pairs.py). So a restatement must also agree on its *salient tokens* —
numbers, identifiers and proper names — while a paraphrase may reword everything else.
"""

from __future__ import annotations

import re
from enum import StrEnum

from django.conf import settings

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/+#-]*[A-Za-z0-9+#]|[A-Za-z0-9]")
_NEGATIONS = {"not", "never", "no", "cannot", "can't", "don't", "doesn't", "isn't", "aren't", "won't", "without"}
# Words whose swap flips a statement although the sentence embeds almost identically.
_NUMBER_WORDS = {
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "once",
    "twice",
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "quarterly",
    "annually",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "year",
    "half",
    "double",
    "single",
    "first",
    "last",
}
_POLAR_WORDS = {
    "small",
    "large",
    "big",
    "tiny",
    "huge",
    "before",
    "after",
    "enabled",
    "disabled",
    "allowed",
    "forbidden",
    "mutable",
    "immutable",
    "always",
    "sometimes",
    "true",
    "false",
    "on",
    "off",
    "min",
    "max",
    "minimum",
    "maximum",
    "increase",
    "decrease",
    "sync",
    "async",
    "synchronous",
    "asynchronous",
    "public",
    "private",
    "optional",
    "local",
    "remote",
    "internal",
    "external",
    "early",
    "late",
    "more",
    "less",
    "fewer",
    "higher",
    "lower",
    "faster",
    "slower",
    "new",
    "old",
    "legacy",
    "deprecated",
    "blocking",
}


class PairKind(StrEnum):
    SAME = "same"
    CONFLICT = "conflict"
    UNRELATED = "unrelated"


def normalise(text: str) -> str:
    """Lower-cased, whitespace-collapsed, without trailing punctuation: equal means restated."""
    return " ".join(text.lower().split()).rstrip(".!;, ")


def _singular(token: str) -> str:
    return token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token


def _words(text: str) -> set[str]:
    """Every word, lower-cased and singular, with identifiers also split into their parts."""
    words: set[str] = set()
    for match in _WORD.finditer(text):
        word = match.group(0).lower()
        words.add(_singular(word))
        words.update(_singular(part) for part in re.split(r"[-_./:]", word) if part)
    return words


def salient_tokens(text: str) -> set[str]:
    """Numbers, identifiers (with digits or `-_./:`), capitalised names, number words and
    polar words: what must agree for two texts to say the same thing."""
    tokens: set[str] = set()
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        for index, match in enumerate(_WORD.finditer(sentence)):
            word = match.group(0)
            lower = _singular(word.lower())
            if (
                any(c.isdigit() for c in word)
                or any(c in word for c in "-_./:+#")
                or (word[0].isupper() and index > 0)  # a capital opening a sentence says nothing
                or lower in _NUMBER_WORDS
                or lower in _POLAR_WORDS
            ):
                tokens.add(lower)
    return tokens


def _missing(tokens: set[str], words: set[str]) -> set[str]:
    return {t for t in tokens if t not in words and not all(p in words for p in re.split(r"[-_./:]", t) if p)}


def contrasting(a: str, b: str) -> bool:
    """True when one text names a number, identifier, name or polar word the other lacks,
    or only one of them is negated."""
    words_a, words_b = _words(a), _words(b)
    if _missing(salient_tokens(a), words_b) or _missing(salient_tokens(b), words_a):
        return True
    return negated(a) != negated(b)


def negated(text: str) -> bool:
    words = {w.lower() for w in re.findall(r"[A-Za-z']+", text)}
    return bool(words & _NEGATIONS) or "n't" in text.lower()


def classify_pair(
    similarity: float, a: str, b: str, *, duplicate: float | None = None, contradiction: float | None = None
) -> PairKind:
    """Classify two same-topic texts given their embedding cosine."""
    duplicate = settings.ENGRAM_DUPLICATE_THRESHOLD if duplicate is None else duplicate
    contradiction = settings.ENGRAM_CONTRADICTION_THRESHOLD if contradiction is None else contradiction
    if normalise(a) == normalise(b):
        return PairKind.SAME
    if similarity >= duplicate and not contrasting(a, b):
        return PairKind.SAME
    if similarity >= contradiction:
        return PairKind.CONFLICT
    return PairKind.UNRELATED
