"""Refuse production while an account still has the demo password (issue 16).

`make run` creates `admin / engram-demo` (engram_up); `make serve-prod` shares `$ENGRAM_HOME` with
it by default, so bin/serve-prod runs this before serving and stops when it fails."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agents.management.commands.engram_up import DEMO_ADMIN


def users_with_demo_password() -> list[str]:
    """Usernames of active accounts whose password is the demo one."""
    _, password = DEMO_ADMIN
    found = []
    for user in get_user_model().objects.filter(is_active=True).order_by("pk"):
        if user.has_usable_password() and user.check_password(password):
            found.append(user.get_username())
    return found


class Command(BaseCommand):
    help = "Fail while an active account still has the demo password (run by bin/serve-prod)."

    def handle(self, *args: Any, **opts: Any) -> None:
        found = users_with_demo_password()
        if found:
            names = ", ".join(found)
            raise CommandError(
                f"Refusing to serve production: {names} still has the demo password ({DEMO_ADMIN[1]!r}). "
                f"Change it first: `.venv/bin/python manage.py changepassword {found[0]}` "
                f"(or `manage.py set_password --username {found[0]}`), or deactivate the account; "
                "or give production its own home (ENGRAM_HOME / DATABASE_URL) apart from `make run`'s."
            )
        self.stdout.write("No account has the demo password.")
