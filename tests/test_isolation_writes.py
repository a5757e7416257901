"""`none` means none, on writes too (issue 13, point 3).

A role holding `none` on a domain must not write into it, nor learn from any answer what it
holds. Every write endpoint of the agent API is called against a hidden domain (`knowledge`,
where the coder's role holds `none`) and against a domain that does not exist: the answers are
the same (status, code, and detail and fields with the name substituted) and the database is
unchanged, the hidden fact's content, mentions and confidence included. A write route missing
from WRITES below fails the test, so a new endpoint cannot ship without its case.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.urls import URLPattern, get_resolver

from memory.actors import Actor
from memory.classifier import Relation, classify
from memory.embeddings import cosine, embed_text, fact_text
from memory.errors import InvalidInput, NotFound
from memory.models import (
    AccessGrant,
    AuditEvent,
    Candidate,
    Conflict,
    Episode,
    Fact,
    FactMention,
    HotMemory,
    MemoryDomain,
    Policy,
    PromotionDecision,
    Replay,
)
from memory.services import promotion
from memory.services.facts import FactInput, propose_fact, supersede_fact
from memory.services.hot import consolidate, harmonize
from memory.services.policies import propose_policy
from memory.services.tenancy import create_domain, set_grant
from review.models import RememberReview
from review.services import approve_review
from tests.conftest import client_for
from tests.factories import CandidateFactory, PolicyFactory

HIDDEN, MISSING = "knowledge", "nosuch"
MISSING_ID = 987_654_321
SYSTEM = Actor.system("test")

TOPIC = "infra"
SECRET = "The staging cluster runs in eu-west-1."
RESTATEMENT = "The staging cluster is in eu-west-1."
CONTRADICTION = "The staging cluster runs in us-east-1."

CANDIDATE_DOC = {
    "schema": "awtl.memory_candidate.v2",
    "failure_class": "agent_failure",
    "failure_type": "wrong_region",
    "source_action_ids": ["a1"],
    "root_cause_summary": "deployed to the wrong region",
    "proposed_memory": CONTRADICTION,
    "scope": {"applies_to": ["deploy"], "does_not_apply_to": ["local"]},
    "evidence_refs": ["ci:1"],
    "verification_probe_candidate": "region-check",
    "topic": TOPIC,
}

# (route, method) → how the case is built:
#   ("domain", body)  the body names a domain: {D} is the hidden one, then a missing one;
#   ("object", kind, body)  the path names an object of the hidden domain, then a missing id;
#   ("test", name)  covered by the named test of this file (no domain in the request);
#   ("no_domain", why)  the call addresses no memory domain at all.
WRITES: dict[tuple[str, str], tuple[Any, ...]] = {
    ("preamble/", "post"): ("no_domain", "a read (it counts recalls) of visible_to(agent) facts only"),
    ("search/", "post"): ("domain", {"query": "staging region", "domain": "{D}"}),
    ("facts/", "post"): (
        "domain",
        {"domain": "{D}", "topic": TOPIC, "memory_type": "decision", "content": RESTATEMENT},
    ),
    ("facts/batch/", "post"): ("test", "test_a_batch_item_naming_a_hidden_domain_is_answered_like_a_missing_one"),
    ("facts/<int:fact_id>/supersede/", "post"): ("object", "fact", {"content": CONTRADICTION}),
    ("remember/", "post"): ("domain", {"session_id": "s", "content": RESTATEMENT, "domain": "{D}", "topic": TOPIC}),
    ("consolidate/", "post"): (
        "test",
        "test_the_consolidate_attack_leaves_hidden_memory_untouched_and_reveals_nothing",
    ),
    ("harmonize/", "post"): ("domain", {"domain": "{D}"}),
    ("episodes/", "post"): ("no_domain", "an episode belongs to the workspace, not to a domain"),
    ("decisions/", "post"): (
        "test",
        "test_meeting_decisions_from_a_role_with_none_on_decisions_write_and_reveal_nothing",
    ),
    ("policies/", "post"): ("domain", {"domain": "{D}", "rule": "Deploy staging to us-east-1."}),
    ("policies/<int:policy_id>/supersede/", "post"): ("object", "policy", {"rule": "Deploy staging anywhere."}),
    ("me/notes/", "put"): ("no_domain", "the agent's private scratchpad"),
    ("me/observations/", "post"): ("no_domain", "the agent's private observations"),
    ("candidates/", "post"): ("domain", {**CANDIDATE_DOC, "candidate_id": "w-1", "domain": "{D}"}),
    ("candidates/<int:candidate_pk>/replays/", "post"): ("object", "candidate", {"probe": "p", "passed": True}),
    ("candidates/<int:candidate_pk>/promote/", "post"): ("object", "candidate", {"write": True}),
    ("candidates/<int:candidate_pk>/deny/", "post"): ("object", "candidate", {"reason": "no"}),
    ("reviews/", "post"): ("test", "test_a_review_resolution_reads_the_same_whether_hidden_memory_matched_or_not"),
    ("reviews/<int:review_id>/consume/", "post"): ("no_domain", "the agent's own review; resolution tested above"),
    ("runs/", "post"): ("no_domain", "a run and its bank are the agent's own"),
    ("runs/<int:run_id>/bank/status/", "post"): ("no_domain", "the run's bank"),
    ("runs/<int:run_id>/bank/knowledge/", "post"): ("no_domain", "the run's bank"),
    ("runs/<int:run_id>/bank/procedural/", "post"): ("no_domain", "the run's bank"),
    ("runs/<int:run_id>/bank/items/<str:item_id>/", "delete"): ("no_domain", "the run's bank"),
    ("runs/<int:run_id>/interventions/", "post"): ("no_domain", "the run's log"),
    ("runs/<int:run_id>/finish/", "post"): ("domain", {"offer_candidates": True, "domain": "{D}"}),
    # People only (issue 21): agents are refused 403 whatever they name (tests/memory/test_erasure_api.py).
    ("admin/erasures/preview/", "post"): ("no_domain", "people only: every agent key is refused"),
    ("admin/erasures/", "post"): ("no_domain", "people only: every agent key is refused"),
}
WRITE_METHODS = ("post", "put", "patch", "delete")


def write_routes() -> set[tuple[str, str]]:
    """Every (route, method) of the agent API whose view handles a writing method."""
    api = next(p for p in get_resolver().url_patterns if str(p.pattern) == "api/v1/")
    found = set()
    for pattern in api.url_patterns:
        view = getattr(pattern.callback, "view_class", None) if isinstance(pattern, URLPattern) else None
        for method in WRITE_METHODS:
            if view is not None and hasattr(view, method):
                found.add((str(pattern.pattern), method))
    return found


def test_every_write_route_of_the_agent_api_has_an_isolation_case():
    assert write_routes() == set(WRITES)


# --- The world: `knowledge` exists and is `none` for the coder's role ---------------------------
@pytest.fixture
def hidden(world) -> dict[str, Any]:
    knowledge = create_domain(workspace=world.workspace, name=HIDDEN, by=SYSTEM)
    secret = propose_fact(
        domain=knowledge,
        by=Actor.of_user(world.admin_user),
        data=FactInput(topic=TOPIC, content=SECRET, memory_type="decision"),
    ).fact
    policy = PolicyFactory(domain=knowledge, rule="Staging lives in eu-west-1.")
    candidate = CandidateFactory(domain=knowledge, topic=TOPIC, proposed_memory=CONTRADICTION)
    set_grant(role=world.coder_role, domain=knowledge, level="none", by=SYSTEM)
    api = client_for(world.coder)
    run = api.post("/api/v1/runs/", {"task": "deploy staging"}, format="json").json()
    api.post(
        f"/api/v1/runs/{run['id']}/bank/knowledge/",
        {"id": "k1", "content": CONTRADICTION, "tags": [TOPIC]},
        format="json",
    )
    return {
        "domain": knowledge,
        "secret": secret,
        "fact": secret.pk,
        "policy": policy.pk,
        "candidate": candidate.pk,
        "run": run["id"],
    }


def state(secret: Fact) -> dict[str, Any]:
    """What a refused call must leave as it was."""
    counts = {
        model.__name__: model.objects.count()
        for model in (
            Fact,
            FactMention,
            Conflict,
            Candidate,
            Replay,
            PromotionDecision,
            Policy,
            HotMemory,
            Episode,
            MemoryDomain,
            AccessGrant,
            RememberReview,
            AuditEvent,
        )
    }
    row = Fact.objects.values(
        "content", "mention_count", "confidence", "superseded_by_id", "status", "last_mentioned_at"
    ).get(pk=secret.pk)
    return {**counts, "secret": row}


def _fill(body: Any, name: str) -> Any:
    return json.loads(json.dumps(body).replace("{D}", name))


def _shape(response, token: str) -> tuple[int, str]:
    """Status and body with the domain name (or object id) replaced by a placeholder."""
    text = re.sub(rf"(?<![\w-]){re.escape(token)}(?![\w-])", "<X>", response.content.decode())
    return response.status_code, text


def _path(route: str, value: Any) -> str:
    return "/api/v1/" + re.sub(r"<int:[a-z_]+>", str(value), route).replace("<str:item_id>", "k1")


def _call(client, method: str, url: str, body: Any):
    return getattr(client, method)(url, body, format="json")


DOMAIN_CASES = [key for key, how in WRITES.items() if how[0] == "domain"]
OBJECT_CASES = [key for key, how in WRITES.items() if how[0] == "object"]


@pytest.mark.parametrize("route,method", DOMAIN_CASES)
def test_a_hidden_domain_is_answered_like_a_missing_one_and_nothing_changes(world, hidden, route, method):
    api = client_for(world.coder)
    body = WRITES[(route, method)][1]
    url = _path(route, hidden["run"])
    before = state(hidden["secret"])
    hidden_answer = _call(api, method, url, _fill(body, HIDDEN))
    assert state(hidden["secret"]) == before
    missing_answer = _call(api, method, url, _fill(body, MISSING))
    assert state(hidden["secret"]) == before
    assert hidden_answer.status_code == 400, hidden_answer.content
    assert hidden_answer.json()["code"] == "unknown_domain"
    assert _shape(hidden_answer, HIDDEN) == _shape(missing_answer, MISSING)
    assert "eu-west-1" not in hidden_answer.content.decode()


@pytest.mark.parametrize("route,method", OBJECT_CASES)
def test_an_object_of_a_hidden_domain_is_answered_like_a_missing_one_and_nothing_changes(world, hidden, route, method):
    api = client_for(world.coder)
    _, kind, body = WRITES[(route, method)]
    before = state(hidden["secret"])
    hidden_answer = _call(api, method, _path(route, hidden[kind]), body)
    assert state(hidden["secret"]) == before
    missing_answer = _call(api, method, _path(route, MISSING_ID), body)
    assert state(hidden["secret"]) == before
    assert hidden_answer.status_code == 404, hidden_answer.content
    assert _shape(hidden_answer, str(hidden[kind])) == _shape(missing_answer, str(MISSING_ID))


def test_the_legitimate_writes_still_work_once_the_grant_is_lifted(world, hidden):
    set_grant(role=world.coder_role, domain=hidden["domain"], level="write", by=SYSTEM)
    api = client_for(world.coder)
    proposed = api.post("/api/v1/facts/", _fill(WRITES[("facts/", "post")][1], HIDDEN), format="json")
    assert proposed.status_code == 201, proposed.content
    assert proposed.json()["outcome"] == "re_mentioned"
    policy = api.post("/api/v1/policies/", _fill(WRITES[("policies/", "post")][1], HIDDEN), format="json")
    assert policy.status_code == 201, policy.content
    candidate = api.post("/api/v1/candidates/", _fill(WRITES[("candidates/", "post")][1], HIDDEN), format="json")
    assert candidate.status_code == 201, candidate.content
    remembered = api.post("/api/v1/remember/", _fill(WRITES[("remember/", "post")][1], HIDDEN), format="json")
    assert remembered.status_code == 201, remembered.content


# --- Reads of a hidden domain (point 3) ----------------------------------------------------------
def test_reads_of_a_hidden_domain_answer_like_a_missing_one(world, hidden):
    api = client_for(world.coder)
    conflict = propose_fact(
        domain=hidden["domain"],
        by=Actor.of_user(world.admin_user),
        data=FactInput(topic=TOPIC, content=CONTRADICTION, memory_type="decision"),
    ).conflict
    assert conflict is not None
    assert _shape(api.get(f"/api/v1/facts/{hidden['fact']}/"), str(hidden["fact"])) == _shape(
        api.get(f"/api/v1/facts/{MISSING_ID}/"), str(MISSING_ID)
    )
    for url in ("/api/v1/facts/?domain={}", "/api/v1/conflicts/?domain={}", "/api/v1/candidates/?domain={}"):
        hidden_answer, missing_answer = api.get(url.format(HIDDEN)), api.get(url.format(MISSING))
        assert hidden_answer.status_code == 400
        assert _shape(hidden_answer, HIDDEN) == _shape(missing_answer, MISSING)
    listed = api.get("/api/v1/conflicts/").json()
    assert listed["count"] == 0
    assert "eu-west-1" not in json.dumps(api.get("/api/v1/facts/").json())


# --- Point 5: the attack, exactly ----------------------------------------------------------------
def _kind(a: str, b: str) -> Relation:
    va, vb = embed_text(fact_text(TOPIC, a)), embed_text(fact_text(TOPIC, b))
    return classify(a, b, cosine(va, vb)).kind


def test_the_consolidate_attack_leaves_hidden_memory_untouched_and_reveals_nothing(world, hidden):
    # The guesses are good ones: unguarded, the first re-mentions the secret, the second supersedes it.
    assert _kind(SECRET, RESTATEMENT) == Relation.SAME
    assert _kind(SECRET, CONTRADICTION) == Relation.CONTRADICTS
    api = client_for(world.coder)
    for session, contents in (("right", (RESTATEMENT, CONTRADICTION)), ("wrong", ("Lunch is at noon.", "Cats purr."))):
        for content in contents:  # no domain: consolidation would default to `knowledge`
            answer = api.post(
                "/api/v1/remember/", {"session_id": session, "content": content, "topic": TOPIC}, format="json"
            )
            assert answer.status_code == 201, answer.content
    before = state(hidden["secret"])

    reports = {}
    for session in ("right", "wrong"):
        answer = api.post("/api/v1/consolidate/", {"session_id": session}, format="json")
        assert answer.status_code == 200, answer.content
        reports[session] = answer.json()

    after = state(hidden["secret"])
    assert after["secret"] == before["secret"]
    assert after["secret"]["superseded_by_id"] is None
    assert after["secret"]["content"] == SECRET
    assert {k: v for k, v in after.items() if k not in {"secret", "AuditEvent"}} == {
        k: v for k, v in before.items() if k not in {"secret", "AuditEvent"}
    }
    right_ids = list(HotMemory.objects.filter(session_id="right").order_by("pk").values_list("pk", flat=True))
    report_keys = ("promoted", "re_mentioned", "conflicts", "merged", "entries", "refused")

    def report(session: str, *, ids: bool = True) -> dict[str, Any]:
        got = {key: reports[session][key] for key in report_keys}
        return got if ids else {**got, "refused": [{**r, "id": None} for r in got["refused"]]}

    assert report("right") == {
        "promoted": 0,
        "re_mentioned": 0,
        "conflicts": 0,
        "merged": 0,
        "entries": 0,
        "refused": [{"id": pk, "code": "unknown_domain", "detail": f"Unknown domain {HIDDEN!r}."} for pk in right_ids],
    }
    assert report("right", ids=False) == report("wrong", ids=False)  # a good guess reads like a bad one
    assert not HotMemory.objects.filter(consolidated_at__isnull=False).exists()  # they wait, not moved
    assert "eu-west-1" not in json.dumps(reports)


def test_refused_entries_consolidate_once_the_none_grant_is_lifted(world, hidden):
    api = client_for(world.coder)
    api.post("/api/v1/remember/", {"session_id": "s", "content": RESTATEMENT, "topic": TOPIC}, format="json")
    assert api.post("/api/v1/consolidate/", {}, format="json").json()["entries"] == 0
    set_grant(role=world.coder_role, domain=hidden["domain"], level="read", by=SYSTEM)
    report = api.post("/api/v1/consolidate/", {}, format="json").json()
    assert (report["entries"], report["re_mentioned"], report["refused"]) == (1, 1, [])
    assert Fact.objects.get(pk=hidden["fact"]).mention_count == 2


def test_consolidate_creates_a_missing_default_domain_and_uses_it(world):
    api = client_for(world.coder)
    api.post("/api/v1/remember/", {"session_id": "s", "content": SECRET, "topic": TOPIC}, format="json")
    report = api.post("/api/v1/consolidate/", {}, format="json").json()
    assert (report["entries"], report["promoted"], report["refused"]) == (1, 1, [])
    fact = Fact.objects.get(content=SECRET)
    assert fact.domain.name == HIDDEN
    assert MemoryDomain.objects.visible_to(world.coder).filter(pk=fact.domain_id).exists()


def test_an_entry_whose_named_domain_became_hidden_is_refused_not_moved(world):
    api = client_for(world.coder)
    api.post(
        "/api/v1/remember/",
        {"session_id": "s", "content": SECRET, "topic": TOPIC, "domain": "architecture"},
        format="json",
    )
    set_grant(role=world.coder_role, domain=world.architecture, level="none", by=SYSTEM)
    report = api.post("/api/v1/consolidate/", {}, format="json").json()
    assert report["entries"] == 0
    assert [r["detail"] for r in report["refused"]] == ["Unknown domain 'architecture'."]
    assert not Fact.objects.exists()


# --- Harmonize, runs, reviews ---------------------------------------------------------------------
def test_harmonize_without_a_domain_leaves_hidden_domains_alone(world, hidden):
    propose_fact(
        domain=hidden["domain"],
        by=Actor.of_agent(world.planner),
        data=FactInput(topic="db", content="The API uses PostgreSQL as its primary database.", memory_type="decision"),
    )
    Fact.objects.create(
        workspace=world.workspace,
        domain=hidden["domain"],
        topic="db",
        content="The API uses MySQL as its primary database.",
        memory_type="decision",
        veracity="agent_inferred",
        confidence=0.7,
        created_by_agent=world.coder2,
    )
    before = state(hidden["secret"])
    answer = client_for(world.coder).post("/api/v1/harmonize/", {}, format="json")
    assert answer.status_code == 200
    assert (answer.json()["topics_checked"], answer.json()["conflicts_found"]) == (0, 0)
    after = state(hidden["secret"])
    assert {k: v for k, v in after.items() if k != "AuditEvent"} == {
        k: v for k, v in before.items() if k != "AuditEvent"
    }
    assert Fact.objects.filter(domain=hidden["domain"], superseded_by__isnull=False).count() == 0


def test_finishing_a_run_into_a_hidden_default_domain_is_refused_like_an_unknown_domain(world, hidden):
    api = client_for(world.coder)
    before = state(hidden["secret"])
    answer = api.post(f"/api/v1/runs/{hidden['run']}/finish/", {"offer_candidates": True}, format="json")
    assert answer.status_code == 400
    named = api.post(
        f"/api/v1/runs/{hidden['run']}/finish/", {"offer_candidates": True, "domain": MISSING}, format="json"
    )
    assert _shape(answer, HIDDEN) == _shape(named, MISSING)
    assert state(hidden["secret"]) == before
    assert (
        api.post(f"/api/v1/runs/{hidden['run']}/finish/", {"offer_candidates": False}, format="json").status_code == 200
    )


def _submit_review(api, path: str, content: str) -> int:
    output = json.dumps(
        {
            "recommendations": [
                {
                    "path": path,
                    "recommended_layer": "domain/knowledge",
                    "rationale": "where staging runs",
                    "suggested_memory_content": content,
                }
            ]
        }
    )
    # A session per file: a session's second submission would answer its first, live review.
    body = {"session_id": f"s-{path}", "output": f"```json\n{output}\n```", "files": {}}
    answer = api.post("/api/v1/reviews/", body, format="json")
    assert answer.status_code == 201, answer.content
    return int(answer.json()["id"])


def test_a_review_resolution_reads_the_same_whether_hidden_memory_matched_or_not(world, hidden):
    """A person may store an agent's item in a domain its role holds `none` on (the layer's
    mapping is theirs); the agent then learns the file was kept, never the fact nor its outcome."""
    hidden["secret"].topic = "notes/infra.md"
    hidden["secret"].save(update_fields=["topic"])
    api = client_for(world.coder)
    matched = _submit_review(api, "notes/infra.md", RESTATEMENT)
    unmatched = _submit_review(api, "notes/lunch.md", "Lunch is at noon.")
    for review_id in (matched, unmatched):
        approve_review(review=RememberReview.objects.get(pk=review_id), by=Actor.of_user(world.admin_user))
    assert Fact.objects.get(pk=hidden["fact"]).mention_count == 2  # the person's approval did re-mention it

    bodies = {}
    for name, review_id in (("matched", matched), ("unmatched", unmatched)):
        body = api.get(f"/api/v1/reviews/{review_id}/").json()
        assert body["items"][0]["stored_fact_id"] is None
        assert body["resolution"]["stored_ids"] == []
        assert body["resolution"]["stored"] == []
        text = json.dumps(body)
        assert "re_mentioned" not in text and "created" not in json.dumps(body["resolution"])
        assert str(hidden["fact"]) not in re.findall(r"\d+", json.dumps(body["resolution"]))
        bodies[name] = body["resolution"]
    assert bodies["matched"]["withheld_paths"] == ["notes/infra.md"]
    assert bodies["matched"]["note"] == (
        "Reviewer wsadmin approved the remember review. Stored where this agent cannot read it: notes/infra.md."
    )

    def shape(resolution: dict[str, Any], path: str) -> str:
        return json.dumps(resolution, sort_keys=True).replace(path, "<P>")

    matched_shape = shape(bodies["matched"], "notes/infra.md").replace(RESTATEMENT, "<C>")
    unmatched_shape = shape(bodies["unmatched"], "notes/lunch.md").replace("Lunch is at noon.", "<C>")
    assert matched_shape == unmatched_shape


def test_a_review_resolution_shows_facts_the_agent_can_read(world):
    api = client_for(world.coder)
    review_id = _submit_review(api, "notes/infra.md", SECRET)
    approve_review(review=RememberReview.objects.get(pk=review_id), by=Actor.of_user(world.admin_user))
    resolution = api.get(f"/api/v1/reviews/{review_id}/").json()["resolution"]
    fact = Fact.objects.get(content=SECRET)
    assert resolution["stored_ids"] == [fact.pk]
    assert "withheld_paths" not in resolution
    assert f"(fact {fact.pk})" in resolution["note"]


# --- The services refuse too (defence in depth below the API) -------------------------------------
def test_services_refuse_an_agent_a_hidden_domain_like_a_missing_one(world, hidden):
    by = Actor.of_agent(world.coder)
    before = state(hidden["secret"])
    with pytest.raises(InvalidInput) as proposed:
        propose_fact(
            domain=hidden["domain"], by=by, data=FactInput(topic=TOPIC, content=CONTRADICTION, memory_type="decision")
        )
    with pytest.raises(InvalidInput) as policy:
        propose_policy(domain=hidden["domain"], rule="Deploy staging to us-east-1.", by=by)
    with pytest.raises(InvalidInput) as candidate:
        promotion.submit_candidate(
            domain=hidden["domain"],
            topic=TOPIC,
            document=promotion.parse_candidate_document({**CANDIDATE_DOC, "candidate_id": "svc-1"}),
            by=by,
        )
    with pytest.raises(InvalidInput) as harmonized:
        harmonize(agent=world.coder, domain=hidden["domain"])
    with pytest.raises(NotFound) as superseded:
        supersede_fact(fact=hidden["secret"], by=by, content=CONTRADICTION)
    for refusal in (proposed, policy, candidate, harmonized):
        assert (refusal.value.code, refusal.value.detail) == ("unknown_domain", f"Unknown domain {HIDDEN!r}.")
    assert (superseded.value.code, superseded.value.detail) == ("fact_not_found", f"No fact {hidden['fact']}.")
    assert consolidate(agent=world.coder).refused == []
    assert state(hidden["secret"]) == before | {"AuditEvent": before["AuditEvent"] + 1}  # memory.consolidated


def test_a_person_still_writes_into_a_domain_hidden_from_agents(world, hidden):
    result = propose_fact(
        domain=hidden["domain"],
        by=Actor.of_user(world.admin_user),
        data=FactInput(topic=TOPIC, content=RESTATEMENT, memory_type="decision"),
    )
    assert result.outcome == "re_mentioned"


def test_a_batch_item_naming_a_hidden_domain_is_answered_like_a_missing_one(world, hidden):
    # POST facts/batch/ answers 200 with one result per item: the hidden domain's item must read
    # exactly like a missing domain's, and nothing in the hidden domain changes
    api = client_for(world.coder)
    item = WRITES[("facts/", "post")][1]
    before = state(hidden["secret"])
    hidden_answer = api.post("/api/v1/facts/batch/", {"items": [_fill(item, HIDDEN)]}, format="json")
    missing_answer = api.post("/api/v1/facts/batch/", {"items": [_fill(item, MISSING)]}, format="json")
    assert state(hidden["secret"]) == before
    assert hidden_answer.status_code == 200, hidden_answer.content
    result = hidden_answer.json()["results"][0]
    assert result["status"] == 400 and result["error"]["code"] == "unknown_domain"
    assert hidden_answer.json()["created"] == 0
    assert _shape(hidden_answer, HIDDEN) == _shape(missing_answer, MISSING)
    assert "eu-west-1" not in hidden_answer.content.decode()


# --- Meeting decisions: the domain is always `decisions` ----------------------------------------
def test_meeting_decisions_from_a_role_with_none_on_decisions_write_and_reveal_nothing(world, hidden):
    decisions = create_domain(workspace=world.workspace, name="decisions", by=SYSTEM)
    secret = propose_fact(
        domain=decisions,
        by=Actor.of_user(world.admin_user),
        data=FactInput(topic=TOPIC, content=SECRET, memory_type="decision", veracity="human_stated"),
    ).fact
    type(world.coder).objects.filter(pk=world.coder.pk).update(relays_human_words=True)
    body = {"title": "Infra sync", "date": "2026-01-05", "decisions": [CONTRADICTION], "topic": TOPIC}
    api = client_for(world.coder)
    set_grant(role=world.coder_role, domain=decisions, level="none", by=SYSTEM)
    before = state(secret)
    hidden_answer = api.post("/api/v1/decisions/", body, format="json")
    assert state(secret) == before
    set_grant(role=world.coder_role, domain=decisions, level="read", by=SYSTEM)
    before = state(secret)
    read_answer = api.post("/api/v1/decisions/", body, format="json")
    assert state(secret) == before
    assert hidden_answer.status_code == 403, hidden_answer.content
    assert hidden_answer.json()["code"] == "insufficient_memory_permission"
    assert (hidden_answer.status_code, hidden_answer.json()) == (read_answer.status_code, read_answer.json())
    assert "eu-west-1" not in hidden_answer.content.decode()
