"""Issue 32, part B: an open possible conflict is never orphaned by a supersession.

When a fact of an open pair is superseded — by a relay agent over the API, by a person, by a
proposal that wins a conflict, by a person's decision on another conflict, by a merge — the open
conflict follows it to its live successor and stays open, so the live contradiction stays in the
review queue, and the API's `GET conflicts/?status=open` lists exactly what the queue shows. A
conflict that cannot follow (the successor is the other fact of the pair, a fact was retired, rows
orphaned before this fix) reads `closed`, with one reason the API and the review page both give.
Real PostgreSQL; the rules alone classify (Mia/Omar is the pair they are unsure of)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from guardian.shortcuts import assign_perm

from agents.services import create_agent, set_trust_flags
from memory.actors import Actor
from memory.models import AuditEvent, Conflict, Fact, FactMention
from memory.selectors import WAITING, conflict_closure
from memory.services.conflicts import Said, apply_same, decide_conflict, lock_topic
from memory.services.facts import FactInput, ProposalResult, propose_fact, supersede_fact
from memory.services.hot import merge_near_duplicates
from memory.services.lifecycle import archive_fact
from review.selectors_queue import possible_conflicts
from tests.conftest import client_for
from tests.factories import FactFactory

pytestmark = pytest.mark.django_db

MIA = "Mia leads the platform team."
OMAR = "Omar leads the platform team."
LENA = "Lena leads the platform team now that Mia moved to infrastructure."
CONFLICTS = "/api/v1/conflicts/"


def propose(world, content, *, agent=None, topic="team") -> ProposalResult:
    return propose_fact(
        domain=world.architecture,
        data=FactInput(topic=topic, content=content, memory_type="convention"),
        by=Actor.of_agent(agent or world.coder),
    )


def open_pair(world) -> tuple[Fact, Fact, Conflict]:
    """Mia's fact by the coder, Omar's by the planner: the rules cannot tell, a person decides."""
    mia = propose(world, MIA).fact
    omar = propose(world, OMAR, agent=world.planner)
    assert omar.outcome == "possible_conflict", omar.reason
    conflict = Conflict.objects.get(pk=omar.conflict_id)
    assert (conflict.existing_id, conflict.proposed_id, conflict.status) == (mia.pk, omar.fact.pk, "open")
    return mia, omar.fact, conflict


def relay_agent(world):
    admin = Actor.of_user(world.admin_user)
    agent, key = create_agent(workspace=world.workspace, name="chat-relay", role=world.coder_role, by=admin)
    agent = set_trust_flags(agent=agent, by=admin, relays_human_words=True)
    agent.plain_key = key  # type: ignore[attr-defined]
    return agent


def api_conflicts(world, **query) -> dict[int, dict]:
    response = client_for(world.coder).get(CONFLICTS, query)
    assert response.status_code == 200, response.content
    return {row["id"]: row for row in response.json()["results"]}


def queue_ids(world) -> set[int]:
    return set(possible_conflicts([world.workspace], None).values_list("pk", flat=True))


def assert_api_and_queue_agree(world) -> None:
    """`?status=open` is every waiting pair; the queue asks each question once (a pair joined to a
    waiting question is settled with it); every other open row reads `closed`."""
    waiting = api_conflicts(world, status="open")
    questions = {pk for pk, row in waiting.items() if row["question"] is None or row["question"] not in waiting}
    assert questions == queue_ids(world)
    assert all(row["status"] == "open" and row["closed_reason"] == "" for row in waiting.values())
    closed = api_conflicts(world, status="closed")
    stored_open = set(Conflict.objects.filter(status="open").values_list("pk", flat=True))
    assert set(closed) == stored_open - set(waiting)
    assert all(row["status"] == "closed" and row["closed_reason"] for row in closed.values())
    listed = api_conflicts(world)
    assert {pk for pk, row in listed.items() if row["status"] == "open"} == set(waiting)


def reviewer_page(client, world, conflict: Conflict):
    client.force_login(world.admin_user)  # a workspace admin decides every domain of it
    response = client.get(f"/review/possible/{conflict.pk}/")
    assert response.status_code == 200
    return response


# --- The scenario, end to end ----------------------------------------------------------------
def test_a_relay_agent_superseding_one_side_moves_the_open_conflict_to_its_successor(world, client):
    mia, omar, conflict = open_pair(world)
    relay = relay_agent(world)

    response = client_for(relay).post(
        f"/api/v1/facts/{mia.pk}/supersede/", {"content": LENA, "reason": "Mia moved teams"}, format="json"
    )

    assert response.status_code == 201, response.content
    lena = response.json()["id"]
    conflict.refresh_from_db()
    # Still open, now asking about Lena (the live successor) against Omar.
    assert (conflict.status, conflict.existing_id, conflict.proposed_id) == ("open", lena, omar.pk)
    assert f"fact {mia.pk} was superseded by fact {lena}" in conflict.reason
    event = AuditEvent.objects.get(verb="conflict.repointed", target_id=conflict.pk)
    assert event.detail == {"side": "existing", "from": mia.pk, "to": lena, "other": omar.pk}
    assert event.actor_label == "agent:chat-relay"

    row = api_conflicts(world, status="open")[conflict.pk]
    assert (row["status"], row["existing"], row["proposed"], row["closed_reason"]) == ("open", lena, omar.pk, "")
    assert (row["existing_content"], row["proposed_content"]) == (LENA, OMAR)
    assert_api_and_queue_agree(world)

    page = reviewer_page(client, world, conflict)
    assert page.context["pending"] is True and "decided" not in page.context
    html = page.content.decode()
    assert f"existing · fact #{lena}" in html and f"proposed · fact #{omar.pk}" in html
    assert f"Contradicts: keep #{lena}" in html and "now that Mia moved to infrastructure" in html
    queue = client.get("/review/?kind=possible")
    assert [e.key for e in queue.context["entries"]] == [f"possible-{conflict.pk}"]

    # And it is decided on the successor like any other.
    decided = client.post(f"/review/possible/{conflict.pk}/decide/", {"action": "existing_wins"})
    assert decided.status_code in (200, 302)
    conflict.refresh_from_db()
    assert (conflict.status, conflict.winner_id, conflict.loser_id) == ("decided", lena, omar.pk)
    assert_api_and_queue_agree(world)


def test_a_persons_supersession_of_the_proposed_side_moves_it_too(world):
    mia, omar, conflict = open_pair(world)
    new = supersede_fact(fact=omar, by=Actor.of_user(world.admin_user), content="Omar and Mia share the lead.")
    conflict.refresh_from_db()
    assert (conflict.status, conflict.existing_id, conflict.proposed_id) == ("open", mia.pk, new.pk)
    assert_api_and_queue_agree(world)


def test_a_decision_on_another_conflict_moves_the_losers_open_conflicts_to_the_winner(world):
    mia, omar, first = open_pair(world)
    lena = propose(world, "Lena leads the platform team.", agent=world.coder2)
    assert lena.outcome == "possible_conflict", lena.reason
    second = Conflict.objects.get(pk=lena.conflict_id)
    rival = second.existing_id  # Mia or Omar, whichever is closer
    other = omar.pk if rival == mia.pk else mia.pk

    decide_conflict(
        conflict=second, by=Actor.of_user(world.admin_user), resolution="contradicts", winner_id=lena.fact.pk
    )

    # Lena was asked against Mia and Omar as one question with Mia/Omar (issue 34): her pair with
    # the other one still waits, and Mia/Omar, whose Mia is gone, does not follow Mia to Lena twice
    waiting = Conflict.objects.filter(WAITING)
    assert {frozenset((c.existing_id, c.proposed_id)) for c in waiting} == {frozenset((lena.fact.pk, other))}
    first.refresh_from_db()
    assert first.status == "open" and conflict_closure(first)
    second.refresh_from_db()
    assert (second.status, second.winner_id) == ("decided", lena.fact.pk)  # its own pair: decided, not moved
    assert_api_and_queue_agree(world)


def test_a_merge_moves_the_absorbed_facts_open_conflict_and_leaves_the_new_pair_alone(world, settings):
    mia, omar, conflict = open_pair(world)
    again = FactFactory(  # a near-duplicate of Omar's, written beside it (as an import could)
        domain=world.architecture,
        topic="team",
        content=OMAR,
        memory_type="convention",
        created_by_agent=world.coder2,
        created_at=omar.created_at + timedelta(seconds=1),
    )
    assert merge_near_duplicates(domain_id=world.architecture.pk, topic="team", by=Actor.system("test")) == 1
    conflict.refresh_from_db()
    survivor = Fact.objects.get(topic="team", content=OMAR, superseded_by__isnull=True)
    assert conflict.status == "open" and {conflict.existing_id, conflict.proposed_id} == {mia.pk, survivor.pk}
    assert {omar.pk, again.pk} - {survivor.pk}  # one of the two was absorbed
    assert_api_and_queue_agree(world)


# --- Closed: what cannot follow reads closed, with one reason for the API and the page ---------------
def test_a_conflict_whose_successor_is_the_other_fact_reads_closed_on_the_api_and_the_page(world, client):
    mia, omar, conflict = open_pair(world)
    with transaction.atomic():  # the merge path: Omar's fact absorbs Mia's
        lock_topic(world.architecture.pk, "team")
        apply_same(
            fact=omar, said=Said.of_fact(mia), by=Actor.system("test"), similarity=0.9, reason="merged", absorbed=mia
        )
    assert FactMention.objects.filter(fact=omar, merged_fact=mia).exists()
    conflict.refresh_from_db()
    assert (conflict.existing_id, conflict.proposed_id) == (mia.pk, omar.pk)  # nothing to follow to
    reason = f"fact #{mia.pk} was superseded by fact #{omar.pk}, the other fact of the pair"

    assert conflict.pk not in api_conflicts(world, status="open")
    row = api_conflicts(world, status="closed")[conflict.pk]
    assert (row["status"], row["closed_reason"], row["resolution"], row["winner"]) == ("closed", reason, "", None)
    assert_api_and_queue_agree(world)

    page = reviewer_page(client, world, conflict)
    assert page.context["pending"] is False
    assert reason in page.context["decided"].what
    assert f"Decided: Engram closed it: {reason}." in page.content.decode()
    # Deciding it now is refused as decided meanwhile, with the same reason.
    refused = client.post(f"/review/possible/{conflict.pk}/decide/", {"action": "both_true"}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 409 and reason in refused.content.decode()


def test_a_retired_fact_closes_its_open_conflict_and_bringing_it_back_reopens_it(world, client):
    mia, _omar, conflict = open_pair(world)
    archive_fact(fact=mia, by=Actor.of_user(world.admin_user))
    reason = f"fact #{mia.pk} was archived"
    row = api_conflicts(world)[conflict.pk]
    assert (row["status"], row["closed_reason"]) == ("closed", reason)
    assert_api_and_queue_agree(world)
    assert f"Decided: Engram closed it: {reason}." in reviewer_page(client, world, conflict).content.decode()
    fact_page = client.get(f"/memory/{world.workspace.slug}/facts/{mia.pk}/").content.decode()
    assert f"closed</strong> ({reason})" in fact_page and "waiting for a person" not in fact_page

    Fact.objects.filter(pk=mia.pk).update(status="active")  # an administrator brings it back
    assert api_conflicts(world, status="open")[conflict.pk]["closed_reason"] == ""
    assert_api_and_queue_agree(world)


def test_a_conflict_orphaned_before_this_fix_reads_closed_everywhere(world, client):
    mia, _omar, conflict = open_pair(world)
    lena = FactFactory(domain=world.architecture, topic="team", content=LENA, memory_type="convention")
    Fact.objects.filter(pk=mia.pk).update(superseded_by=lena, superseded_at=timezone.now())  # the old code's row
    reason = f"fact #{mia.pk} was superseded by fact #{lena.pk}"
    assert api_conflicts(world, status="closed")[conflict.pk]["closed_reason"] == reason
    assert_api_and_queue_agree(world)
    assert f"Decided: Engram closed it: {reason}." in reviewer_page(client, world, conflict).content.decode()


def test_an_already_asked_pair_is_not_asked_twice(world):
    """Mia/Omar and Lena/Omar both open; Mia is superseded by Lena: the first cannot move onto a
    pair already asked about, and reads closed."""
    mia, omar, first = open_pair(world)
    lena = FactFactory(
        domain=world.architecture,
        topic="team",
        content="Lena leads the platform team.",
        memory_type="convention",
    )
    second = Conflict.objects.create(
        workspace=world.workspace,
        domain=world.architecture,
        topic="team",
        existing=lena,
        proposed=omar,
        rule="",
        status="open",
        resolution="",
        similarity=0.9,
    )
    with transaction.atomic():
        lock_topic(world.architecture.pk, "team")
        apply_same(fact=lena, said=Said.of_fact(mia), by=Actor.system("test"), similarity=0.9, reason="r", absorbed=mia)
    first.refresh_from_db()
    assert (first.existing_id, first.proposed_id) == (mia.pk, omar.pk)
    assert set(api_conflicts(world, status="open")) == {second.pk}
    assert api_conflicts(world, status="closed")[first.pk]["closed_reason"] == (
        f"fact #{mia.pk} was superseded by fact #{lena.pk}"
    )
    assert_api_and_queue_agree(world)


# --- As of a moment ------------------------------------------------------------------------------------
def test_as_of_before_the_move_shows_the_pair_of_then(world):
    mia, omar, conflict = open_pair(world)
    before = timezone.now()
    new = supersede_fact(fact=mia, by=Actor.of_user(world.admin_user), content=LENA)
    api = client_for(world.coder)
    now_row = next(c for c in api.get(f"/api/v1/facts/{omar.pk}/").json()["conflicts"] if c["id"] == conflict.pk)
    assert (now_row["existing"], now_row["status"]) == (new.pk, "open")
    then = api.get(f"/api/v1/facts/{omar.pk}/", {"as_of": before.isoformat()}).json()
    then_row = next(c for c in then["conflicts"] if c["id"] == conflict.pk)
    assert (then_row["existing"], then_row["status"], then_row["closed_reason"]) == (mia.pk, "open", "")


def test_the_reviewer_of_the_domain_sees_the_moved_conflict_in_the_queue(world, client):
    mia, _omar, conflict = open_pair(world)
    assign_perm("memory.review_domain", world.reviewer, world.architecture)
    supersede_fact(fact=mia, by=Actor.of_user(world.admin_user), content=LENA)
    client.force_login(world.reviewer)
    page = client.get("/review/?kind=possible")
    assert [e.key for e in page.context["entries"]] == [f"possible-{conflict.pk}"]
