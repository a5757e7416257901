"""Send the webhook deliveries that are due now (retries included), once or in a loop."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.services.webhooks import deliver_due


class Command(BaseCommand):
    help = "Attempt every pending webhook delivery that is due (the inline mode records retries; this sends them)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--loop", type=int, default=0, metavar="SECONDS", help="Repeat every SECONDS (0: once).")

    def handle(self, *args: Any, **options: Any) -> None:
        while True:
            counts = deliver_due()
            self.stdout.write(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "nothing due")
            if options["loop"] <= 0:
                return
            time.sleep(options["loop"])
