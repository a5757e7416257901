"""Per-agent throttling: each agent key gets its own budget (DRF answers 429 with Retry-After)."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle


class AgentRateThrottle(SimpleRateThrottle):
    scope = "agent"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        agent = request.user
        if agent is None or not getattr(agent, "is_authenticated", False):
            return None  # unauthenticated calls are refused before they cost anything
        return self.cache_format % {"scope": self.scope, "ident": agent.pk}
