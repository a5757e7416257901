"""`python manage.py mcp`: serve the agent tools over MCP on stdin/stdout, as the agent whose key
is in ENGRAM_AGENT_KEY. Nothing but protocol messages is written to stdout; logs go to stderr."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Serve Engram's agent tools (get_preamble, search_memory, propose_fact, memory banks…) over the "
        "Model Context Protocol on stdio, as the agent whose key is in ENGRAM_AGENT_KEY."
    )
    requires_system_checks: list[str] = []  # stdout belongs to the protocol: no check output there

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--site-url",
            default=os.environ.get("ENGRAM_SITE_URL", ""),
            help="the site's public URL, to make review links absolute (default: $ENGRAM_SITE_URL)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from agents.mcp_server import AgentKeyError, build_server

        try:
            server = build_server(os.environ.get("ENGRAM_AGENT_KEY", ""), site_url=options["site_url"])
        except AgentKeyError as exc:
            raise CommandError(f"Engram MCP server not started: {exc}") from None
        server.run("stdio")
