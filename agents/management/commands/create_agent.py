from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.services import create_agent_by_names
from memory.actors import Actor
from memory.errors import EngramError


class Command(BaseCommand):
    help = "Create an agent (and its workspace and role when missing). Prints the key alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True, help="workspace slug")
        parser.add_argument("--name", required=True, help="agent name (unique in the workspace)")
        parser.add_argument("--role", required=True, help="role name, e.g. coder")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            agent, key = create_agent_by_names(
                workspace_slug=opts["workspace"],
                name=opts["name"],
                role_name=opts["role"],
                by=Actor.of_system("manage.py create_agent"),
            )
        except EngramError as exc:
            raise CommandError(exc.detail) from None
        self.stderr.write(
            f"Created agent {agent.name} ({agent.role.name}) in {agent.workspace.slug}. "
            "Store the key now: it is shown only once."
        )
        self.stdout.write(key)
