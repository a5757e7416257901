"""Erasure (issue 21): a workspace admin erases a subject; afterwards its text is found nowhere."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from memory.actors import Actor
from memory.errors import EngramError
from memory.models import (
    AuditEvent,
    Candidate,
    Conflict,
    EpisodeFact,
    Fact,
    FactMention,
    FactStatus,
    HotMemory,
    Policy,
)
from memory.search.hybrid import search_memory
from memory.search.preamble import build_preamble
from memory.services import erasure
from memory.services.erasure import ErasureForbidden, NothingToErase, parse_selection, select_subject
from review.models import RememberReview
from review.services import approve_review
from tests.conftest import client_for
from tests.factories import DomainFactory, FactFactory, PolicyFactory

MARKER = "QUOKKA5519"
CONTENT = f"The {MARKER} deploy key is rotated every Tuesday by the platform team."
REMENTION = f"Platform rotates the {MARKER} deploy key every Tuesday."
NOTE = f"The {MARKER} billing export runs nightly and lands in the finance bucket."
REASON = "Subject access request #4411"


def scan(marker: str) -> list[tuple[str, str, int]]:
    """Every text, varchar and JSON column of every table of the database, cast to text, that
    contains `marker`: (table, column, rows)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_schema, table_name, column_name FROM information_schema.columns "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
            "AND data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'tsvector', 'ARRAY', "
            "'USER-DEFINED') ORDER BY 1, 2, 3"
        )
        columns = cursor.fetchall()
        hits = []
        for schema, table, column in columns:
            cursor.execute(
                f'SELECT count(*) FROM "{schema}"."{table}" WHERE "{column}"::text ILIKE %s',  # noqa: S608 -- names from information_schema
                [f"%{marker}%"],
            )
            (count,) = cursor.fetchone()
            if count:
                hits.append((table, column, count))
    return hits


def _admin_session(client, user) -> Any:
    client.force_login(user)
    return client


@pytest.fixture
def subject(world, settings) -> dict[str, Any]:
    """The marker everywhere a fact's text travels: the fact, a re-mention, a remember review, a
    hot-tier entry consolidated into it, a candidate, a conflict, a search and a preamble."""
    api = client_for(world.coder)
    body = {"domain": "architecture", "topic": "deploy-keys", "memory_type": "procedure", "content": CONTENT}
    fact = api.post("/api/v1/facts/", body, format="json").json()["fact"]
    again = client_for(world.coder2).post("/api/v1/facts/", {**body, "content": REMENTION}, format="json").json()
    # a contradiction on the topic (a conflict row names both)
    contradiction = client_for(world.coder2).post(
        "/api/v1/facts/",
        {**body, "content": f"The {MARKER} deploy key is rotated every Friday by the platform team."},
        format="json",
    )
    assert contradiction.json().get("conflict_id"), contradiction.json()
    # the hot tier, consolidated into the fact
    api.post(
        "/api/v1/remember/",
        {"session_id": "s-erase", "content": CONTENT, "domain": "architecture", "topic": "deploy-keys"},
        format="json",
    )
    api.post("/api/v1/consolidate/", {"session_id": "s-erase"}, format="json")
    # a candidate whose document holds the text
    api.post(
        "/api/v1/candidates/",
        {
            "schema": "awtl.memory_candidate.v2",
            "candidate_id": "erase-1",
            "failure_class": "agent_failure",
            "failure_type": "stale_key",
            "source_action_ids": ["a1"],
            "root_cause_summary": "used an old key",
            "proposed_memory": CONTENT,
            "scope": {"applies_to": ["deploy"], "does_not_apply_to": ["local"]},
            "evidence_refs": ["ci:1"],
            "verification_probe_candidate": "key-check",
            "domain": "architecture",
            "topic": "deploy-keys",
        },
        format="json",
    )
    # a remember review stores a second fact on the subject
    output = (
        '```json\n{"recommendations": [{"path": "ops/billing.md", "recommended_layer": "domain/knowledge", '
        f'"rationale": "ops", "suggested_memory_content": "{NOTE}"}}]}}\n```'
    )
    review_id = api.post(
        "/api/v1/reviews/",
        {"session_id": "s-erase", "output": output, "files": {"ops/billing.md": NOTE}},
        format="json",
    ).json()["id"]
    review = approve_review(review=RememberReview.objects.get(pk=review_id), by=Actor.of_user(world.admin_user))
    stored = review.items.get().stored_fact_id
    # a policy derived from the fact
    policy = PolicyFactory(workspace=world.workspace, domain=world.architecture, rule="Rotate keys weekly.")
    policy.derived_from.add(fact["id"])
    # recalled: a search and a preamble quote the marker
    found = api.post("/api/v1/search/", {"query": f"{MARKER} deploy key", "mode": "hybrid"}, format="json").json()
    # the Friday statement, the later one, is what is current (issue 34): it carries the marker too
    assert any(MARKER in r["content"] for r in found["results"]), found
    preamble = api.post(
        "/api/v1/preamble/", {"task": f"Rotate the {MARKER} deploy key before the release"}, format="json"
    ).json()
    assert MARKER in json.dumps(preamble)
    assert again["outcome"] in {"re_mentioned", "mentioned", "re-mention"} or FactMention.objects.exists()
    return {"fact": fact["id"], "stored": stored, "review": review_id, "policy": policy.pk}


