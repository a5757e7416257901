from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from memory.models import Fact
from memory.services.embedding import embed_missing


class Command(BaseCommand):
    help = "Embed facts that have no vector yet (or every fact with --all), in batches, with a progress bar."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="re-embed every fact, not only missing ones")
        parser.add_argument("--batch-size", type=int, default=64)

    def handle(self, *args: Any, **opts: Any) -> None:
        qs = Fact.objects.all() if opts["all"] else Fact.objects.needing_embedding()
        total = qs.count()
        if total == 0:
            self.stdout.write("Every fact already has an embedding.")
            return
        with tqdm(total=total, unit="fact", desc="embedding", file=self.stderr) as bar:
            done = embed_missing(everything=opts["all"], batch_size=opts["batch_size"], progress=bar.update)
        self.stdout.write(f"Embedded {done} facts.")
