"""Provenance in recall (issue 39, point 4): search hits and preamble facts carry `session_key` and
`provenance` as GET facts/{id}/ answers them (a long rationale cut to RECALL_RATIONALE_CHARS), so
checking a source takes no second call per hit; the originating reviews of a whole answer are read
in one query, and none when no hit came from a review."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.operations.serializers import RECALL_RATIONALE_CHARS
from memory.models import Fact
from memory.services.embedding import embed_missing
from tests.agents.test_api_provenance import PROVENANCE_KEYS, _approved_review
from tests.factories import FactFactory

pytestmark = pytest.mark.usefixtures("reviewer_reviews_world_domains")


def _recalled(api, fact_id: int) -> tuple[dict, dict, dict]:
    """The fact as GET facts/{id}/ answers it, as a hybrid search hit, and as a preamble fact."""
    fact = api.get(f"/api/v1/facts/{fact_id}/").json()
    query = f"{fact['topic']} {fact['content']}"
    hits = api.post("/api/v1/search/", {"query": query, "mode": "hybrid"}, format="json").json()["results"]
    preamble = api.post("/api/v1/preamble/", {"task": query, "repo": fact["repo"]}, format="json").json()
    [hit] = [h for h in hits if h["id"] == fact_id]
    [recalled] = [f for f in preamble["facts"] if f["id"] == fact_id]
    return fact, hit, recalled


def test_a_hit_and_a_preamble_fact_stored_by_a_review_carry_its_provenance_and_session(world, api):
    review = _approved_review(world, api, session_id="turn-39")
    fact_id = review.resolution["stored"][0]["fact_id"]
    embed_missing()
    fact, hit, recalled = _recalled(api, fact_id)
    assert fact["provenance"]["review_id"] == review.pk and fact["provenance"]["file"]
    for answer in (hit, recalled):
        assert answer["session_key"] == "turn-39"
        assert set(answer["provenance"]) == PROVENANCE_KEYS
        assert answer["provenance"] == fact["provenance"]


def test_a_long_rationale_is_cut_in_recall_and_whole_in_the_fact(world, api):
    rationale = "Kept because " + "the deploy runbook matters " * 40
    stored = FactFactory(
        domain=world.architecture,
        topic="deploy runbook",
        content="The deploy runbook lives in docs/deploy.md and names the on-call approver.",
        rationale=rationale,
        source_file="docs/deploy.md",
        session_key="run-5",
    )
    embed_missing()
    fact, hit, recalled = _recalled(api, stored.pk)
    assert fact["provenance"]["rationale"] == rationale
    for answer in (hit, recalled):
        cut = answer["provenance"]["rationale"]
        assert len(cut) == RECALL_RATIONALE_CHARS and cut.endswith("…")
        assert rationale.startswith(cut[:-1])
        assert answer["provenance"]["file"] == "docs/deploy.md"
        assert answer["session_key"] == "run-5" == answer["provenance"]["session_key"]


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_every_mode_serves_provenance_reading_reviews_once_or_not_at_all(world, api, mode):
    _approved_review(world, api, session_id="turn-8")
    for i in range(6):
        FactFactory(domain=world.architecture, topic=f"deploy step {i}", content=f"Deploy step {i} runs the checks.")
    embed_missing()
    from_review = Fact.objects.filter(origin="remember_review").values_list("pk", flat=True)
    with CaptureQueriesContext(connection) as queries:
        hits = api.post("/api/v1/search/", {"query": "deploy checks", "mode": mode}, format="json").json()["results"]
    review_reads = [q for q in queries.captured_queries if "review_reviewitem" in q["sql"]]
    assert hits and all(set(h["provenance"]) == PROVENANCE_KEYS for h in hits)
    assert len(review_reads) == (1 if {h["id"] for h in hits} & set(from_review) else 0)
    assert all(h["provenance"]["review_id"] is None for h in hits if h["id"] not in set(from_review))
