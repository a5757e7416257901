"""Who performs a write: an agent, a person, or the system (a scheduled or automatic path)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory.models import Agent


@dataclass(frozen=True)
class Actor:
    agent: Agent | None = None
    user: Any = None
    system: str = ""

    @classmethod
    def of_agent(cls, agent: Agent) -> Actor:
        return cls(agent=agent)

    @classmethod
    def of_user(cls, user: Any) -> Actor:
        return cls(user=user)

    @classmethod
    def of_system(cls, name: str) -> Actor:
        return cls(system=name)

    @property
    def label(self) -> str:
        if self.agent is not None:
            return f"agent:{self.agent.name}"
        if self.user is not None:
            return f"user:{self.user.get_username()}"
        return f"system:{self.system or 'engram'}"