def test_the_text_is_found_nowhere_after_erasure(world, subject, client, admin_client):
    assert scan(MARKER), "the setup wrote the marker"
    assert FactMention.objects.filter(fact_id=subject["fact"]).exists()
    assert Conflict.objects.filter(workspace=world.workspace).exists()
    # consolidated into a fact of its own: the Friday statement had replaced the Tuesday one (issue 34)
    assert HotMemory.objects.filter(consolidated_fact__content__contains=MARKER).exists()
    assert Candidate.objects.filter(proposed_memory=CONTENT).exists()
    assert EpisodeFact.objects.filter(fact__content__contains=MARKER).exists()  # recalled: the current one

    plan = select_subject(world.workspace, parse_selection({"kind": "search", "query": MARKER}))
    assert subject["fact"] in plan.fact_ids and subject["stored"] in plan.fact_ids
    tombstone = erasure.erase(plan=plan, reason=REASON, by=Actor.of_user(world.admin_user))

    assert scan(MARKER) == [], scan(MARKER)
    # the workspace export (helper H's export_workspace) carries nothing of it either (before the probes below, whose queries quote it again)
    exported = io.StringIO()
    call_command("export_workspace", "acme", "-o", "-", stdout=exported)
    assert exported.getvalue() and MARKER not in exported.getvalue()
    # the tombstone: who, why, the ids and a hash — never the content
    assert tombstone.verb == "subject.erased" and tombstone.actor_user == world.admin_user
    assert tombstone.detail["reason"] == REASON
    assert set(tombstone.detail["erased"]["memory.fact"]) == set(plan.fact_ids)
    assert len(tombstone.detail["sha256"]) == 64
    assert MARKER not in json.dumps(tombstone.detail)
    assert Policy.objects.filter(pk=subject["policy"]).exists()
    assert not Policy.objects.get(pk=subject["policy"]).derived_from.exists()

    # no surface returns it
    api = client_for(world.coder)
    for mode in ("keyword", "semantic", "hybrid"):
        answer = api.post("/api/v1/search/", {"query": f"{MARKER} deploy key", "mode": mode}, format="json")
        assert answer.status_code == 200 and MARKER not in answer.content.decode(), mode
        assert not search_memory(agent=world.coder, query=MARKER, mode=mode, record=False).hits
    preamble = api.post("/api/v1/preamble/", {"task": f"Rotate the {MARKER} deploy key before release"}, format="json")
    assert MARKER not in preamble.content.decode()
    assert MARKER not in build_preamble(agent=world.coder, task=f"Rotate the {MARKER} deploy key").text
    assert MARKER not in api.get("/api/v1/facts/?limit=200").content.decode()
    assert api.get(f"/api/v1/facts/{subject['fact']}/").status_code == 404
    people = _admin_session(client, world.admin_user)
    assert people.get(f"/memory/acme/facts/{subject['fact']}/").status_code == 404
    assert MARKER not in people.get("/memory/acme/").content.decode()
    browsed = people.get(f"/memory/acme/?q={MARKER}").content.decode()
    assert "rotated every Tuesday" not in browsed and "billing export" not in browsed  # the query is echoed
    assert "rotated every Tuesday" not in admin_client.get("/admin/memory/factmention/").content.decode()
    changelist = admin_client.get(f"/admin/memory/fact/?q={MARKER}")
    assert changelist.status_code == 200 and "0 results" in changelist.content.decode()
    assert "rotated every Tuesday" not in admin_client.get("/admin/memory/fact/").content.decode()
    assert MARKER not in people.get(f"/review/remember/{subject['review']}/").content.decode()


