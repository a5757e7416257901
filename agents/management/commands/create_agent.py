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
        parser.add_argument(
            "--relays-human-words",
            action="store_true",
            help="the agent relays people's own words (e.g. a chat front end): it may propose human_stated facts",
        )
        parser.add_argument(
            "--verifier",
            action="store_true",
            help="independent verifier: its replays count for the evidence gate of candidates it did not submit",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            agent, key = create_agent_by_names(
                workspace_slug=opts["workspace"],
                name=opts["name"],
                role_name=opts["role"],
                by=Actor.system("manage.py create_agent"),
                relays_human_words=opts["relays_human_words"],
                is_verifier=opts["verifier"],
            )
        except EngramError as exc:
            raise CommandError(exc.detail) from None
        trust = [
            label
            for flag, label in (("relays_human_words", "relays people's words"), ("is_verifier", "verifier"))
            if getattr(agent, flag)
        ]
        self.stderr.write(
            f"Created agent {agent.name} ({agent.role.name}) in {agent.workspace.slug}"
            + (f" [{', '.join(trust)}]" if trust else "")
            + ". Store the key now: it is shown only once."
        )
        self.stdout.write(key)
