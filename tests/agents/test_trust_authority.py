"""Issue 13, the trust boundary, written as the attacker would try it (real PostgreSQL, real model).

Who may state what: an agent proposes agent_inferred, tool_generated or imported; human_stated
comes from people (review pages, approvals) or from an agent a workspace admin marked as relaying
people's words. A caller's dates may not lie in the future. An agent links facts only to episodes
it opened (or its own runs' episodes). The trust flags are set by workspace admins only, audited."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from agents import operations as ops
from agents.services import create_agent, set_trust_flags
from memory.actors import Actor
from memory.errors import InsufficientPermission, InvalidInput, VeracityNotAllowed
from memory.models import Agent, AuditEvent, Episode, EpisodeFact, Fact
from memory.services.batch import IngestItem, ingest_facts
from memory.services.facts import FactInput, propose_fact, supersede_fact
from review.services import approve_review, submit_review, update_item
from tests.conftest import client_for
from tests.factories import MembershipFactory, UserFactory
from tests.review.samples import FILES, OUTPUT

pytestmark = pytest.mark.django_db

FACTS = "/api/v1/facts/"
PERSON_SAYS = "Production deploys happen on Tuesdays."
FORGED = "Production deploys happen on Fridays."
YEAR_9999 = "9999-12-31T23:59:59Z"


def fact_body(content: str, **extra) -> dict:
    return {"domain": "architecture", "topic": "deploys", "content": content, "memory_type": "convention", **extra}


def snapshot() -> tuple[int, int, int, int]:
    """Everything a write could leave behind."""
    return (Fact.objects.count(), AuditEvent.objects.count(), EpisodeFact.objects.count(), Episode.objects.count())


def person_states(world, content: str = PERSON_SAYS) -> Fact:
    """A person's own words through the service the review pages use."""
    return propose_fact(
        domain=world.architecture,
        data=FactInput(topic="deploys", content=content, memory_type="convention", veracity="human_stated"),
        by=Actor.of_user(world.admin_user),
    ).fact


def relay_agent(world, name: str = "chat-relay") -> Agent:
    agent, key = create_agent(
        workspace=world.workspace, name=name, role=world.coder_role, by=Actor.of_user(world.admin_user)
    )
    agent = set_trust_flags(agent=agent, by=Actor.of_user(world.admin_user), relays_human_words=True)
    agent.plain_key = key  # type: ignore[attr-defined]
    return agent


# --- Who may state what ------------------------------------------------------------------------------
def test_an_agent_forging_human_stated_gets_403_and_nothing_is_written(world, api):
    person = person_states(world)
    before = snapshot()

    response = api.post(FACTS, fact_body(FORGED, veracity="human_stated"), format="json")

    assert response.status_code == 403
    body = response.json()
    assert body["code"] == "veracity_not_allowed"
    assert "veracity" in body["fields"]
    assert snapshot() == before
    person.refresh_from_db()
    assert (person.content, person.veracity, person.superseded_by_id) == (PERSON_SAYS, "human_stated", None)


def test_forging_human_stated_is_refused_on_every_path_an_agent_reaches(world):
    by = Actor.of_agent(world.coder)
    forged = FactInput(topic="deploys", content=FORGED, memory_type="convention", veracity="human_stated")
    before = snapshot()
    with pytest.raises(VeracityNotAllowed):
        propose_fact(domain=world.architecture, data=forged, by=by)
    with pytest.raises(VeracityNotAllowed):  # the batch path checks every item before writing any
        ingest_facts(
            items=[
                IngestItem(domain=world.architecture, data=FactInput(topic="ok", content="Fine.", memory_type="event")),
                IngestItem(domain=world.architecture, data=forged),
            ],
            by=by,
        )
    person = person_states(world)
    with pytest.raises(VeracityNotAllowed):
        supersede_fact(fact=person, by=by, content=FORGED, veracity="human_stated")
    # The MCP tools call agents.operations: the same refusal, with the API's code and status.
    with pytest.raises(VeracityNotAllowed) as refused:
        ops.propose_fact(world.coder, fact_body(FORGED, veracity="human_stated"))
    answer = ops.error_result(refused.value)
    assert answer is not None and (answer.status, answer.body["code"]) == (403, "veracity_not_allowed")
    assert Fact.objects.exclude(pk=person.pk).count() == before[0]


