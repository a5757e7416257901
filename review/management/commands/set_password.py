from __future__ import annotations

import sys
from getpass import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory import access
from memory.actors import Actor
from memory.models import WorkspaceMembership
from review.accounts import set_user_password


class Command(BaseCommand):
    help = (
        "Set a person's password for the site's sign-in (/login/): --username U, then type it twice, "
        "or pipe it with --password-stdin."
    )
    stealth_options = ("stdin",)  # call_command(..., stdin=io.StringIO(...)) in tests

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)
        parser.add_argument(
            "--password-stdin",
            action="store_true",
            help="Read the password from the first line of standard input (for scripts).",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        User = get_user_model()
        user = User._default_manager.filter(**{User.USERNAME_FIELD: opts["username"]}).first()
        if user is None:
            raise CommandError(
                f"No user {opts['username']!r}. Create one in the admin (/admin/auth/user/add/) "
                "or with `manage.py createsuperuser`."
            )
        password = self._read_password(from_stdin=opts["password_stdin"], stdin=opts.get("stdin"))
        try:
            set_user_password(user=user, password=password, by=Actor.system("manage.py set_password"))
        except ValidationError as exc:
            raise CommandError("Password refused: " + " ".join(exc.messages)) from None
        self.stdout.write(f"Password set for {user.get_username()}; their other sessions are signed out.")
        for line in _next_steps(user):
            self.stdout.write(f"  {line}")

    def _read_password(self, *, from_stdin: bool, stdin: Any) -> str:
        if from_stdin:
            password = (stdin or sys.stdin).readline().rstrip("\r\n")
        else:
            password = getpass("Password: ")
            if getpass("Password (again): ") != password:
                raise CommandError("The two passwords differ; nothing changed.")
        if not password:
            raise CommandError("Empty password; nothing changed.")
        return password


def _next_steps(user: Any) -> list[str]:
    steps = ["They sign in at /login/ on the site."]
    if not user.is_active:
        steps.append("The account is inactive: tick 'Active' in the admin or they cannot sign in.")
    if not WorkspaceMembership.objects.filter(user=user).exists():
        steps.append("They are a member of no workspace: add a membership in the admin, or they see no page.")
    if user.is_active and not access.is_staff(user):
        steps.append("Not staff: the review pages are open to them, the admin (/admin/) is not.")
    return steps
