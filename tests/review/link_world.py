"""A workspace with a pending item of every kind and decided conflicts of every sort, built through
the services: what the link tests open and crawl (tests/review/test_links.py, test_link_crawl.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.actors import Actor
from memory.models import Conflict, Fact
from memory.services.conflicts import decide_conflict
from memory.services.facts import FactInput, propose_fact
from review.models import RememberReview
from review.services import approve_review, submit_review
from tests.conftest import World
from tests.review import queue_items
from tests.review.samples import FILES, OUTPUT


@dataclass
class LinkWorld:
    agents_conflict: Conflict  # decided by a rule between two agent-inferred facts
    human_lost: Conflict  # decided by a rule, a human-stated fact lost
    open_possible: Conflict
    both_true: Conflict  # a possible conflict a person decided "both true"
    challenged: Fact
    remember: RememberReview  # pending
    approved: RememberReview  # approved: its items link to the facts they stored


def _said(world: World, text: str, *, topic: str, human: bool = False) -> Any:
    """The write's result (its fact and the conflict it decided, if any)."""
    by = Actor.of_user(world.admin_user) if human else Actor.of_agent(world.coder)
    veracity = {"veracity": "human_stated"} if human else {}
    data = FactInput(topic=topic, content=text, memory_type="convention", **veracity)
    return propose_fact(domain=world.architecture, by=by, data=data)


def build(world: World) -> LinkWorld:
    """Every kind of item the dashboard, queue and memory browser link to."""
    _said(world, "The web app builds with npm run build on Node 18.", topic="build")
    agents_conflict = _said(world, "The web app builds with npm run build on Node 20.", topic="build").conflict
    human = _said(world, "Deploys happen on Tuesdays.", topic="deploys", human=True).fact
    Fact.objects.filter(pk=human.pk).update(confidence=0.9)
    human_lost = _said(world, "Deploys happen on Fridays.", topic="deploys", human=True).conflict
    assert agents_conflict is not None and human_lost is not None and human_lost.loser_id == human.pk
    open_possible = queue_items.possible(
        world.coder, world.architecture, "cache", "The cache TTL is 60 seconds.", "Cached pages live a minute."
    )
    both_true = queue_items.possible(
        world.coder, world.conventions, "style", "Indent with four spaces.", "Python files use black."
    )
    decide_conflict(conflict=both_true, by=Actor.of_user(world.admin_user), resolution="both_true")
    queue_items.candidate(world.coder, world.architecture, "Run make lint before every push.")
    challenged = queue_items.challenged(world.coder, world.conventions, "naming", "Modules are snake_case.")
    remember = submit_review(agent=world.coder, session_id="turn-1", output=OUTPUT, files=FILES, repo="web")
    approved = submit_review(agent=world.coder2, session_id="turn-2", output=OUTPUT, files=FILES, repo="web")
    approve_review(review=approved, by=Actor.of_user(world.admin_user))
    return LinkWorld(agents_conflict, human_lost, open_possible, both_true, challenged, remember, approved)
