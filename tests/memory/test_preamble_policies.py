"""The preamble leaves out facts that restate a policy it already shows (issue 20; design note
002: "remove memory that duplicates rules"). Real MiniLM vectors and the write classifier decide,
as they decide a re-mention."""

from __future__ import annotations

import pytest

from memory import embeddings
from memory.actors import Actor
from memory.models import Fact
from memory.search import preamble
from memory.search.hybrid import search_memory
from memory.search.preamble import build_preamble
from memory.services.facts import FactInput, propose_fact
from tests.factories import FactFactory, PolicyFactory

TASK = "Hotfix for production deploys: may I force-push to main on the release branch?"

pytestmark = pytest.mark.usefixtures("no_term_statistics")


def write(world, content: str, topic: str) -> Fact:
    """Through the real write path: the fact gets its MiniLM vector."""
    result = propose_fact(
        domain=world.architecture,
        data=FactInput(topic=topic, content=content, memory_type="convention"),
        by=Actor.of_agent(world.coder),
    )
    # created, or asked about against a live fact it may contradict (issue 34: across topics of
    # the domain): either way it is a new live fact
    assert result.outcome in ("created", "possible_conflict"), result.reason
    return result.fact


@pytest.fixture(autouse=True)
def empty_vector_cache():
    preamble._vectors_cache.clear()
    yield
    preamble._vectors_cache.clear()


def test_a_fact_restating_a_policy_is_left_out_but_a_related_one_stays(world):
    PolicyFactory(domain=world.conventions, rule="Never force-push to main.")
    PolicyFactory(domain=world.conventions, rule="Production deploys happen on Tuesdays.")
    restating = write(world, "Force-pushing to main is never allowed.", "git")
    reworded = write(world, "Deploys to production happen on Tuesdays.", "deploys")
    contradicting = write(world, "Production deploys happen on Fridays.", "release days")
    related = write(world, "After a force-push to a release branch, rerun the deploy checks.", "git")

    p = build_preamble(agent=world.coder, task=TASK)

    shown = {f.pk for f in p.facts}
    assert restating.pk not in shown and reworded.pk not in shown
    assert p.restating == {
        restating.pk: "Never force-push to main.",
        reworded.pk: "Production deploys happen on Tuesdays.",
    }
    assert {contradicting.pk, related.pk} <= shown  # about the same thing, saying something else
    assert "Force-pushing to main is never allowed" not in p.text
    assert p.text.count("Never force-push to main.") == 1  # the policy line itself


def test_a_left_out_fact_is_still_found_by_search_and_not_counted_as_recalled(world):
    PolicyFactory(domain=world.conventions, rule="Never force-push to main.")
    restating = write(world, "Force-pushing to main is never allowed.", "git")
    p = build_preamble(agent=world.coder, task=TASK)
    assert restating.pk in p.restating
    assert Fact.objects.get(pk=restating.pk).recall_count == 0
    for mode in ("keyword", "hybrid"):
        found = search_memory(agent=world.coder, query="is force-pushing to main allowed", mode=mode, limit=5)
        assert restating.pk in [h.fact.pk for h in found.hits], mode


def test_without_policies_nothing_is_left_out(world):
    restating = write(world, "Force-pushing to main is never allowed.", "git")
    p = build_preamble(agent=world.coder, task=TASK)
    assert [f.pk for f in p.facts] == [restating.pk] and p.restating == {}


def test_a_fact_without_a_vector_yet_is_left_out_only_when_its_text_is_the_rule(world):
    PolicyFactory(domain=world.conventions, rule="Never force-push to main.")
    same = FactFactory(domain=world.architecture, topic="git", content="never force-push to main")
    reworded = FactFactory(domain=world.architecture, topic="git", content="Force-pushing to main is never allowed.")
    assert same.embedding is None and reworded.embedding is None
    p = build_preamble(agent=world.coder, task=TASK)
    assert set(p.restating) == {same.pk}
    assert reworded.pk in {f.pk for f in p.facts}


def test_policies_are_embedded_once_per_process_and_the_task_never(world, monkeypatch):
    PolicyFactory(domain=world.conventions, rule="Never force-push to main.")
    write(world, "Force-pushing to main is never allowed.", "git")
    embedded: list[str] = []
    real = embeddings.embed_texts

    def counting(texts, **kw):
        embedded.extend(texts)
        return real(texts, **kw)

    monkeypatch.setattr(embeddings, "embed_texts", counting)
    first = build_preamble(agent=world.coder, task=TASK)
    assert embedded and "Never force-push to main." in embedded
    assert TASK not in embedded and all("Hotfix" not in text for text in embedded)
    embedded.clear()
    second = build_preamble(agent=world.coder, task=TASK)
    assert embedded == []  # cached
    assert first.restating == second.restating != {}
