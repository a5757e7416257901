from __future__ import annotations

import gzip
import sys
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.actors import Actor
from memory.services.embedding import embed_missing
from memory.services.portability import PortabilityError, import_workspace


def _lines(path: str) -> Iterator[str]:
    if path == "-":
        yield from sys.stdin
        return
    with open(path, "rb") as probe:
        compressed = probe.read(2) == b"\x1f\x8b"
    opener = gzip.open if compressed else open
    with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
        yield from handle


class Command(BaseCommand):
    help = (
        "Import a workspace file written by export_workspace as a new workspace, all or nothing. "
        "Facts exported without vectors are embedded afterwards."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the workspace file (.jsonl or .jsonl.gz; - for stdin)")
        parser.add_argument("--as", dest="slug", help="import under this slug instead of the exported one")
        parser.add_argument("--batch-size", type=int, default=64, help="facts embedded per batch")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            lines = list(_lines(opts["file"]))
        except (OSError, UnicodeDecodeError, EOFError) as exc:
            raise CommandError(f"Cannot read {opts['file']}: {exc}") from None
        try:
            with tqdm(total=max(len(lines) - 1, 0), unit="row", desc="importing", file=self.stderr) as bar:
                result = import_workspace(
                    lines=lines,
                    slug=opts["slug"],
                    by=Actor.system("manage.py import_workspace"),
                    progress=bar.update,
                )
        except PortabilityError as exc:
            raise CommandError(f"{exc.detail.rstrip('.')}. Nothing was imported.") from None
        ws = result.workspace
        self.stdout.write(
            f"Imported workspace {ws.slug}: {sum(result.counts.values())} rows, {result.counts.get('fact', 0)} facts."
        )
        if result.facts_without_vectors:
            with tqdm(total=len(result.facts_without_vectors), unit="fact", desc="embedding", file=self.stderr) as bar:
                done = embed_missing(
                    ids=result.facts_without_vectors, batch_size=opts["batch_size"], progress=bar.update
                )
            self.stdout.write(f"Embedded {done} facts.")
        if result.agents:
            self.stdout.write(
                f"{len(result.agents)} agents were imported without API keys ({', '.join(result.agents)}): "
                "issue each a new key (admin: Agents → “Rotate key of selected agents”) before it can call Engram."
            )
