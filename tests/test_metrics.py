"""/metrics (issue 21): Prometheus text for localhost or a bearer token, request latency per view
name, write outcomes, embedding time, review latency, the queue's size — and no memory content.
Real PostgreSQL and the real model; counters are read before and after, since they live as long
as the process."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.test import RequestFactory
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from config.metrics import metrics_view
from memory.actors import Actor
from memory.embeddings import embed_text, embed_texts
from memory.errors import InvalidInput
from memory.models import Conflict
from memory.services.batch import IngestItem, propose_facts
from memory.services.conflicts import decide_conflict
from memory.services.facts import FactInput, propose_fact
from memory.services.promotion import approve_candidate
from review.models import RememberReview
from review.selectors_queue import KINDS, queue
from review.services import reject_review, submit_review
from tests.conftest import client_for
from tests.review import queue_items
from tests.review.samples import FILES, OUTPUT

TOKEN = "s3cret-metrics-token-0123456789"
OUTCOMES = ("created", "re_mentioned", "conflict_won", "conflict_lost", "possible_conflict")


@pytest.fixture(autouse=True)
def _metrics_settings(settings):
    settings.ENGRAM_METRICS_LOCAL = True
    settings.ENGRAM_METRICS_TOKEN = ""


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def propose(world, content: str, *, topic: str = "team", agent=None):
    return propose_fact(
        domain=world.architecture,
        data=FactInput(topic=topic, content=content, memory_type="convention"),
        by=Actor.of_agent(agent or world.coder),
    )


# --- The endpoint and who may read it -----------------------------------------------------------


def test_metrics_answers_prometheus_text_from_localhost(world, client):
    response = client.get("/metrics")  # the test client's REMOTE_ADDR is 127.0.0.1
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    names = {family.name for family in text_string_to_metric_families(response.content.decode())}
    assert {"engram_queue_size", "engram_fact_writes", "engram_embedding_seconds"} <= names
    assert "django_http_requests_latency_seconds_by_view_method" in names


@pytest.mark.parametrize("address", ["10.1.2.3", "192.168.0.9", "2001:db8::1", ""])
def test_metrics_refuses_another_address_without_the_token(world, address):
    response = metrics_view(RequestFactory().get("/metrics", REMOTE_ADDR=address))
    assert response.status_code == 403
    assert response.content == b"Forbidden"


def test_metrics_accepts_the_bearer_token_from_anywhere_and_refuses_a_wrong_one(world, settings):
    settings.ENGRAM_METRICS_TOKEN = TOKEN
    factory = RequestFactory()
    allowed = metrics_view(factory.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"))
    assert allowed.status_code == 200 and b"engram_queue_size" in allowed.content
    for header in (f"Bearer {TOKEN}x", "Bearer ", f"Basic {TOKEN}", TOKEN):
        refused = metrics_view(factory.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION=header))
        assert refused.status_code == 403, header
    # A wrong token is refused even from localhost: it is not silently ignored.
    wrong = metrics_view(factory.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer nope"))
    assert wrong.status_code == 403


def test_metrics_refuses_a_forwarded_loopback_request_and_loopback_when_local_is_off(world, settings):
    factory = RequestFactory()
    proxied = factory.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert metrics_view(proxied).status_code == 403
    assert metrics_view(factory.get("/metrics", REMOTE_ADDR="::1")).status_code == 200
    settings.ENGRAM_METRICS_LOCAL = False
    assert metrics_view(factory.get("/metrics", REMOTE_ADDR="127.0.0.1")).status_code == 403


def test_metrics_only_answers_reads(world, client):
    assert client.post("/metrics").status_code == 405


# --- What it measures ---------------------------------------------------------------------------


def test_write_counter_moves_by_exactly_the_outcomes_of_the_proposals(world, django_capture_on_commit_callbacks):
    before = {outcome: value("engram_fact_writes_total", outcome=outcome) for outcome in OUTCOMES}
    results = []
    with django_capture_on_commit_callbacks(execute=True):
        results.append(propose(world, "Mia leads the platform team."))
        results.append(propose(world, "Mia leads the platform team."))  # a re-mention
        results.append(propose(world, "Omar leads the platform team.", agent=world.planner))  # unsure
        results.append(propose(world, "Python code is indented with spaces.", topic="style"))
        results.append(propose(world, "Python code is indented with tabs.", topic="style"))
        with pytest.raises(InvalidInput):  # refused: writes and counts nothing
            propose(world, "", topic="style")
        batch = propose_facts(
            items=[
                IngestItem(world.conventions, FactInput(topic=f"t{i}", content=text, memory_type="convention"))
                for i, text in enumerate(
                    [
                        "Commit messages use the imperative mood.",
                        "Every service exposes /healthz.",
                        "Lockfiles are committed.",
                    ]
                )
            ],
            by=Actor.of_agent(world.coder),
        )
        results += batch
    expected = Counter(result.outcome for result in results)  # type: ignore[union-attr]
    assert expected["created"] >= 5 and expected["re_mentioned"] == 1
    assert {outcome: value("engram_fact_writes_total", outcome=outcome) - before[outcome] for outcome in OUTCOMES} == {
        outcome: float(expected[outcome]) for outcome in OUTCOMES
    }


def test_a_rolled_back_write_is_not_counted(world, django_capture_on_commit_callbacks):
    from django.db import transaction

    before = value("engram_fact_writes_total", outcome="created")
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError), transaction.atomic():
        propose(world, "Deploys happen on Tuesdays.", topic="deploys")
        raise RuntimeError("undone")
    assert value("engram_fact_writes_total", outcome="created") == before


def test_embedding_histogram_counts_single_and_batch_calls(world):
    single = value("engram_embedding_seconds_count", mode="single")
    batch = value("engram_embedding_seconds_count", mode="batch")
    embed_text("The build runs on Node 20.")
    embed_texts(["one text", "another text", "a third"])
    assert value("engram_embedding_seconds_count", mode="single") == single + 1
    assert value("engram_embedding_seconds_count", mode="batch") == batch + 1
    assert value("engram_embedding_seconds_sum", mode="single") > 0


def test_a_resolved_remember_review_moves_review_latency_by_one_in_its_bucket(
    world, reviewer_is_workspace_admin, django_capture_on_commit_callbacks
):
    review = submit_review(agent=world.coder, session_id="turn-1", output=OUTPUT, files=FILES, repo="web")
    RememberReview.objects.filter(pk=review.pk).update(created_at=timezone.now() - timedelta(hours=2))
    review.refresh_from_db()
    count = value("engram_review_latency_seconds_count", kind="remember")
    within_an_hour = value("engram_review_latency_seconds_bucket", kind="remember", le="3600.0")
    within_four = value("engram_review_latency_seconds_bucket", kind="remember", le="14400.0")
    with django_capture_on_commit_callbacks(execute=True):
        reject_review(review=review, by=Actor.of_user(world.reviewer))
    assert value("engram_review_latency_seconds_count", kind="remember") == count + 1
    assert value("engram_review_latency_seconds_bucket", kind="remember", le="3600.0") == within_an_hour
    assert value("engram_review_latency_seconds_bucket", kind="remember", le="14400.0") == within_four + 1


def test_deciding_a_possible_conflict_and_approving_a_candidate_move_their_kinds(
    world, reviewer_reviews_world_domains, django_capture_on_commit_callbacks
):
    conflict = queue_items.possible(world.coder, world.architecture, "lead", "Mia leads.", "Omar leads.")
    Conflict.objects.filter(pk=conflict.pk).update(detected_at=timezone.now() - timedelta(minutes=3))
    candidate = queue_items.candidate(world.coder, world.architecture, "Build with npm run build.")
    possible = value("engram_review_latency_seconds_count", kind="possible")
    short = value("engram_review_latency_seconds_bucket", kind="possible", le="300.0")
    approved = value("engram_review_latency_seconds_count", kind="candidate")
    by = Actor.of_user(world.reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        decide_conflict(conflict=conflict, by=by, resolution="both_true")
        approve_candidate(candidate=candidate, by=by)
        approve_candidate(candidate=candidate, by=by)  # approving again is no second decision
    assert value("engram_review_latency_seconds_count", kind="possible") == possible + 1
    assert value("engram_review_latency_seconds_bucket", kind="possible", le="300.0") == short + 1
    assert value("engram_review_latency_seconds_count", kind="candidate") == approved + 1


def test_queue_gauge_equals_the_queues_count(world, client, reviewer_is_workspace_admin):
    queue_items.candidate(world.coder, world.architecture, "Build with npm run build.")
    queue_items.candidate(world.coder, world.conventions, "Lint before pushing.")
    queue_items.challenged(world.coder, world.architecture, "cache", "The cache holds for an hour.")
    queue_items.possible(world.coder, world.conventions, "lead", "Mia leads.", "Omar leads.")
    submit_review(agent=world.coder, session_id="turn-1", output=OUTPUT, files=FILES, repo="web")
    _, counts = queue(world.admin_user, {})
    samples = scrape(client)
    gauge = {kind: samples[("engram_queue_size", (("kind", kind),))] for kind in KINDS}
    assert gauge == {kind: float(counts[kind]) for kind in KINDS}
    assert gauge["candidate"] == 2 and gauge["remember"] == 1 and gauge["challenged"] == 1


def test_a_scrape_takes_a_bounded_number_of_queries(world, client, django_assert_max_num_queries):
    for n in range(5):
        queue_items.candidate(world.coder, world.architecture, f"Rule number {n}.")
    with django_assert_max_num_queries(8):
        scrape(client)


def test_request_latency_has_a_series_for_the_search_route_by_view_name(world):
    api = client_for(world.coder)
    assert api.post("/api/v1/search/", {"query": "how do we build?"}, format="json").status_code == 200
    api.get(f"/api/v1/facts/{987654}/")  # an id in the URL: labelled by the route, not the path
    samples = scrape(client_for(None))
    views = {dict(labels).get("view") for (name, labels) in samples if name.startswith("django_http_requests_latency")}
    assert (
        samples[
            ("django_http_requests_latency_seconds_by_view_method_count", (("method", "POST"), ("view", "api-search")))
        ]
        >= 1
    )
    assert "api-fact" in views
    assert not any(view and ("/" in view or "987654" in view) for view in views)


def test_an_unknown_method_does_not_mint_a_label(world, client):
    client.generic("BREW", "/healthz")
    samples = scrape(client)
    methods = {dict(labels).get("method") for (_, labels) in samples} - {None}
    assert "BREW" not in methods and "<invalid method>" in methods


def test_metrics_hold_no_fact_content_and_no_agent_key(world, client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        propose(world, "The zebra-unicorn-4711 service owns billing.", topic="secret-topic-xyz")
    client_for(world.coder).post("/api/v1/search/", {"query": "zebra-unicorn-4711"}, format="json")
    text = client.get("/metrics").content.decode()
    assert "zebra" not in text and "secret-topic" not in text
    assert world.coder.plain_key not in text  # type: ignore[attr-defined]
    assert "acme" not in text  # no workspace slug either
