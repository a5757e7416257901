from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.actors import Actor
from memory.models import Workspace
from memory.services.tenancy import create_domain, get_or_create_repo


class Command(BaseCommand):
    help = "Create a domain (workspace-wide, or repo-scoped with --repo) with the default grants of SPEC §2."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True)
        parser.add_argument("--repo", default=None, help="repo slug; created when missing")
        parser.add_argument("name")

    def handle(self, *args: Any, **opts: Any) -> None:
        by = Actor.system("manage.py create_domain")
        workspace = Workspace.objects.filter(slug=opts["workspace"]).first()
        if workspace is None:
            raise CommandError(f"No workspace {opts['workspace']!r}. Create one with `manage.py create_agent` first.")
        repo = get_or_create_repo(workspace=workspace, slug=opts["repo"], by=by) if opts["repo"] else None
        domain = create_domain(workspace=workspace, name=opts["name"], repo=repo, by=by)
        self.stdout.write(f"Domain {domain.label} (id {domain.pk}) in {workspace.slug}.")
