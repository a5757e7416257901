"""Knowing what is current (issue 34): an update supersedes what it updates, a contradiction is
caught wherever it sits in the domain, and what a proposal reads does not grow with its topic.
Real PostgreSQL and the installed models (embeddings and the pair model)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.actors import Actor
from memory.classifier import Relation, Verdict
from memory.models import Conflict, Fact
from memory.services.conflicts import Match, ask, decide_conflict
from memory.services.facts import FactInput, ProposalResult, propose_fact
from memory.services.nearby import NEIGHBOURS, nearest_ids
from review.selectors_queue import entry_for, possible_conflicts
from tests.factories import FactFactory

# What a default install runs: the rules, then the pair model's second reading.
pytestmark = pytest.mark.second_reading


def propose(world, content, *, topic, domain=None, **extra) -> ProposalResult:
    return propose_fact(
        domain=domain or world.architecture,
        data=FactInput(topic=topic, content=content, memory_type="convention", **extra),
        by=Actor.of_agent(world.coder),
    )


def caught(result: ProposalResult, old: Fact) -> bool:
    """Superseded either way, or asked about, against `old`."""
    return result.compared_with == old.pk and result.outcome in ("conflict_won", "conflict_lost", "possible_conflict")


def test_an_exclusive_choice_is_not_left_as_two_silent_live_facts(world):
    helm = propose(world, "We deploy the web service with Helm charts.", topic="deploy tool").fact
    result = propose(world, "We deploy the web service with Kustomize overlays.", topic="deploy tool")
    assert caught(result, helm), (result.outcome, result.reason)


def test_an_update_supersedes_the_value_it_replaces_and_as_of_recall_still_sees_it(world):
    then = timezone.now() - timedelta(days=30)
    old = propose(world, "The nightly build takes 40 minutes.", topic="ci", observed_at=then).fact
    before = timezone.now()
    result = propose(world, "The nightly build now takes 25 minutes.", topic="ci")
    assert (result.outcome, result.compared_with) == ("conflict_won", old.pk), result.reason
    assert result.conflict.rule == Conflict.Rule.UPDATE
    old.refresh_from_db()
    assert old.superseded_by_id == result.fact.pk
    assert Fact.objects.believed_at(before).filter(pk=old.pk).exists()  # kept in the chain
    assert list(Fact.objects.filter(topic="ci").live()) == [result.fact]


def test_a_contradiction_filed_under_another_topic_of_the_domain_is_caught(world):
    freeze = propose(world, "Release freeze starts on December 20.", topic="arch-sync").fact
    result = propose(world, "Release freeze starts on January 5.", topic="planning")
    assert caught(result, freeze), (result.outcome, result.reason)
    # not an announced update: across topics a person decides
    assert result.outcome == "possible_conflict"


def test_an_announced_update_filed_under_another_topic_supersedes(world):
    freeze = propose(world, "Release freeze starts on December 20.", topic="arch-sync").fact
    result = propose(world, "Release freeze now starts on January 5.", topic="planning")
    assert (result.outcome, result.compared_with) == ("conflict_won", freeze.pk), result.reason


def test_other_domains_are_never_compared(world):
    propose(world, "Production deploys happen on Tuesdays.", topic="deploys")
    result = propose(world, "Production deploys happen on Fridays.", topic="deploys", domain=world.conventions)
    assert result.outcome == "created"


def _propose_all(world, topic: str, texts: list[str]) -> list:
    """Each text proposed in turn under `topic`; their Meanings."""
    from memory.embeddings import embed_meanings

    meanings = embed_meanings([(topic, t) for t in texts])
    for text, meaning in zip(texts, meanings, strict=True):
        propose_fact(
            domain=world.architecture,
            data=FactInput(topic=topic, content=text, memory_type="convention"),
            by=Actor.of_agent(world.coder),
            embedding=meaning,
        )
    return meanings


def test_a_proposal_reads_a_bounded_number_of_neighbours_whatever_the_size_of_its_topic(world):
    texts = [f"Service number {i} listens on port {8000 + i} and logs to bucket b{i}." for i in range(40)]
    meanings = _propose_all(world, "ports", texts)
    assert Fact.objects.filter(topic="ports").live().count() >= NEIGHBOURS * 2
    assert len(nearest_ids(world.architecture.pk, meanings[0].content)) == NEIGHBOURS


def test_the_neighbours_of_many_statements_are_those_of_each_and_compared_by_their_content_vector(world):
    from memory.services.nearby import content_vector, live_rows, nearest_ids_many

    texts = [f"Worker pool {i} drains queue q{i} every {i + 1} minutes." for i in range(15)]
    meanings = _propose_all(world, "queues", texts)
    queries = [(world.architecture.pk, m.content) for m in meanings[:4]]
    assert nearest_ids_many(queries) == [nearest_ids(domain, vector) for domain, vector in queries]
    rows = live_rows(nearest_ids(world.architecture.pk, meanings[0].content))
    stored = {f.pk: f for f in Fact.objects.filter(pk__in=[r.pk for r in rows])}
    assert rows and all(content_vector(r) == list(stored[r.pk].content_embedding) for r in rows)
    legacy = rows[0]
    Fact.objects.filter(pk=legacy.pk).update(content_embedding=None)  # written before the column existed
    (again,) = [r for r in live_rows([legacy.pk])]
    assert content_vector(again) == list(stored[legacy.pk].embedding)


# --- One question per disagreement -----------------------------------------------------------------


def _unsure(fact: Fact, similarity: float = 0.8) -> Match:
    return Match(fact, Verdict(Relation.UNSURE, "unsure: similar wording, different claims"), similarity)


def _facts(world, *texts: str) -> list[Fact]:
    return [FactFactory(domain=world.architecture, topic="q", content=t) for t in texts]


def _waiting(world) -> list[Conflict]:
    return list(possible_conflicts([world.workspace], None).order_by("pk"))


def test_a_proposal_unsure_against_several_facts_is_one_question_and_both_true_settles_every_pair(world):
    x, y, new = _facts(world, "The cache is Redis.", "The cache holds 2 GB.", "The cache is now in memory.")
    head = ask(proposed=new, chosen=_unsure(x, 0.9), matches=[_unsure(x, 0.9), _unsure(y, 0.7)], by=Actor.system("t"))
    assert head.question_id is None
    joined = Conflict.objects.get(existing=y, proposed=new)
    assert joined.question_id == head.pk
    assert _waiting(world) == [head]  # the queue asks once
    decide_conflict(conflict=head, by=Actor.of_user(world.admin_user), resolution="both_true")
    joined.refresh_from_db()
    assert (joined.status, joined.resolution) == ("dismissed", "both_true")
    assert Fact.objects.filter(pk__in=[x.pk, y.pk, new.pk]).live().count() == 3
    assert _waiting(world) == []


def test_several_proposals_against_one_fact_join_its_question_and_keeping_the_fact_settles_them(world):
    x, p1, p2 = _facts(world, "Standup is at 9:30.", "Standup is at 10:00.", "Standup happens at 10:15.")
    by = Actor.system("t")
    head = ask(proposed=p1, chosen=_unsure(x), matches=[_unsure(x)], by=by)
    second = ask(proposed=p2, chosen=_unsure(x), matches=[_unsure(x)], by=by)
    assert second.question_id == head.pk
    assert _waiting(world) == [head]
    decide_conflict(conflict=head, by=Actor.of_user(world.admin_user), resolution="contradicts", winner_id=x.pk)
    second.refresh_from_db()
    assert (second.status, second.winner_id, second.loser_id) == ("decided", x.pk, p2.pk)
    assert list(Fact.objects.filter(pk__in=[x.pk, p1.pk, p2.pk]).live()) == [x]


def test_a_pair_the_decision_does_not_cover_is_asked_on_its_own(world):
    x, p1, p2 = _facts(world, "Standup is at 9:30.", "Standup is at 10:00.", "Standup happens at 10:15.")
    by = Actor.system("t")
    head = ask(proposed=p1, chosen=_unsure(x), matches=[_unsure(x)], by=by)
    second = ask(proposed=p2, chosen=_unsure(x), matches=[_unsure(x)], by=by)
    # p1 wins: x is superseded by p1, and x's pair with p2 follows it to p1 — not what was shown
    decide_conflict(conflict=head, by=Actor.of_user(world.admin_user), resolution="contradicts", winner_id=p1.pk)
    second.refresh_from_db()
    assert second.status == "open" and second.question_id is None
    assert _waiting(world) == [second]


def test_the_question_page_lists_the_pairs_asked_with_it(world, client):
    x, y, new = _facts(world, "The cache is Redis.", "The cache holds 2 GB.", "The cache is now in memory.")
    head = ask(proposed=new, chosen=_unsure(x, 0.9), matches=[_unsure(x, 0.9), _unsure(y, 0.7)], by=Actor.system("t"))
    joined = Conflict.objects.get(question=head)
    client.force_login(world.admin_user)
    page = client.get(f"/review/possible/{head.pk}/").content.decode()
    assert 'data-testid="asked-with"' in page and f"fact #{y.pk}" in page
    # the joined pair is not a queue item of its own while its question waits
    assert client.get(f"/review/possible/{joined.pk}/").status_code in (200, 404)
    assert joined not in _waiting(world)


def test_a_joined_pair_is_asked_on_its_own_once_its_question_no_longer_waits(world):
    """selectors.asked_alone, as the queue reads it: a pair joined to a question waits with it while
    the question is open with both facts live; once one of the question's facts leaves the live set
    (retired or superseded; the pair's own facts still live), the pair is asked on its own."""
    x, y, new = _facts(world, "The cache is Redis.", "The cache holds 2 GB.", "The cache is now in memory.")
    head = ask(proposed=new, chosen=_unsure(x, 0.9), matches=[_unsure(x, 0.9), _unsure(y, 0.7)], by=Actor.system("t"))
    joined = Conflict.objects.get(existing=y, proposed=new)
    assert joined.question_id == head.pk and _waiting(world) == [head]
    # The question's other fact retired behind the pair's back (an edit elsewhere): its question no longer waits.
    Fact.objects.filter(pk=x.pk).update(status="deprecated")
    assert _waiting(world) == [joined]
    Fact.objects.filter(pk=x.pk).update(status="active")
    assert _waiting(world) == [head]
    Fact.objects.filter(pk=x.pk).update(superseded_by=y, superseded_at=timezone.now())  # superseded: not live either
    assert _waiting(world) == [joined]


def test_one_pair_read_alone_follows_the_same_asked_alone_rule_as_the_list(world, client):
    """An item's page reads its pair alone (entry_for, by primary key, issue 38): it is pending,
    its decision's buttons enabled, exactly when the list would hold it."""
    x, y, new = _facts(world, "The cache is Redis.", "The cache holds 2 GB.", "The cache is now in memory.")
    head = ask(proposed=new, chosen=_unsure(x, 0.9), matches=[_unsure(x, 0.9), _unsure(y, 0.7)], by=Actor.system("t"))
    joined = Conflict.objects.get(existing=y, proposed=new)
    client.force_login(world.admin_user)

    def pending() -> set[int]:
        alone = {c.pk for c in (head, joined) if entry_for(world.admin_user, "possible", c.pk) is not None}
        assert alone == {c.pk for c in _waiting(world)}
        for c in (head, joined):
            page = client.get(f"/review/possible/{c.pk}/").content.decode()
            assert 'value="existing_wins"' in page  # its page, pending or not
            assert ('<fieldset class="controls" disabled>' not in page) == (c.pk in alone)
            # a pair that waits with its question says so, and where it is decided (not "closed")
            if c == joined and c.pk not in alone:
                link = f'<a href="/review/possible/{head.pk}/">possible conflict #{head.pk}</a>'
                assert f"This pair waits with {link}, asked as one question" in page
                assert "already-decided" not in page
        return alone

    assert pending() == {head.pk}
    Fact.objects.filter(pk=x.pk).update(status="deprecated")  # the question no longer waits
    assert pending() == {joined.pk}
    Fact.objects.filter(pk=x.pk).update(status="active")
    assert pending() == {head.pk}
