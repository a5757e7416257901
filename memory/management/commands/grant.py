from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.actors import Actor
from memory.errors import EngramError
from memory.models import GrantLevel, Role, Workspace
from memory.services.tenancy import resolve_domain, set_grant


class Command(BaseCommand):
    help = "Set one access grant: --workspace W --role R --domain LABEL --level none|read|write."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True)
        parser.add_argument("--role", required=True)
        parser.add_argument("--domain", required=True, help="`architecture` or `repo:<slug>/architecture`")
        parser.add_argument("--level", required=True, choices=GrantLevel.values)

    def handle(self, *args: Any, **opts: Any) -> None:
        workspace = Workspace.objects.filter(slug=opts["workspace"]).first()
        if workspace is None:
            raise CommandError(f"No workspace {opts['workspace']!r}.")
        role = Role.objects.filter(workspace=workspace, name=opts["role"]).first()
        if role is None:
            raise CommandError(f"No role {opts['role']!r} in {workspace.slug}.")
        try:
            domain = resolve_domain(workspace_id=workspace.pk, label=opts["domain"])
            set_grant(role=role, domain=domain, level=opts["level"], by=Actor.system("manage.py grant"))
        except EngramError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(f"{role.name} on {domain.label}: {opts['level']}")
