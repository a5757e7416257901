from __future__ import annotations

import gzip
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.actors import Actor
from memory.models import Workspace
from memory.services.portability import PortabilityError, count_rows, export_workspace


def _open(path: str) -> IO[str]:
    """The output file, compressed when its name ends in .gz; the caller closes it."""
    if path.endswith(".gz"):
        return gzip.open(path, "wt", encoding="utf-8")
    return open(path, "w", encoding="utf-8")


class Command(BaseCommand):
    help = (
        "Export one workspace as versioned JSON Lines (stdout by default; gzip when the file name ends "
        "in .gz). Agents travel without their keys; vectors only with --with-vectors."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the workspace to export")
        parser.add_argument("-o", "--output", help="file to write (.gz: compressed); default stdout")
        parser.add_argument(
            "--with-vectors", action="store_true", help="include fact vectors (else the import recomputes them)"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        workspace = Workspace.objects.filter(slug=opts["slug"]).first()
        if workspace is None:
            raise CommandError(f"No workspace {opts['slug']!r}.")
        path = opts["output"] if opts["output"] != "-" else None
        failed: PortabilityError | None = None
        with ExitStack() as stack:
            out: IO[str]
            if path is None:
                out = self.stdout  # type: ignore[assignment]  # OutputWrapper: write(str), like a text file
            else:
                try:
                    handle = _open(path)
                except OSError as exc:
                    raise CommandError(f"Cannot write {path}: {exc.strerror or exc}") from None
                out = stack.enter_context(handle)
            bar = stack.enter_context(tqdm(total=count_rows(workspace), unit="row", desc="exporting", file=self.stderr))
            try:
                counts = export_workspace(
                    workspace=workspace,
                    out=out,
                    by=Actor.system("manage.py export_workspace"),
                    with_vectors=opts["with_vectors"],
                    progress=bar.update,
                )
            except PortabilityError as exc:
                failed = exc
        if failed is not None:
            if path is not None:
                Path(path).unlink(missing_ok=True)  # no half file that looks like an export
            raise CommandError(failed.detail)
        total = sum(counts.values())
        self.stderr.write(
            f"Exported workspace {workspace.slug}: {total} rows ({counts.get('fact', 0)} facts, "
            f"{counts.get('agent', 0)} agents without keys)" + (f" to {path}." if path else ".")
        )
