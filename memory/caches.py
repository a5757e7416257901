"""In-process caches that may hold the text of a fact (policy vectors keyed by text, lexeme
statistics, the classifier's readings, the pair model's answers) register how to drop themselves,
at import; an erasure drops every registered one once it commits (memory.services.erasure). A
module that was never imported has no cache to drop.

This module imports nothing of Engram, so any module may register without an import cycle."""

from __future__ import annotations

from collections.abc import Callable

_clearers: list[Callable[[], None]] = []


def register_cache(clear: Callable[[], None]) -> Callable[[], None]:
    """Have `clear` called by `clear_caches()`; returns it, so it can decorate the function."""
    if clear not in _clearers:
        _clearers.append(clear)
    return clear


def clear_caches() -> None:
    """Drop every registered cache (after an erasure: no copy of an erased text is left here)."""
    for clear in list(_clearers):
        clear()
