"""Who performs a write: an agent, a person, or the system (a scheduled or automatic path).

An Actor is exactly one of the three, and fails closed: `Actor.of_user(None)`, an anonymous or
otherwise unauthenticated user, an empty system name or an Actor naming none (or several) of
them raises ActorRequired. The system is never what is left when nobody was named: it is asked
for by name (`Actor.system("scheduler")`), so a service can tell "the system, acting for an
operator" from "somebody we failed to identify". Services that accept an actor check it with
`require_actor` before acting on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memory.errors import InsufficientPermission

if TYPE_CHECKING:
    from memory.models import Agent


class ActorRequired(InsufficientPermission):
    """A write named nobody it can trust: no actor, an anonymous user, or an Actor that is not
    exactly one of agent, user and system. 403 `actor_required`; nothing is written."""

    code = "actor_required"

    def __init__(self, why: str) -> None:
        super().__init__(f"This needs an identified agent, person or named system process: {why}.")


def _is_authenticated(user: Any) -> bool:
    # AnonymousUser answers False; a real user row True; anything without the attribute is refused.
    return getattr(user, "is_authenticated", False) is True


def _is_agent(user: Any) -> bool:
    from memory.models import Agent  # memory.models never imports this module; at call time it is loaded

    return isinstance(user, Agent)


@dataclass(frozen=True)
class Actor:
    agent: Agent | None = None
    user: Any = None
    system_name: str = ""

    def __post_init__(self) -> None:
        named = [kind for kind, given in self._kinds() if given]
        if len(named) != 1:
            raise ActorRequired(
                "none of agent, user or system was given" if not named else f"it names {' and '.join(named)} at once"
            )
        if self.user is not None and not _is_authenticated(self.user):
            raise ActorRequired("the user is anonymous (not signed in)")
        if self.user is not None and _is_agent(self.user):
            raise ActorRequired("an agent is not a person (an agent key's request acts as Actor.of_agent)")
        if self.agent is not None and getattr(self.agent, "pk", None) is None:
            raise ActorRequired("the agent is not a saved agent")
        if self.system_name and (not isinstance(self.system_name, str) or not self.system_name.strip()):
            raise ActorRequired("the system process has no name")

    def _kinds(self) -> list[tuple[str, bool]]:
        return [
            ("agent", self.agent is not None),
            ("user", self.user is not None),
            ("system", bool(self.system_name and str(self.system_name).strip())),
        ]

    @classmethod
    def of_agent(cls, agent: Agent) -> Actor:
        if agent is None:
            raise ActorRequired("no agent was given")
        return cls(agent=agent)

    @classmethod
    def of_user(cls, user: Any) -> Actor:
        """A person. Raises ActorRequired for None and for an anonymous (unauthenticated) user:
        neither may pass for the system."""
        if user is None:
            raise ActorRequired("no user was given")
        return cls(user=user)

    @classmethod
    def system(cls, name: str) -> Actor:
        """The system, explicitly: a scheduled job, a management command, an automatic path,
        named for the audit trail (`system:<name>`)."""
        if not isinstance(name, str) or not name.strip():
            raise ActorRequired("the system process has no name")
        return cls(system_name=name.strip())

    @property
    def is_agent(self) -> bool:
        return self.agent is not None

    @property
    def is_user(self) -> bool:
        return self.user is not None

    @property
    def is_system(self) -> bool:
        return self.agent is None and self.user is None and bool(self.system_name)

    @property
    def label(self) -> str:
        if self.agent is not None:
            return f"agent:{self.agent.name}"
        if self.user is not None:
            return f"user:{self.user.get_username()}"
        return f"system:{self.system_name}"


def require_actor(by: Any) -> Actor:
    """`by`, checked again where a service accepts it: an Actor that is exactly one of agent,
    person (signed in) or named system. Raises ActorRequired otherwise — also for an Actor whose
    fields were altered after construction — so a service never mistakes a missing identity for
    the system."""
    if not isinstance(by, Actor):
        raise ActorRequired("no actor was given" if by is None else f"{type(by).__name__} is not an actor")
    Actor.__post_init__(by)
    return by
