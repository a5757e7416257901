"""Model inference never runs inside a transaction (STYLE; issue 36).

Embedding a text or reading a pair with the pair model takes milliseconds to seconds of CPU; inside
a transaction it would hold that transaction's row and advisory locks the whole time, and every
writer of the same domain would wait behind it. Writes therefore plan their inference before their
transaction opens (memory.services.locking), and the entry points of both models call
`outside_transactions`, which raises InferenceInTransaction when the calling thread's database
connection is inside an atomic block its caller did not declare as enclosing (a test harness
declares its own wrapping transaction with `enclosing_transactions`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import connection

_enclosing: ContextVar[int] = ContextVar("engram_enclosing_transactions", default=0)


class InferenceInTransaction(RuntimeError):
    """Model inference was asked for inside a transaction: a programming error, never input's."""


class NeedsInference(Exception):
    """Raised inside a transaction by a step that met work only a model can do, which its plan did
    not foresee (a fact a concurrent writer added between the plan and the locks, whose pair with
    the new text was never read): memory.services.locking.write_planned rolls the transaction back,
    runs `work` outside it, and runs the step again."""

    def __init__(self, what: str, work: Callable[[], object]) -> None:
        super().__init__(what)
        self.work = work


def in_transaction() -> bool:
    """Whether this thread's connection is inside a transaction beyond the declared enclosing ones."""
    return len(connection.atomic_blocks) > _enclosing.get()


def outside_transactions(what: str) -> None:
    """Raise InferenceInTransaction when this thread's connection is inside a transaction beyond
    the declared enclosing ones."""
    if in_transaction():
        raise InferenceInTransaction(
            f"{what} inside a transaction: plan it before the transaction opens (memory.services.locking)."
        )


@contextmanager
def enclosing_transactions() -> Iterator[None]:
    """The transactions open on this thread's connection now are the caller's harness, not the code
    under it (a test's own wrapping transaction): inference is refused only inside deeper ones."""
    token = _enclosing.set(len(connection.atomic_blocks))
    try:
        yield
    finally:
        _enclosing.reset(token)
