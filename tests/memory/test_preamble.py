"""The dispatch preamble contract (SPEC §5)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory import embeddings
from memory.actors import Actor
from memory.models import EpisodeFact, Fact
from memory.search.preamble import CLOSING_LINE, FACT_BUDGET_CHARS, build_preamble
from memory.services.notes import update_notes
from memory.services.tenancy import set_grant
from tests.factories import FactFactory, PolicyFactory

TASK = "Fix the flaky deploy pipeline for the billing service"  # > 20 characters


def deploy_fact(world, content, **kw):
    kw.setdefault("domain", world.architecture)
    return FactFactory(topic=kw.pop("topic", "deploys"), content=content, **kw)


def test_policies_working_memory_facts_and_closing_line_in_that_order(world):
    PolicyFactory(domain=world.conventions, rule="Never edit an issued invoice.")
    PolicyFactory(domain=world.architecture, rule="Ask before adding a datastore.", required_role=world.planner_role)
    update_notes(
        agent=world.coder,
        notes="Remember: staging is down until Monday.\n  keep this spacing",
        by=Actor.of_agent(world.coder),
    )
    fact = deploy_fact(world, "The deploy pipeline retries flaky steps twice.")
    p = build_preamble(agent=world.coder, task=TASK)
    assert p.policies == [
        "- [architecture] Ask before adding a datastore. (role: planner)",
        "- [conventions] Never edit an issued invoice.",
    ]
    assert p.working_memory == "Remember: staging is down until Monday.\n  keep this spacing"
    assert [f.pk for f in p.facts] == [fact.pk]
    text = p.text
    assert (
        text.index("Ask before adding")
        < text.index("staging is down")
        < text.index("retries flaky")
        < text.index(CLOSING_LINE)
    )
    assert text.endswith(CLOSING_LINE)
    assert "search_memory" in CLOSING_LINE


def test_tasks_under_twenty_characters_get_no_facts(world):
    deploy_fact(world, "The deploy pipeline retries flaky steps twice.")
    nineteen = "fix deploy pipeline"
    assert len(nineteen) == 19
    assert build_preamble(agent=world.coder, task=nineteen).facts == []
    twenty = "fix deploy pipelines"
    assert len(twenty) == 20
    assert len(build_preamble(agent=world.coder, task=twenty).facts) == 1


def test_at_most_five_facts(world):
    for i in range(8):
        deploy_fact(
            world, f"Deploy pipeline note {i}: the billing service deploy takes {i + 2} minutes.", topic=f"d{i}"
        )
    assert len(build_preamble(agent=world.coder, task=TASK).facts) == 5


def test_facts_stay_within_the_character_budget(world):
    for i in range(5):
        deploy_fact(
            world,
            f"Deploy pipeline detail {i}: " + "the billing service deploy pipeline is careful. " * 8,
            topic=f"d{i}",
        )
    p = build_preamble(agent=world.coder, task=TASK)
    assert 1 <= len(p.facts) < 5
    assert sum(len(line) + 1 for line in p.fact_lines) <= FACT_BUDGET_CHARS + 1


def test_repo_scoped_facts_of_the_given_repo_come_first(world):
    general = deploy_fact(
        world, "The deploy pipeline of the billing service retries flaky deploy steps twice, deploy deploy."
    )
    repo = deploy_fact(world, "Deploys of this repo need a green pipeline.", domain=world.repo_context)
    assert build_preamble(agent=world.coder, task=TASK, repo="web").facts[0].pk == repo.pk
    assert build_preamble(agent=world.coder, task=TASK).facts[0].pk == general.pk


def test_none_domains_superseded_expired_and_inactive_facts_never_appear(world):
    visible = deploy_fact(world, "The deploy pipeline retries flaky steps twice.")
    hidden = deploy_fact(world, "Deploy pipeline secrets live in Vault.", domain=world.conventions)
    PolicyFactory(domain=world.conventions, rule="Hidden policy.")
    set_grant(role=world.coder_role, domain=world.conventions, level="none", by=Actor.system("t"))
    newer = deploy_fact(world, "The deploy pipeline runs on Buildkite.", topic="ci")
    deploy_fact(
        world, "The deploy pipeline runs on Jenkins.", topic="ci", superseded_by=newer, superseded_at=timezone.now()
    )
    deploy_fact(
        world,
        "Deploy pipeline freeze for the billing service.",
        topic="freeze",
        valid_until=timezone.now() - timedelta(days=1),
    )
    deploy_fact(world, "Deploy pipeline flaky step list is stale.", topic="stale", status="challenged")
    deploy_fact(world, "Deploy pipeline archived note.", topic="old", status="archived")
    p = build_preamble(agent=world.coder, task=TASK)
    assert {f.pk for f in p.facts} == {visible.pk, newer.pk}
    assert "Hidden policy." not in p.text
    assert hidden.pk in {f.pk for f in build_preamble(agent=world.planner, task=TASK).facts}


def test_returned_facts_are_recalled_in_a_dispatch_episode(world):
    fact = deploy_fact(world, "The deploy pipeline retries flaky steps twice.")
    p = build_preamble(agent=world.coder, task=TASK)
    assert Fact.objects.get(pk=fact.pk).recall_count == 1
    assert EpisodeFact.objects.filter(episode_id=p.episode_id, fact=fact, relation="recalled").exists()


def test_the_preamble_never_embeds(world, monkeypatch):
    deploy_fact(world, "The deploy pipeline retries flaky steps twice.")

    def refuse(*args, **kwargs):
        raise AssertionError("the preamble must not compute embeddings")

    monkeypatch.setattr(embeddings, "embed_texts", refuse)
    monkeypatch.setattr(embeddings, "get_model", refuse)
    assert len(build_preamble(agent=world.coder, task=TASK).facts) == 1


def test_promoted_facts_carry_their_scope(world):
    deploy_fact(
        world,
        "Retry the deploy pipeline once on ERR_TIMEOUT.",
        valid_for=["billing"],
        not_valid_for=["mobile"],
        verification="rerun the pipeline",
    )
    line = build_preamble(agent=world.coder, task=TASK).fact_lines[0]
    assert line.endswith("(applies to: billing; not for: mobile; verify: rerun the pipeline)")


@pytest.mark.parametrize("task", ["", "   ", "!!! ??? ... --- ===="])
def test_tasks_without_terms_still_get_policies(world, task):
    PolicyFactory(domain=world.conventions, rule="Always run tests.")
    p = build_preamble(agent=world.coder, task=task)
    assert p.facts == [] and p.policies == ["- [conventions] Always run tests."]
