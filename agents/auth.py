"""`Authorization: Bearer <key>` for DRF: every request acts as exactly one agent."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from memory.models import Agent, hash_key
from memory.routing import recall_write
from memory.selectors_agents import agent_for_key_hash

# Writing last_used_at on every call would turn each read into a write; once a minute is enough.
_TOUCH_EVERY_SECONDS = 60


class KeyRevoked(exceptions.AuthenticationFailed):
    default_code = "key_revoked"
    default_detail = "This agent key was revoked. Ask a workspace admin for a new key."


class AgentKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Agent, str] | None:
        header = get_authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != self.keyword.lower().encode():
            raise exceptions.AuthenticationFailed("Use `Authorization: Bearer <agent key>`.", code="invalid_key")
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header: `Bearer <agent key>`.", code="invalid_key"
            )
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("The agent key is not valid.", code="invalid_key") from None
        agent = agent_for_key_hash(hash_key(key))
        if agent is None:
            raise exceptions.AuthenticationFailed("The agent key is not valid.", code="invalid_key")
        if agent.revoked_at is not None:
            raise KeyRevoked()
        now = timezone.now()
        if agent.last_used_at is None or (now - agent.last_used_at).total_seconds() > _TOUCH_EVERY_SECONDS:
            with recall_write():  # noting a key's use is not a write the agent reads back: no pinning
                Agent.objects.filter(pk=agent.pk).update(last_used_at=now)
        return agent, key

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class IsAgent(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, Agent)