def test_the_older_fact_is_relinked_to_the_erased_facts_successor(world):
    oldest = FactFactory(domain=world.architecture, topic="t", content="Release on Mondays.")
    middle = FactFactory(domain=world.architecture, topic="t", content="Release on Tuesdays.")
    newest = FactFactory(domain=world.architecture, topic="t", content="Release on Wednesdays.")
    Fact.objects.filter(pk=oldest.pk).update(superseded_by=middle, superseded_at=middle.created_at)
    Fact.objects.filter(pk=middle.pk).update(superseded_by=newest, superseded_at=newest.created_at)
    plan = select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [middle.pk]}))
    assert plan.relinked == [{"fact": oldest.pk, "was": middle.pk, "now": newest.pk}]
    event = erasure.erase(plan=plan, reason="wrong", by=Actor.of_user(world.admin_user))
    oldest.refresh_from_db()
    assert oldest.superseded_by_id == newest.pk
    assert event.detail["relinked"] == [{"fact": oldest.pk, "was": middle.pk, "now": newest.pk}]
    # erasing the head too: the oldest has no successor left; it is not believed again silently
    erasure.erase(
        plan=select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [newest.pk]})),
        reason="wrong",
        by=Actor.of_user(world.admin_user),
    )
    oldest.refresh_from_db()
    assert (oldest.superseded_by_id, oldest.superseded_at) == (None, None)
    assert oldest.status == FactStatus.CHALLENGED
    challenged = AuditEvent.objects.get(verb="fact.challenged", target_id=oldest.pk)
    assert challenged.detail["reason"] == "erasure"
    recalled = search_memory(agent=world.coder, query="Release on Mondays", mode="keyword", record=False)
    assert oldest.pk not in [hit.fact.pk for hit in recalled.hits]


def test_the_tombstone_holds_a_hash_of_the_content_and_never_the_content(world):
    fact = FactFactory(domain=world.architecture, topic="pii", content="Alice's phone is 555-0100.")
    plan = select_subject(
        world.workspace, parse_selection({"kind": "domain", "domain": "architecture", "topic": "pii"})
    )
    digest = erasure.content_hash(plan.facts, plan.texts)
    event = erasure.erase(plan=plan, reason="GDPR request", by=Actor.of_user(world.admin_user))
    assert event.detail["sha256"] == digest
    assert event.detail["erased"]["memory.fact"] == [fact.pk]
    assert "555-0100" not in json.dumps(event.detail) and "pii" not in json.dumps(event.detail)
    assert event.detail["selection"]["domain"] == "architecture"
    assert "topic_sha256" in event.detail["selection"]


def test_preview_writes_nothing(world):
    FactFactory(domain=world.architecture, topic="t", content="Preview me.")
    before = (Fact.objects.count(), AuditEvent.objects.count())
    plan = select_subject(world.workspace, parse_selection({"kind": "domain", "domain": "architecture"}))
    assert plan.counts()["memory.fact"] == 1
    assert (Fact.objects.count(), AuditEvent.objects.count()) == before


def test_a_failure_mid_erase_writes_nothing(world, monkeypatch):
    fact = FactFactory(domain=world.architecture, topic="t", content="Keep me whole.")
    FactMention.objects.create(fact=fact, text="Keep me whole!", veracity="agent_inferred")
    plan = select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [fact.pk]}))

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(erasure, "record_event", boom)
    with pytest.raises(RuntimeError):
        erasure.erase(plan=plan, reason="r", by=Actor.of_user(world.admin_user))
    assert Fact.objects.filter(pk=fact.pk).exists()
    assert FactMention.objects.filter(fact=fact).count() == 1
    assert not AuditEvent.objects.filter(verb="subject.erased").exists()


def test_only_a_workspace_admin_person_may_erase(world):
    fact = FactFactory(domain=world.architecture, topic="t", content="Guarded.")
    plan = select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [fact.pk]}))
    other_admin = type(world.admin_user).objects.create_user("globex-admin")
    from tests.factories import MembershipFactory

    MembershipFactory(user=other_admin, workspace=world.other_workspace, is_admin=True)
    for by in (Actor.of_agent(world.coder), Actor.of_user(world.reviewer), Actor.of_user(other_admin)):
        with pytest.raises(ErasureForbidden):
            erasure.erase(plan=plan, reason="r", by=by)
    assert Fact.objects.filter(pk=fact.pk).exists()


def test_selections_by_agent_review_and_ids_of_another_workspace(world):
    mine = FactFactory(domain=world.architecture, topic="t", content="Mine.", created_by_agent=world.coder)
    FactFactory(domain=world.architecture, topic="t", content="Theirs.", created_by_agent=world.planner)
    plan = select_subject(world.workspace, parse_selection({"kind": "agent", "agent": "coder-a"}))
    assert plan.fact_ids == [mine.pk]
    foreign = FactFactory(domain=DomainFactory(workspace=world.other_workspace, name="ops"), content="Elsewhere.")
    assert select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [foreign.pk]})).is_empty
    with pytest.raises(NothingToErase):
        erasure.erase(
            plan=select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [foreign.pk]})),
            reason="r",
            by=Actor.of_user(world.admin_user),
        )


