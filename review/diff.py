"""Word-level diffs for the review pages: what a reviewer changed against a suggestion, or what
a new version changes against the one it replaces.

Text is split into words, whitespace runs and punctuation, compared with difflib, and rendered
as HTML with `<del>` (only in the old text) and `<ins>` (only in the new text). Every piece of
text is escaped before it is wrapped, so the result is safe to insert into a page even when
both texts come from agents or users.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

_TOKENS = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)

OpKind = Literal["equal", "delete", "insert"]


@dataclass(frozen=True)
class DiffOp:
    kind: OpKind
    text: str


def tokenize(text: str) -> list[str]:
    """Words, whitespace runs and single punctuation marks; joining them gives `text` back."""
    return _TOKENS.findall(text)


def word_diff(old: str, new: str) -> list[DiffOp]:
    """The edit from `old` to `new` as equal/delete/insert runs of tokens (a replacement is a
    delete followed by an insert). Adjacent runs of one kind are merged. Bounded work: see
    WORD_PAIRS_BUDGET."""
    a, b = tokenize(old), tokenize(new)
    ops: list[DiffOp] = []

    def add(kind: OpKind, tokens: Sequence[str]) -> None:
        if not tokens:
            return
        text = "".join(tokens)
        if ops and ops[-1].kind == kind:
            ops[-1] = DiffOp(kind, ops[-1].text + text)
        else:
            ops.append(DiffOp(kind, text))

    if len(a) * len(b) <= WORD_PAIRS_BUDGET:
        _matched(a, b, add)
        return ops
    # Long texts: the common start and end are equal without comparing anything; what lies
    # between is compared word by word if small enough, else sentence by sentence.
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    add("equal", a[:start])
    middle_a, middle_b = a[start : len(a) - end], b[start : len(b) - end]
    if len(middle_a) * len(middle_b) <= WORD_PAIRS_BUDGET:
        _matched(middle_a, middle_b, add)
    else:
        _by_sentence(middle_a, middle_b, add)
    add("equal", a[len(a) - end :])
    return ops


# difflib compares about len(a) × len(b) token pairs (and more on repetitive text: 16,000
# characters took a minute). Beyond this many pairs, a diff is taken sentence by sentence and
# only changed sentences are compared word by word while the budget lasts; past it, changed text
# shows as one deletion and one insertion. About 0.05 s per diff at worst.
WORD_PAIRS_BUDGET = 160_000
_SENTENCE_END = frozenset(".!?")


def _matched(a: Sequence[str], b: Sequence[str], add: Callable[[OpKind, Sequence[str]], None]) -> None:
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            add("equal", a[i1:i2])
        else:
            add("delete", a[i1:i2])
            add("insert", b[j1:j2])


def _sentences(tokens: Sequence[str]) -> list[tuple[str, ...]]:
    """Tokens grouped into sentences: each ends after `.`, `!`, `?` or a line break."""
    sentences: list[tuple[str, ...]] = []
    start = 0
    for index, token in enumerate(tokens):
        if token in _SENTENCE_END or "\n" in token:
            sentences.append(tuple(tokens[start : index + 1]))
            start = index + 1
    if start < len(tokens):
        sentences.append(tuple(tokens[start:]))
    return sentences


def _by_sentence(a: Sequence[str], b: Sequence[str], add: Callable[[OpKind, Sequence[str]], None]) -> None:
    sa, sb = _sentences(a), _sentences(b)
    if len(sa) * len(sb) > WORD_PAIRS_BUDGET:
        add("delete", a)
        add("insert", b)
        return
    budget = WORD_PAIRS_BUDGET
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, sa, sb, autojunk=False).get_opcodes():
        old = [token for sentence in sa[i1:i2] for token in sentence]
        new = [token for sentence in sb[j1:j2] for token in sentence]
        if tag == "equal":
            add("equal", old)
        elif len(old) * len(new) <= budget:
            budget -= len(old) * len(new)
            _matched(old, new, add)
        else:
            add("delete", old)
            add("insert", new)


def _render(ops: list[DiffOp], show: set[str]) -> SafeString:
    parts: list[str] = []
    for op in ops:
        if op.kind not in show:
            continue
        text = str(escape(op.text))
        if op.kind == "delete":
            parts.append(f"<del>{text}</del>")
        elif op.kind == "insert":
            parts.append(f"<ins>{text}</ins>")
        else:
            parts.append(text)
    return mark_safe("".join(parts))  # noqa: S308 — every piece was escaped above


def render_inline(old: str, new: str) -> SafeString:
    """One text: removed words in `<del>`, added words in `<ins>`, escaped."""
    return _render(word_diff(old, new), {"equal", "delete", "insert"})


def render_side_by_side(old: str, new: str) -> tuple[SafeString, SafeString]:
    """Two texts for two columns: the old with its removed words in `<del>`, the new with its
    added words in `<ins>`, both escaped."""
    ops = word_diff(old, new)
    return _render(ops, {"equal", "delete"}), _render(ops, {"equal", "insert"})


def diff_stats(old: str, new: str) -> dict[str, int]:
    """Words added and removed (whitespace runs not counted)."""
    added = removed = 0
    for op in word_diff(old, new):
        words = len([t for t in tokenize(op.text) if not t.isspace()])
        if op.kind == "insert":
            added += words
        elif op.kind == "delete":
            removed += words
    return {"added": added, "removed": removed}


# Below this share of words in common, two texts are unrelated: an interleaved diff of them is
# mostly strike-through and underline, so they are shown whole, one above the other.
UNRELATED_BELOW = 0.35


@dataclass(frozen=True)
class TextDiff:
    """Two texts ready for the page: the old with its removed words in `<del>`, the new with its
    added words in `<ins>`, the inline diff, and whether to show them stacked (unrelated texts:
    then `old` and `new` are the plain escaped texts)."""

    old: SafeString
    new: SafeString
    inline: SafeString
    stacked: bool
    overlap: float
    old_label: str = "current"
    new_label: str = "proposed"

    @property
    def percent(self) -> int:
        return round(self.overlap * 100)


def overlap(ops: list[DiffOp]) -> float:
    """The share of words the two texts have in common (2 × common / all), 1.0 for two empty texts."""
    counts = {"equal": 0, "delete": 0, "insert": 0}
    for op in ops:
        counts[op.kind] += len([t for t in tokenize(op.text) if not t.isspace()])
    total = 2 * counts["equal"] + counts["delete"] + counts["insert"]
    return 1.0 if total == 0 else 2 * counts["equal"] / total


def compare_texts(old: str, new: str, *, old_label: str = "current", new_label: str = "proposed") -> TextDiff:
    """The side-by-side diff of `old` and `new` under their headers, stacked whole when they have
    little in common (below UNRELATED_BELOW). Escaped, safe to insert."""
    ops = word_diff(old, new)
    share = overlap(ops)
    if share < UNRELATED_BELOW:
        return TextDiff(
            old=escape(old),
            new=escape(new),
            inline=_render(ops, {"equal", "delete", "insert"}),
            stacked=True,
            overlap=share,
            old_label=old_label,
            new_label=new_label,
        )
    return TextDiff(
        old=_render(ops, {"equal", "delete"}),
        new=_render(ops, {"equal", "insert"}),
        inline=_render(ops, {"equal", "delete", "insert"}),
        stacked=False,
        overlap=share,
        old_label=old_label,
        new_label=new_label,
    )
