"""Start callables at the same moment, each in its own thread with its own database connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection


def race(*targets: Callable[[], Any]) -> tuple[list[Any], list[Exception]]:
    """Run every target at once (a barrier releases them together) and answer what they returned
    and what they raised, each in finishing order. Each thread closes its connection when done."""
    barrier = threading.Barrier(len(targets))
    results: list[Any] = []
    errors: list[Exception] = []

    def worker(target: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results.append(target())
        except Exception as exc:  # collected for the test to assert on
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(target,)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results, errors