@pytest.mark.parametrize(
    "selection",
    [
        None,
        {"kind": "everything"},
        {"kind": "ids", "ids": []},
        {"kind": "ids", "ids": ["x"]},
        {"kind": "ids", "ids": [True]},
        {"kind": "domain"},
        {"kind": "search", "query": "  "},
        {"kind": "review", "review": "abc"},
    ],
)
def test_a_bad_selection_is_refused_with_a_stable_code(selection):
    with pytest.raises(EngramError) as refused:
        parse_selection(selection)
    assert refused.value.code == "invalid_selection"


def test_an_unknown_domain_agent_or_review_is_refused(world):
    for selection in (
        {"kind": "domain", "domain": "nosuch"},
        {"kind": "agent", "agent": "intruder"},
        {"kind": "review", "review": 99999},
    ):
        with pytest.raises(EngramError) as refused:
            select_subject(world.workspace, parse_selection(selection))
        assert refused.value.code == "invalid_selection"


def test_in_process_caches_forget_the_erased_facts(world, django_capture_on_commit_callbacks):
    from memory import classifier, pair_model, recalls
    from memory.search import preamble, voices

    fact = FactFactory(domain=world.architecture, topic="t", content="Cached words of a secret.")
    classifier.read(fact.content)
    preamble._vectors_cache["Cached words of a secret."] = preamble.np.zeros(3)
    pair_model._cache[("Cached words of a secret.", "Another text.")] = preamble.np.zeros(3)
    voices.lexeme_frequencies()
    recalls.buffer._counts[fact.pk] += 1  # a recall not flushed yet
    with django_capture_on_commit_callbacks(execute=True):
        erasure.erase(
            plan=select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [fact.pk]})),
            reason="r",
            by=Actor.of_user(world.admin_user),
        )
    assert classifier.read.cache_info().currsize == 0
    assert "Cached words of a secret." not in preamble._vectors_cache
    assert not pair_model._cache
    assert voices._stats is None
    assert fact.pk not in recalls.buffer._counts


def test_an_episode_whose_title_quotes_the_text_is_scrubbed_and_kept(world):
    from memory.models import Episode

    fact = FactFactory(domain=world.architecture, topic="t", content="Frank owes 300 euros.")
    episode = Episode.objects.create(workspace=world.workspace, kind="dispatch", title="Ask: Frank owes 300 euros.")
    erasure.erase(
        plan=select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [fact.pk]})),
        reason="r",
        by=Actor.of_user(world.admin_user),
    )
    episode.refresh_from_db()
    assert "Frank" not in episode.title


def test_a_review_selection_takes_the_facts_its_items_stored_and_scrubs_the_items(world):
    from review.models import ReviewItem

    stored = FactFactory(domain=world.architecture, topic="t", content="Gina's salary is 90k.")
    FactFactory(domain=world.architecture, topic="t", content="Unrelated.")
    review = RememberReview.objects.create(
        workspace=world.workspace,
        agent=world.coder,
        session_id="s",
        raw_output='```json\n{"recommendations": [{"suggested_memory_content": "Gina\'s salary is 90k."}]}\n```',
        status="approved",
        resolved_at=stored.created_at,
        resolution={"stored_ids": [stored.pk], "edits": {"hr.md": {"content": "Gina's salary is 90k."}}},
    )
    item = ReviewItem.objects.create(
        review=review,
        order=0,
        path="hr.md",
        recommended_layer="domain/knowledge",
        suggested_memory_content="Gina's salary is 90k.",
        file_text="Gina's salary is 90k.\n",
        stored_fact=stored,
    )
    plan = select_subject(world.workspace, parse_selection({"kind": "review", "review": review.pk}))
    assert plan.fact_ids == [stored.pk]
    assert plan.counts()["review.reviewitem:scrubbed"] == 1
    erasure.erase(plan=plan, reason="r", by=Actor.of_user(world.admin_user))
    item.refresh_from_db()
    review.refresh_from_db()
    assert item.stored_fact_id is None and item.suggested_memory_content == "" and item.file_text == ""
    assert "Gina" not in review.raw_output and "Gina" not in json.dumps(review.resolution)
    assert review.resolution["stored_ids"] == [stored.pk]  # ids stay: the runtime's record of what happened
