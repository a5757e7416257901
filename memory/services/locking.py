"""One way to write what was read (issue 36): plan, lock, re-check, write.

Every write that reads facts and then writes facts goes the same way:

1. **Plan** outside any transaction: everything slow or model-bound — embedding the texts to
   store, the pair model's readings of their neighbours (memory.inference refuses to run inside a
   transaction).
2. **Lock**, in one transaction, the domains the plan writes, in sorted order (lock_domains:
   every writer of a domain's facts and conflicts takes its lock first), then the rows, by pk.
3. **Re-check** under the locks what the plan assumed (the text it embedded, the fact it replaces
   still being the live head…). When the world moved, the step raises Replan before writing
   anything: the transaction rolls back and the work is planned again from what is there now, at
   most ATTEMPTS times, then StateConflict (409) with the caller's code.
4. **Write**, audited in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from django.db import transaction

from memory.errors import StateConflict
from memory.inference import NeedsInference
from memory.services.conflicts import lock_domains

P = TypeVar("P")
R = TypeVar("R")
H = TypeVar("H")

ATTEMPTS = 3


class Replan(Exception, Generic[H]):
    """Raised under the locks, before anything is written, when the plan no longer fits what the
    locked step found; `hint` (e.g. the text met) is handed to the next planning."""

    def __init__(self, hint: H | None = None) -> None:
        super().__init__(hint)
        self.hint = hint


def write_planned(
    plan: Callable[[H | None], P],
    write: Callable[[P], R],
    *,
    domains: Callable[[P], Iterable[int]],
    changed: StateConflict,
    attempts: int = ATTEMPTS,
    readings: int = ATTEMPTS,
) -> R:
    """plan(hint) outside any transaction (hint None the first time, else the last Replan's), then
    in one transaction lock `domains(plan)` in sorted order and `write(plan)`; on Replan, plan
    again; on NeedsInference, do that work outside and write the same plan again, at most
    `readings` times a plan (a batch passes its length: each stop reads what one item missed, so
    the next write passes that item). Raises `changed` after `attempts` plans that each went stale
    (or one that kept needing inference)."""
    hint: H | None = None
    for _ in range(attempts):
        planned = plan(hint)
        for _ in range(readings):
            try:
                with transaction.atomic():
                    lock_domains(domains(planned))
                    return write(planned)
            except NeedsInference as needed:
                needed.work()  # outside the transaction, then the same plan again
                continue
            except Replan as stale:
                hint = stale.hint
                break
        else:
            raise changed
    raise changed
