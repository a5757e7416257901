"""The knowledge graph's data (issue 37, point 6): each domain a parent node holding its facts,
short labels (a fact's first words), a link per fact that opens for the person viewing, and a
bounded answer that says how many facts it left out."""

import pytest
from django.test import Client
from guardian.shortcuts import assign_perm

from review import selectors_pages
from review.selectors_pages import GRAPH_FACT_LIMIT, graph_label
from tests.factories import FactFactory
from tests.review import graph_world


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _graph(user, query: str = "", client: Client | None = None) -> dict:
    response = (client or _client(user)).get(f"/memory/acme/graph.json{query}")
    assert response.status_code == 200
    return response.json()


def _by_kind(data: dict, kind: str) -> list[dict]:
    return [n["data"] for n in data["nodes"] if n["data"]["kind"] == kind]


def test_each_domain_is_a_parent_node_holding_its_facts(world, django_assert_max_num_queries):
    graph = graph_world.build(world)
    client = _client(world.admin_user)
    # session, person, their memberships and domains (read once a request), workspace, domains, facts, conflicts, episodes
    with django_assert_max_num_queries(9):
        data = _graph(world.admin_user, client=client)
    domains = {d["id"]: d["label"] for d in _by_kind(data, "domain")}
    assert sorted(domains.values()) == sorted(d.label for d in graph.domains)
    facts = _by_kind(data, "fact")
    assert len(facts) == len(graph.facts)
    assert {f["parent"] for f in facts} == set(domains)
    # a fact's parent is its own domain
    assert all(domains[f["parent"]] == f["domain"] for f in facts)
    # episodes stand beside the clusters (an episode's facts may be in several domains)
    assert [e.get("parent") for e in _by_kind(data, "episode")] == [None]
    ids = {n["data"]["id"] for n in data["nodes"]}
    assert all(e["data"]["source"] in ids and e["data"]["target"] in ids for e in data["edges"])
    assert {e["data"]["kind"] for e in data["edges"]} == {"supersedes", "episode"}
    assert data["facts"] == {"shown": len(graph.facts), "total": len(graph.facts), "capped": False}


def test_a_fact_is_labelled_with_its_first_words():
    text = "The billing service deploys through the staged pipeline and reports to the on-call channel."
    assert graph_label(text) == "The billing service deploys through the…"
    assert graph_label("Use uv.") == "Use uv."
    assert graph_label("x" * 90) == "x" * 40 + "…"
    assert len(graph_label(text)) <= 41 and text.startswith(graph_label(text).rstrip("…"))


def test_every_fact_link_opens_for_the_person_viewing(world):
    """The reviewer reviews architecture only: the graph holds that domain alone, and each of its
    links opens the fact page for them."""
    graph_world.build(world, per_domain=3)
    assign_perm("memory.review_domain", world.reviewer, world.architecture)
    data = _graph(world.reviewer)
    assert [d["label"] for d in _by_kind(data, "domain")] == ["architecture"]
    client = _client(world.reviewer)
    urls = [f["url"] for f in _by_kind(data, "fact")]
    assert len(urls) == 3
    assert [client.get(url).status_code for url in urls] == [200, 200, 200]


def test_the_answer_is_bounded_and_says_how_many_facts_it_left_out(world):
    FactFactory.create_batch(GRAPH_FACT_LIMIT + 5, domain=world.architecture)
    data = _graph(world.admin_user)
    assert len(_by_kind(data, "fact")) == GRAPH_FACT_LIMIT
    assert data["facts"] == {"shown": GRAPH_FACT_LIMIT, "total": GRAPH_FACT_LIMIT + 5, "capped": False}
    narrowed = selectors_pages.graph_data(world.admin_user, world.workspace, limit=10, q="build")
    assert narrowed["facts"] == {"shown": 10, "total": GRAPH_FACT_LIMIT + 5, "capped": False}


def test_past_the_count_cap_the_total_says_there_are_more(world, monkeypatch):
    """The total is counted no further than COUNT_CAP + 1 rows: past it, the cap and `capped`."""
    monkeypatch.setattr(selectors_pages, "COUNT_CAP", 12)
    FactFactory.create_batch(20, domain=world.architecture)
    data = selectors_pages.graph_data(world.admin_user, world.workspace, limit=10)
    assert data["facts"] == {"shown": 10, "total": 12, "capped": True}


@pytest.mark.parametrize("query", ["?domain=", "?q=pipeline"])
def test_filters_keep_the_domains_as_parents(world, query):
    graph_world.build(world, per_domain=2)
    data = _graph(world.admin_user, query)
    parents = {d["id"] for d in _by_kind(data, "domain")}
    assert parents and {f["parent"] for f in _by_kind(data, "fact")} == parents
