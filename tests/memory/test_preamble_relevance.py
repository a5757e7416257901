"""The preamble's facts are about the task and never repeat its rules (issue 39, point 2; design
note 002: memory holds only what helps the task and never repeats the rules). Real MiniLM vectors,
the write classifier and the pair model decide, as they decide a re-mention."""

from __future__ import annotations

import pytest

from memory.search import preamble
from memory.search.preamble import build_preamble
from memory.services.embedding import embed_missing
from tests.factories import FactFactory, PolicyFactory

pytestmark = pytest.mark.usefixtures("no_term_statistics")


@pytest.fixture(autouse=True)
def empty_vector_cache():
    preamble._vectors_cache.clear()
    yield
    preamble._vectors_cache.clear()


def fact(world, topic: str, content: str, domain=None):
    return FactFactory(domain=domain or world.architecture, topic=topic, content=content, memory_type="convention")


@pytest.mark.second_reading
def test_a_fact_paraphrasing_an_active_policy_is_left_out_and_a_detail_beyond_it_stays(world):
    PolicyFactory(domain=world.architecture, rule="Never edit an issued invoice; issue a credit note instead.")
    paraphrase = fact(world, "invoices", "An issued invoice is never edited: corrections go through a credit note.")
    detail = fact(world, "credit notes", "Credit notes for invoices are created with bin/credit-note --invoice <id>.")
    embed_missing()
    p = build_preamble(agent=world.coder, task="Correct an issued invoice for a customer with a credit note")
    shown = {f.pk for f in p.facts}
    assert paraphrase.pk not in shown
    assert p.restating == {paraphrase.pk: "Never edit an issued invoice; issue a credit note instead."}
    assert detail.pk in shown


def test_no_fact_enters_on_common_words_alone(world):
    rounding = fact(world, "money rounding", "Money amounts are rounded half-even to the cent, in the Money class.")
    redis = fact(world, "redis eviction", "Redis evicts keys with allkeys-lru when the cache is full; check the TTLs.")
    pipeline = fact(world, "deploy pipeline", "The deploy pipeline runs the checks, then ships the service.")
    embed_missing()
    task = "Fix the money rounding bug: amounts are off by a cent, check and update the service"
    shown = [f.pk for f in build_preamble(agent=world.coder, task=task).facts]
    assert shown == [rounding.pk]
    assert redis.pk not in shown and pipeline.pk not in shown


def test_a_task_nothing_stored_helps_gets_no_fact_at_all(world):
    fact(world, "deploy pipeline", "The deploy pipeline runs the checks, then ships the service.")
    fact(world, "deploy keys", "Deploy keys are rotated every 90 days by the platform team.")
    embed_missing()
    p = build_preamble(agent=world.coder, task="Update the README badge that shows the deploy status")
    assert p.facts == []
    assert "Possibly relevant facts" not in p.text


def test_the_bar_is_a_share_of_the_tasks_own_term_weight(world, monkeypatch):
    """A fact matching one rare term of a long task is below MIN_COVERAGE; with the bar at zero
    it enters: the bar, not the ranking, keeps it out."""
    stray = fact(world, "kafka", "The ledger-events topic on Kafka keeps seven days of messages.")
    fact(world, "noise", "Nothing here is about the task.")
    embed_missing()
    task = "Rotate the payroll export credentials and tell finance about ledger-events downtime windows"
    assert build_preamble(agent=world.coder, task=task).facts == []
    monkeypatch.setattr(preamble, "MIN_COVERAGE", 0.0)
    assert [f.pk for f in build_preamble(agent=world.coder, task=task).facts] == [stray.pk]


@pytest.mark.second_reading
def test_a_restatement_the_rules_call_a_different_case_is_read_by_the_pair_model(world, monkeypatch):
    """The rules read "at least 20 minutes" against "twenty minutes or longer" as a different case
    (not SAME); the pair model reads them as the same (p ≥ RESTATES_P_SAME) and the texts are close:
    the fact restates the policy. Without that second bar it is listed."""
    rule = (
        "Every production deploy of a customer-facing service must run in the canary stage for at least 20 "
        "minutes before full rollout."
    )
    PolicyFactory(domain=world.architecture, rule=rule)
    soak = fact(
        world,
        "canary soak",
        "Services that customers hit directly are never promoted straight to 100%: a new build first takes "
        "canary traffic and has to soak there for twenty minutes or longer.",
    )
    embed_missing()
    task = "Roll out the new build of the customer-facing tracking service: how long must the canary soak?"
    p = build_preamble(agent=world.coder, task=task)
    assert soak.pk not in {f.pk for f in p.facts}
    assert p.restating == {soak.pk: rule}
    monkeypatch.setattr(preamble, "RESTATES_P_SAME", 1.01)
    assert soak.pk in {f.pk for f in build_preamble(agent=world.coder, task=task).facts}
