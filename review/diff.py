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
    delete followed by an insert). Adjacent runs of one kind are merged."""
    a, b = tokenize(old), tokenize(new)
    ops: list[DiffOp] = []

    def add(kind: OpKind, tokens: list[str]) -> None:
        if not tokens:
            return
        text = "".join(tokens)
        if ops and ops[-1].kind == kind:
            ops[-1] = DiffOp(kind, ops[-1].text + text)
        else:
            ops.append(DiffOp(kind, text))

    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            add("equal", a[i1:i2])
        else:
            add("delete", a[i1:i2])
            add("insert", b[j1:j2])
    return ops


def is_changed(old: str, new: str) -> bool:
    return old != new


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
