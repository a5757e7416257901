"""POST facts/batch/ at speed (issue 19, point 4) without a different answer: the batch validates its
items with one serializer, resolves its domains in one query, renders its facts with one FactOut,
and embeds in batches cut by token count — each of these answers exactly what the slow way did.
Real PostgreSQL and the real model."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.exceptions import ValidationError

from agents import operations
from agents.operations import serializers as s
from agents.operations.inputs import Validator, validated
from memory import selectors
from memory.actors import Actor
from memory.embeddings import OnnxEncoder, batches_by_length, embed_text, embed_texts, fact_text
from memory.errors import EngramError
from memory.models import Fact
from memory.services.tenancy import hidden_domains, require_visible_domain, set_grant
from tests.factories import DomainFactory, FactFactory

pytestmark = pytest.mark.django_db

BATCH = "/api/v1/facts/batch/"


def item(topic: str, content: str, **extra: object) -> dict[str, object]:
    return {"domain": "architecture", "topic": topic, "content": content, "memory_type": "convention", **extra}


def outcome(call, *args):
    """What a call answers: its value, or the API body of the error it raises."""
    try:
        return ("ok", call(*args))
    except (ValidationError, EngramError) as exc:
        answer = operations.error_result(exc)
        assert answer is not None
        return ("refused", answer.status, answer.body)


def test_one_validator_for_a_batch_answers_as_one_serializer_per_item(world):
    inputs = [
        item("a", "Builds run on GitHub Actions."),
        item("b", "x", memory_type="rumour"),
        item("a", "  Trimmed.  ", session_key="  s-1  ", observed_at="2024-01-02T03:04:05Z"),
        None,
        5,
        [],
        {},
        {"topic": "only a topic"},
        item("c", ""),
        item("c", "ok", session_key=7),
        item("c", "ok", source_observation_ids=[1, "x"], episode_id=0),
        item("c", "ok", repo="Not A Slug", veracity="gossip"),
        item("d", "Releases are tagged with semantic versions.", repo=None, episode_id=None),
    ]
    validate = Validator(s.FactProposeIn)
    for raw in inputs + inputs[::-1]:  # nothing of one item stays for the next
        assert outcome(validate, raw) == outcome(validated, s.FactProposeIn, raw)


def test_the_domains_of_a_batch_are_read_in_one_query_and_resolve_as_one_by_one(world):
    set_grant(role=world.coder_role, domain=world.conventions, level="none", by=Actor.system("t"))
    keys = {
        ("architecture", None),
        (" architecture ", None),
        ("context", "web"),
        ("repo:web/context", None),
        ("repo:web/context", "web"),
        ("repo:web/context", "api"),  # two repos named
        ("context", None),  # no such domain without a repo
        ("conventions", None),  # its role holds `none`: unknown, as a missing one
        ("nowhere", None),
        ("not a label!", None),
    }
    visible = {("architecture", None), (" architecture ", None), ("context", "web"), ("repo:web/context", "web")}
    with CaptureQueriesContext(connection) as queries:
        found = operations._batch_domains(world.coder, visible)
    assert len(queries.captured_queries) == 1
    assert found[("architecture", None)] == found[(" architecture ", None)] == world.architecture
    assert found[("context", "web")] == found[("repo:web/context", "web")] == world.repo_context

    def raise_(error: Exception) -> None:
        raise error

    found = operations._batch_domains(world.coder, keys)
    for key in keys:
        expected = outcome(lambda k: selectors.domain_for_agent(world.coder, domain=k[0], repo=k[1]), key)
        answer = found[key]
        got = outcome(raise_, answer) if isinstance(answer, EngramError) else ("ok", answer)
        assert got == expected, key


def test_the_queries_of_a_batch_do_not_grow_with_its_items(world, api):
    def count(first: int, n: int) -> int:
        items = [
            item(f"t{i}", f"Service {i} keeps its state in store {i}.", domain=("architecture", "conventions")[i % 2])
            for i in range(first, first + n)
        ]
        with CaptureQueriesContext(connection) as queries:
            response = api.post(BATCH, {"items": items}, format="json")
        assert response.status_code == 200 and response.json()["created"] == n
        return len(queries.captured_queries)

    count(0, 4)  # the first request of the key notes its use
    assert count(100, 10) == count(200, 40)


def test_the_queries_of_a_batch_do_not_grow_with_its_domains_or_topics(world, api):
    for name in ("operations", "security", "testing"):
        DomainFactory(workspace=world.workspace, name=name)

    def count(domains: tuple[str, ...], topics: int, first: int) -> int:
        items = [
            item(f"t{i % topics}", f"Service {i} keeps its state in store {i}.", domain=domains[i % len(domains)])
            for i in range(first, first + 12)
        ]
        with CaptureQueriesContext(connection) as queries:
            response = api.post(BATCH, {"items": items}, format="json")
        assert response.status_code == 200 and response.json()["created"] == 12
        return len(queries.captured_queries)

    count(("architecture",), 1, 0)  # the first request of the key notes its use
    many = ("architecture", "conventions", "operations", "security", "testing")
    assert count(("architecture",), 1, 100) == count(many, 12, 200)


def test_of_topics_reads_the_facts_of_exactly_its_domain_topic_pairs(world):
    arch_a = FactFactory(domain=world.architecture, topic="a")
    FactFactory(domain=world.architecture, topic="b")
    conv_b = FactFactory(domain=world.conventions, topic="b")
    FactFactory(domain=world.conventions, topic="a")  # the topic of one key, the domain of another
    FactFactory(domain=world.repo_context, topic="a")
    keys = {(world.architecture.pk, "a"), (world.conventions.pk, "b"), (world.architecture.pk, "missing")}
    assert sorted(Fact.objects.of_topics(keys).values_list("pk", flat=True)) == [arch_a.pk, conv_b.pk]
    assert not Fact.objects.of_topics(set()).exists()


def test_a_batch_checks_the_visibility_of_all_its_domains_in_one_query(world):
    set_grant(role=world.coder_role, domain=world.conventions, level="none", by=Actor.system("t"))
    domains = [world.architecture, world.conventions, world.repo_context, world.architecture]
    with CaptureQueriesContext(connection) as queries:
        hidden = hidden_domains(world.coder, domains)
    assert len(queries.captured_queries) == 1
    assert set(hidden) == {world.conventions.pk}
    assert operations.error_result(hidden[world.conventions.pk]) == operations.error_result(
        outcome_of_require(world.coder, world.conventions)
    )
    assert outcome_of_require(world.coder, world.architecture) is None


def outcome_of_require(agent, domain) -> EngramError | None:
    try:
        require_visible_domain(agent, domain)
    except EngramError as exc:
        return exc
    return None


def test_batched_vectors_are_the_vectors_of_one_text_at_a_time():
    texts = [
        fact_text("deploys", "Production deploys happen on Tuesdays."),
        "x",
        fact_text("payments", "The payments-service uses idempotency keys (PAY-4471) and retries 3 times. " * 40),
        "Überprüfung der Caches — 東京 cache invalidation",
        *(
            fact_text(f"svc-{i}", f"svc-{i} talks to mailer over gRPC on port {8000 + i}." * (1 + i % 3))
            for i in range(40)
        ),
    ]
    batched = np.asarray(embed_texts(texts, batch_size=32, bulk=True))
    alone = np.asarray([embed_text(text) for text in texts])
    assert np.array_equal(batched, alone)
    side_by_side = OnnxEncoder(2, side_by_side=True).encode(texts, batch_size=8)  # whatever the core count
    assert np.array_equal(side_by_side.astype(np.float64), alone)


def test_batches_are_cut_by_token_count():
    lengths = np.array([40, 12, 39, 12, 41, 200, 12, 40, 13, 38] * 4)
    batches = batches_by_length(lengths, 8)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert all(1 <= len(batch) <= 8 for batch in batches)
    widths = [[int(lengths[i]) for i in batch] for batch in batches]
    assert widths == sorted(widths, key=max) and all(w == sorted(w) for w in widths)
    assert widths[-1] == [200] * 4 and all(max(w) < 100 for w in widths[:-1])  # long texts pad no short one
    assert max(len(w) for w in widths) == 8
    assert batches_by_length(np.array([], dtype=np.int64), 32) == []