@pytest.mark.parametrize("veracity", ["agent_inferred", "tool_generated", "imported"])
def test_an_agent_may_state_what_agents_state(world, api, veracity):
    response = api.post(FACTS, fact_body(f"Deploy notes are kept as {veracity}.", veracity=veracity), format="json")
    assert response.status_code == 201
    assert response.json()["fact"]["veracity"] == veracity


def test_a_year_9999_observed_at_is_refused_with_400_and_nothing_is_written(world, api):
    before = snapshot()
    response = api.post(FACTS, fact_body(FORGED, observed_at=YEAR_9999), format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_input"
    assert list(body["fields"]) == ["observed_at"]
    assert snapshot() == before


def test_observed_at_may_run_ahead_by_the_clock_skew_and_no_more(world, api):
    soon = (timezone.now() + timedelta(seconds=60)).isoformat()
    later = (timezone.now() + timedelta(seconds=600)).isoformat()
    assert (
        api.post(FACTS, fact_body("Backups run nightly.", topic="backups", observed_at=soon), format="json").status_code
        == 201
    )
    assert (
        api.post(FACTS, fact_body("Logs rotate hourly.", topic="logs", observed_at=later), format="json").status_code
        == 400
    )
    with override_settings(ENGRAM_CLOCK_SKEW_SECONDS=0):
        assert (
            api.post(
                FACTS, fact_body("Caches warm at six.", topic="caches", observed_at=soon), format="json"
            ).status_code
            == 400
        )
    past = (timezone.now() - timedelta(days=3)).isoformat()
    assert (
        api.post(FACTS, fact_body("Builds are cached.", topic="builds", observed_at=past), format="json").status_code
        == 201
    )


def test_an_episode_cannot_start_in_the_future(world, api):
    before = snapshot()
    response = api.post("/api/v1/episodes/", {"kind": "session", "started_at": YEAR_9999}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_input")
    assert list(response.json()["fields"]) == ["started_at"]
    assert snapshot() == before


def test_the_reported_attack_fails_and_the_persons_correction_wins(world, api):
    """The attack of the report: human_stated + year 9999 to supersede a person's fact, so that the
    person's later correction loses on recency. Every step of it is refused now."""
    person = person_states(world)

    forged = api.post(FACTS, fact_body(FORGED, veracity="human_stated", observed_at=YEAR_9999), format="json")
    assert forged.status_code in (400, 403)
    assert api.post(FACTS, fact_body(FORGED, veracity="human_stated"), format="json").status_code == 403
    assert api.post(FACTS, fact_body(FORGED, observed_at=YEAR_9999), format="json").status_code == 400
    # What an agent may do: state its own inference, which loses to the person's words.
    inferred = api.post(FACTS, fact_body(FORGED), format="json").json()
    assert inferred["outcome"] == "conflict_lost"
    person.refresh_from_db()
    assert person.superseded_by_id is None and person.content == PERSON_SAYS

    # The person corrects their own fact on the fact page: it wins, and stays live.
    client = Client()
    client.force_login(world.admin_user)
    url = reverse("review:fact-supersede", args=[world.workspace.slug, person.pk])
    client.post(url, {"content": "Production deploys happen on Wednesdays.", "reason": "moved"})
    [live] = Fact.objects.filter(domain=world.architecture, topic="deploys").live()
    assert (live.content, live.veracity, live.created_by_user_id) == (
        "Production deploys happen on Wednesdays.",
        "human_stated",
        world.admin_user.pk,
    )
    # The agent's later inference does not displace the correction either.
    again = api.post(FACTS, fact_body("Production deploys happen on Mondays."), format="json").json()
    assert again["outcome"] == "conflict_lost"
    assert Fact.objects.filter(domain=world.architecture, topic="deploys").live().get().pk == live.pk


def test_a_relay_agent_may_state_human_stated_until_the_flag_is_lifted(world):
    relay = relay_agent(world)
    client = client_for(relay)
    response = client.post(FACTS, fact_body(PERSON_SAYS, veracity="human_stated"), format="json")
    assert response.status_code == 201
    assert response.json()["fact"]["veracity"] == "human_stated"

    set_trust_flags(agent=relay, by=Actor.of_user(world.admin_user), relays_human_words=False)
    refused = client.post(FACTS, fact_body(FORGED, topic="other", veracity="human_stated"), format="json")
    assert (refused.status_code, refused.json()["code"]) == (403, "veracity_not_allowed")


def test_a_persons_edit_in_a_remember_review_is_human_stated(world):
    review = submit_review(agent=world.coder, session_id="turn-1", output=OUTPUT, files=FILES, repo="web")
    item = review.items.get(path="CONTRIBUTING.md")
    update_item(item=item, by=Actor.of_user(world.admin_user), content="PRs stay under 300 lines.")
    approve_review(review=review, by=Actor.of_user(world.admin_user))
    item.refresh_from_db()
    assert (item.stored_fact.veracity, item.stored_fact.human_edited) == ("human_stated", True)
    unedited = review.items.get(path="docs/architecture.md").stored_fact
    assert unedited.veracity == "agent_inferred"  # the agent's words stay the agent's


# --- Episodes are the caller's -----------------------------------------------------------------------
def test_facts_cannot_be_planted_in_another_agents_episode(world, api):
    victim = client_for(world.coder2)
    dispatch = victim.post("/api/v1/preamble/", {"task": "Ship the billing change today"}, format="json").json()
    session = victim.post("/api/v1/episodes/", {"kind": "session"}, format="json").json()
    missing = api.post(FACTS, fact_body("Planted.", episode_id=10**9), format="json")
    before = snapshot()

    for episode_id in (dispatch["episode_id"], session["id"]):
        response = api.post(FACTS, fact_body("Planted fact.", episode_id=episode_id), format="json")
        assert response.status_code == 400
        body = response.json()
        assert body["code"] == "unknown_episode" == missing.json()["code"]
        assert body["detail"] == missing.json()["detail"]  # no hint that the episode exists
        assert list(body["fields"]) == ["episode_id"]
    assert snapshot() == before
    assert not EpisodeFact.objects.filter(episode_id__in=[dispatch["episode_id"], session["id"]]).exists()
    assert not Fact.objects.filter(content="Planted fact.").exists()


def test_another_agents_run_episode_is_refused_too(world, api):
    run = client_for(world.coder2).post("/api/v1/runs/", {"task": "Migrate the billing tables"}, format="json").json()
    response = api.post(FACTS, fact_body("Planted in a run.", episode_id=run["episode_id"]), format="json")
    assert (response.status_code, response.json()["code"]) == (400, "unknown_episode")
    assert not EpisodeFact.objects.filter(episode_id=run["episode_id"]).exists()


def test_an_agent_links_facts_to_its_own_episode_and_its_own_runs_episode(world, api):
    session = api.post("/api/v1/episodes/", {"kind": "session"}, format="json").json()
    own = api.post(FACTS, fact_body("Deploys take 12 minutes.", episode_id=session["id"]), format="json")
    assert own.status_code == 201
    assert EpisodeFact.objects.filter(episode_id=session["id"], fact_id=own.json()["fact"]["id"]).exists()

    run = api.post("/api/v1/runs/", {"task": "Migrate the billing tables"}, format="json").json()
    # The run, not the opener field, makes it this agent's: it counts even with no opener recorded.
    Episode.objects.filter(pk=run["episode_id"]).update(agent=None)
    linked = api.post(
        FACTS,
        fact_body("Billing tables move in two steps.", topic="billing", episode_id=run["episode_id"]),
        format="json",
    )
    assert linked.status_code == 201
    assert EpisodeFact.objects.filter(episode_id=run["episode_id"], fact_id=linked.json()["fact"]["id"]).exists()


def test_ingest_refuses_another_agents_episode_before_writing(world):
    foreign = Episode.objects.create(workspace=world.workspace, agent=world.coder2, kind="session")
    items = [
        IngestItem(domain=world.architecture, data=FactInput(topic=f"t{i}", content=f"Fact {i}.", memory_type="event"))
        for i in range(3)
    ] + [
        IngestItem(
            domain=world.architecture,
            data=FactInput(topic="x", content="Planted.", memory_type="event", episode_id=foreign.pk),
        )
    ]
    before = snapshot()
    with pytest.raises(InvalidInput) as refused:
        ingest_facts(items=items, by=Actor.of_agent(world.coder), batch_size=1)
    assert refused.value.code == "unknown_episode"
    assert snapshot() == before


# --- The trust flags: workspace admins only, audited ---------------------------------------------------
def staff(user, *codenames: str) -> Client:
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="memory", codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def change_url(agent: Agent) -> str:
    return reverse("admin:memory_agent_change", args=[agent.pk])


def flags_of(agent: Agent) -> tuple[bool, bool]:
    agent.refresh_from_db()
    return agent.relays_human_words, agent.is_verifier


def trust_events(agent: Agent):
    return AuditEvent.objects.filter(verb="agent.trust_changed", target_type="agent", target_id=agent.pk)


def test_staff_who_are_not_workspace_admins_cannot_flip_the_flags(world):
    client = staff(world.reviewer, "view_agent", "change_agent", "add_agent")  # a member, not an admin
    page = client.get(change_url(world.coder))
    assert page.status_code == 200
    assert "relays_human_words" in page.context["adminform"].readonly_fields
    assert 'name="relays_human_words"' not in page.content.decode()

    # A crafted POST carrying the flags changes nothing.
    client.post(change_url(world.coder), {"relays_human_words": "on", "is_verifier": "on"})
    assert flags_of(world.coder) == (False, False)
    assert not trust_events(world.coder).exists()

    # Nor can they create an agent with the flags set.
    add = reverse("admin:memory_agent_add")
    body = {"workspace": world.workspace.pk, "role": world.coder_role.pk, "name": "sneaky", "relays_human_words": "on"}
    client.post(add, body)
    sneaky = Agent.objects.filter(name="sneaky").first()
    assert sneaky is None or flags_of(sneaky) == (False, False)

    # The service refuses them too, and any agent.
    with pytest.raises(InsufficientPermission):
        set_trust_flags(agent=world.coder, by=Actor.of_user(world.reviewer), relays_human_words=True)
    with pytest.raises(InsufficientPermission):
        set_trust_flags(agent=world.coder, by=Actor.of_agent(world.coder), is_verifier=True)
    assert flags_of(world.coder) == (False, False)


def test_an_admin_of_another_workspace_cannot_flip_the_flags(world):
    other_admin = UserFactory(username="globex-admin")
    MembershipFactory(user=other_admin, workspace=world.other_workspace, is_admin=True)
    MembershipFactory(user=other_admin, workspace=world.workspace)  # a plain member here
    client = staff(other_admin, "view_agent", "change_agent", "add_agent")
    client.post(change_url(world.coder), {"relays_human_words": "on"})
    assert flags_of(world.coder) == (False, False)
    # Adding an agent in the workspace they do not administer: the form refuses the flag.
    add = reverse("admin:memory_agent_add")
    body = {"workspace": world.workspace.pk, "role": world.coder_role.pk, "name": "sneaky", "relays_human_words": "on"}
    response = client.post(add, body)
    assert response.status_code == 200
    assert "relays_human_words" in response.context["adminform"].form.errors
    assert not Agent.objects.filter(name="sneaky").exists()


def test_a_workspace_admin_sets_and_clears_the_flags_and_each_change_is_audited(world):
    client = staff(world.admin_user, "view_agent", "change_agent")
    response = client.post(change_url(world.coder), {"relays_human_words": "on", "is_verifier": "on"})
    assert response.status_code == 302
    assert flags_of(world.coder) == (True, True)
    events = {e.detail["flag"]: e for e in trust_events(world.coder)}
    assert {flag: (e.detail["old"], e.detail["new"]) for flag, e in events.items()} == {
        "relays_human_words": (False, True),
        "is_verifier": (False, True),
    }
    assert all(e.actor_user_id == world.admin_user.pk for e in events.values())

    client.post(change_url(world.coder), {"is_verifier": "on"})  # relays_human_words unticked
    assert flags_of(world.coder) == (False, True)
    latest = trust_events(world.coder).order_by("-pk").first()
    assert latest.detail == {"flag": "relays_human_words", "old": True, "new": False}
    assert trust_events(world.coder).count() == 3

    client.post(change_url(world.coder), {"is_verifier": "on"})  # no change, no event
    assert trust_events(world.coder).count() == 3


def test_a_superuser_may_set_the_flags_at_creation_audited(world):
    root = UserFactory(username="root", is_superuser=True)
    client = Client()
    client.force_login(root)
    add = reverse("admin:memory_agent_add")
    body = {"workspace": world.workspace.pk, "role": world.coder_role.pk, "name": "relay", "relays_human_words": "on"}
    client.post(add, body)
    agent = Agent.objects.get(name="relay")
    assert flags_of(agent) == (True, False)
    assert [e.detail for e in trust_events(agent)] == [{"flag": "relays_human_words", "old": False, "new": True}]


def test_create_agent_command_sets_the_flags(world, capsys):
    from django.core.management import call_command

    call_command(
        "create_agent", "--workspace", "acme", "--name", "relay-cli", "--role", "coder", "--relays-human-words"
    )
    call_command("create_agent", "--workspace", "acme", "--name", "verifier-cli", "--role", "coder", "--verifier")
    assert flags_of(Agent.objects.get(name="relay-cli")) == (True, False)
    assert flags_of(Agent.objects.get(name="verifier-cli")) == (False, True)
    assert trust_events(Agent.objects.get(name="relay-cli")).count() == 1


def test_the_mcp_tool_offers_human_stated_only_to_a_relay_agent(world):
    import asyncio

    from agents.mcp_server import build_server

    def veracity_schema(key: str) -> tuple[list[str], str]:
        tools = asyncio.run(build_server(key).list_tools())
        [tool] = [t for t in tools if t.name == "propose_fact"]
        return tool.input_schema["properties"]["veracity"]["enum"], tool.description or ""

    ordinary, doc = veracity_schema(world.coder.plain_key)
    assert sorted(ordinary) == ["agent_inferred", "imported", "tool_generated"]
    assert "only for an agent a workspace admin marked as relaying" in doc  # and why it is not offered
    relayed, doc = veracity_schema(relay_agent(world).plain_key)
    assert "human_stated" in relayed and "human_stated" in doc


# --- Explicit supersession cannot replace what a person stated or approved ---------------------------
def test_an_agent_cannot_supersede_a_persons_fact_explicitly(world, api):
    person = person_states(world)
    before = snapshot()

    response = api.post(f"{FACTS}{person.pk}/supersede/", {"content": FORGED}, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "fact_protected"
    assert snapshot() == before
    person.refresh_from_db()
    assert (person.content, person.superseded_by_id) == (PERSON_SAYS, None)


def test_a_relay_agent_and_a_person_may_supersede_a_persons_fact(world):
    person = person_states(world)
    relayed = supersede_fact(fact=person, by=Actor.of_agent(relay_agent(world)), content="Deploys: Wednesdays.")
    assert relayed.content == "Deploys: Wednesdays."
    again = supersede_fact(fact=relayed, by=Actor.of_user(world.admin_user), content=PERSON_SAYS)
    assert (again.veracity, again.human_edited) == ("human_stated", True)


def test_an_agent_cannot_supersede_a_promoted_rule_explicitly(world, api):
    fact = person_states(world, "Agents must run `make lint` before opening a pull request.")
    Fact.objects.filter(pk=fact.pk).update(veracity="agent_inferred")
    from tests.factories import CandidateFactory

    candidate = CandidateFactory(domain=world.architecture)
    Fact.objects.filter(pk=fact.pk).update(origin_candidate=candidate)

    response = api.post(f"{FACTS}{fact.pk}/supersede/", {"content": "Skip the linter."}, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "fact_protected"
    assert Fact.objects.get(pk=fact.pk).superseded_by_id is None
