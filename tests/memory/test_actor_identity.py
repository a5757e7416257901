"""Issue 32, part A: identity fails closed. An Actor is exactly one of an agent, a signed-in person
or a named system process; nobody identified is never taken for the system, and every service
refuses an actor that is none of these (ActorRequired: 403 `actor_required`), writing nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser

from agents.services import may_manage_trust, set_trust_flags
from memory.actors import Actor, ActorRequired, require_actor
from memory.audit import record_event
from memory.errors import EngramError, InsufficientPermission
from memory.models import AuditEvent, Fact
from memory.services.conflicts import decide_conflict
from memory.services.decisions import check_may_record
from memory.services.erasure import erase
from memory.services.facts import FactInput, propose_fact, supersede_fact
from memory.services.lifecycle import archive_fact
from review.services import check_access
from tests.factories import FactFactory

pytestmark = pytest.mark.django_db


def forged(**fields) -> Actor:
    """An Actor built around its checks (object.__new__): what a bug or a hand-rolled dataclass copy
    could hand a service. Every service must still refuse it."""
    actor = object.__new__(Actor)
    for name, value in {"agent": None, "user": None, "system_name": "", **fields}.items():
        object.__setattr__(actor, name, value)
    return actor


# --- The Actor itself -------------------------------------------------------------------------------
def test_of_user_none_raises():
    with pytest.raises(ActorRequired) as refused:
        Actor.of_user(None)
    assert refused.value.code == "actor_required" and refused.value.status == 403
    assert isinstance(refused.value, InsufficientPermission) and isinstance(refused.value, EngramError)


def test_an_anonymous_user_is_no_actor():
    with pytest.raises(ActorRequired, match="anonymous"):
        Actor.of_user(AnonymousUser())
    with pytest.raises(ActorRequired):
        Actor(user=AnonymousUser())


def test_an_agent_is_never_a_person(world):
    """An agent key's request has the Agent as `request.user` (and it is authenticated): wrapping
    it as a person would let it pass a person's checks."""
    with pytest.raises(ActorRequired, match="not a person"):
        Actor.of_user(world.coder)


def test_an_actor_naming_nobody_or_several_raises(world):
    with pytest.raises(ActorRequired, match="none of agent, user or system"):
        Actor()
    with pytest.raises(ActorRequired, match="agent and user"):
        Actor(agent=world.coder, user=world.admin_user)
    with pytest.raises(ActorRequired, match="user and system"):
        Actor(user=world.admin_user, system_name="cron")
    with pytest.raises(ActorRequired):
        Actor.of_agent(None)  # type: ignore[arg-type]


def test_the_system_is_explicit_and_named():
    system = Actor.system("scheduler")
    assert (system.is_system, system.is_user, system.is_agent) == (True, False, False)
    assert system.label == "system:scheduler" and system.agent is None and system.user is None
    for nameless in ("", "   "):
        with pytest.raises(ActorRequired, match="no name"):
            Actor.system(nameless)
        with pytest.raises(ActorRequired):
            Actor(system_name=nameless)
    assert not hasattr(Actor, "of_system")  # one way to say "the system": by name


def test_people_and_agents_are_not_the_system(world):
    person, agent = Actor.of_user(world.admin_user), Actor.of_agent(world.coder)
    assert (person.is_user, person.is_system, person.label) == (True, False, "user:wsadmin")
    assert (agent.is_agent, agent.is_system, agent.label) == (True, False, "agent:coder-a")
    assert require_actor(person) is person


def test_require_actor_refuses_none_other_objects_and_forged_actors(world):
    for bad in (None, "system", world.admin_user, forged(), forged(user=AnonymousUser())):
        with pytest.raises(ActorRequired):
            require_actor(bad)
    with pytest.raises(ActorRequired):
        require_actor(forged(agent=world.coder, user=world.admin_user))


# --- Services refuse an actor that is none of these ----------------------------------------------------
def test_trust_flags_refuse_an_unidentified_actor_where_none_used_to_pass_for_the_system(world):
    """may_manage_trust answered True for `by.user is None` (the system): a forged or missing actor
    was an admin. Now it is refused, and nothing changes."""
    for bad in (None, forged(), forged(user=AnonymousUser())):
        with pytest.raises(ActorRequired):
            may_manage_trust(bad, world.workspace.pk)  # type: ignore[arg-type]
        with pytest.raises(ActorRequired):
            set_trust_flags(agent=world.coder, by=bad, relays_human_words=True)  # type: ignore[arg-type]
    world.coder.refresh_from_db()
    assert world.coder.relays_human_words is False
    assert not AuditEvent.objects.filter(verb="agent.trust_changed").exists()
    assert may_manage_trust(Actor.system("manage.py"), world.workspace.pk) is True


def test_writes_refuse_an_anonymous_user_and_write_nothing(world):
    fact = FactFactory(domain=world.architecture, topic="deploys", content="Deploys happen on Tuesdays.")
    before = (Fact.objects.count(), AuditEvent.objects.count())
    anonymous = forged(user=AnonymousUser())
    with pytest.raises(ActorRequired):
        supersede_fact(fact=fact, by=anonymous, content="Deploys happen on Fridays.")
    with pytest.raises(ActorRequired):
        propose_fact(
            domain=world.architecture,
            data=FactInput(topic="deploys", content="Deploys happen on Fridays.", memory_type="convention"),
            by=anonymous,
            embedding=[0.0] * 384,
        )
    with pytest.raises(ActorRequired):
        archive_fact(fact=fact, by=anonymous)  # refused where it is recorded: the change is undone
    with pytest.raises(ActorRequired):
        record_event(actor=anonymous, verb="fact.archived", workspace_id=world.workspace.pk, target=fact)
    fact.refresh_from_db()
    assert (fact.status, fact.superseded_by_id) == ("active", None)
    assert (Fact.objects.count(), AuditEvent.objects.count()) == before


def test_decisions_of_people_refuse_an_unidentified_actor(world):
    """Paths that treated `by.user is None` as the system (recording decisions) or as "not a
    person" refuse a missing identity outright instead."""
    nobody = forged()
    with pytest.raises(ActorRequired):
        check_may_record(workspace=world.workspace, by=nobody)
    with pytest.raises(ActorRequired):
        decide_conflict(conflict=object(), by=nobody, resolution="same")  # type: ignore[arg-type]
    with pytest.raises(ActorRequired):
        erase(plan=object(), reason="r", by=nobody)  # type: ignore[arg-type]
    with pytest.raises(ActorRequired):
        check_access(object(), nobody)  # type: ignore[arg-type]
    assert check_may_record(workspace=world.workspace, by=Actor.system("manage.py")) is None


def test_a_page_reached_without_signing_in_never_acts_as_the_system(world, client):
    """The review pages ask for a sign-in first; had one let an anonymous request through, the
    Actor it builds would refuse rather than act as the system."""
    fact = FactFactory(domain=world.architecture)
    response = client.post(f"/memory/{world.workspace.slug}/facts/{fact.pk}/archive/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    fact.refresh_from_db()
    assert fact.status == "active"
