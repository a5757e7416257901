"""People's sign-in credentials (issue 16 §4). Membership, not `is_staff`, decides what a person
sees; this module only sets how they prove who they are."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.password_validation import get_password_validators, validate_password
from django.db import transaction

from memory.actors import Actor
from memory.audit import record_event

# What production refuses (config/settings.py). Development configures no validators so the
# demo password works; a password set by hand is checked as production would check it anyway,
# since the same account may later serve there.
PRODUCTION_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]


@transaction.atomic
def set_user_password(*, user: Any, password: str, by: Actor) -> None:
    """Give `user` a new password and audit it; their other sessions end (Django's session hash).
    Raises django.core.exceptions.ValidationError when the validators refuse the password."""
    validators = get_password_validators(settings.AUTH_PASSWORD_VALIDATORS or PRODUCTION_VALIDATORS)
    validate_password(password, user, password_validators=validators)
    user.set_password(password)
    user.save(update_fields=["password"])
    record_event(actor=by, verb="user.password_set", workspace_id=None, target=user)
