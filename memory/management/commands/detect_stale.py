"""`manage.py detect_stale`: challenge active lifecycle-managed facts (promoted, or with a probe)
not validated or mentioned within their memory type's window (SPEC §7) and print how many, per
memory type. The same service runs daily under Celery beat or the in-process scheduler."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from memory.actors import Actor
from memory.services.lifecycle import detect_stale


class Command(BaseCommand):
    help = "Mark active facts not validated within their memory type's window as challenged (stale)."

    def handle(self, *args: Any, **opts: Any) -> None:
        counts = detect_stale(by=Actor.system("manage.py detect_stale"))
        total = sum(counts.values())
        per_type = ", ".join(f"{memory_type} {n}" for memory_type, n in sorted(counts.items()))
        self.stdout.write(f"Challenged {total} stale fact(s)" + (f": {per_type}." if per_type else "."))
