"""What `make run` does before serving: migrate, seed the demo when empty, ensure a demo admin,
and print where to go. Safe to run any number of times."""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from agents.management.commands.seed_demo import DEMO_KEY_FILE, DEMO_SLUG
from agents.services import rotate_key
from memory.actors import Actor
from memory.models import Agent, Workspace, WorkspaceMembership
from memory.scheduler import DAILY_JOBS

DEMO_ADMIN = ("admin", "engram-demo")


class Command(BaseCommand):
    help = "Prepare the site for `make run`: migrate, seed the demo, ensure the demo admin, print access."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"))

    def handle(self, *args: Any, **opts: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        username, password = DEMO_ADMIN
        User = get_user_model()
        admin = User.objects.filter(username=username).first()
        if admin is None:
            admin = User.objects.create_superuser(username=username, email="admin@example.com", password=password)
            self.stdout.write(f"Created the demo admin {username!r}.")
        if not Workspace.objects.exists():
            call_command("seed_demo", stdout=self.stdout, stderr=self.stderr)
        demo = Workspace.objects.filter(slug=DEMO_SLUG).first()
        key_file = settings.ENGRAM_HOME / DEMO_KEY_FILE
        if demo is not None:
            WorkspaceMembership.objects.get_or_create(user=admin, workspace=demo, defaults={"is_admin": True})
            agent = Agent.objects.filter(workspace=demo, name="coder-1").first()
            if agent is not None and not key_file.exists():
                key_file.write_text(rotate_key(agent=agent, by=Actor.system("engram_up")) + "\n")
                key_file.chmod(0o600)
        key = key_file.read_text().strip() if key_file.exists() else "(no demo agent: run `manage.py create_agent`)"
        url = f"http://127.0.0.1:{opts['port']}/"
        self.stdout.write(self.style.SUCCESS("\nEngram is ready."))
        self.stdout.write(f"  Site:        {url}")
        self.stdout.write(f"  Admin:       {url}admin/   login {username} / {password}")
        self.stdout.write(f"  API docs:    {url}api/v1/docs/")
        self.stdout.write(f"  Demo agent:  {key}")
        self.stdout.write(f"  Try:         curl -s -H 'Authorization: Bearer {key}' {url}api/v1/me/")
        self.stdout.write(f"  Data:        {settings.ENGRAM_HOME}")
        jobs = ", ".join(job.name for job in DAILY_JOBS)
        where = (
            "run by celery beat"
            if settings.CELERY_BROKER_URL
            else "run in-process when ENGRAM_SCHEDULER=1, which make run sets"
        )
        self.stdout.write(f"  Daily jobs:  {jobs}, {where}\n")
