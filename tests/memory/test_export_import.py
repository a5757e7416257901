"""Export / import of a workspace (issue 21): a round trip through a JSON Lines file gives the same
answers (ids mapped) to searches, preambles and fact histories; agents' keys never travel; a bad
file writes nothing. The embedding model is the real one: the round trip claims semantic equality."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
from typing import Any

import numpy as np
import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from agents.services import rotate_key
from memory.actors import Actor
from memory.models import AuditEvent, Fact, Workspace
from memory.services.embedding import embed_missing
from memory.services.portability import export_workspace, import_workspace, sections
from memory.services.tenancy import set_grant
from review.models import RememberReview
from review.services import approve_review, update_item
from tests.conftest import client_for
from tests.factories import AgentFactory
from tests.review.samples import FILES, OUTPUT

SYSTEM = Actor.system("test")
DEPLOYS = {"domain": "architecture", "topic": "deploys", "memory_type": "convention"}
CANDIDATE = {
    "schema": "awtl.memory_candidate.v2",
    "candidate_id": "memcand-contracts",
    "failure_class": "agent_failure",
    "failure_type": "contract_mismatch",
    "source_action_ids": ["action-12"],
    "root_cause_summary": "Public response shape changed without updating contract evidence.",
    "proposed_memory": "When a public API response schema changes, update the contract artifact and the verifier "
    "evidence together.",
    "scope": {"applies_to": ["public_api"], "does_not_apply_to": ["internal_refactor"]},
    "evidence_refs": ["judge:contract-verifier"],
    "verification_probe_candidate": "public-contract-regression",
    "promotion_status": "candidate",
    "requires_human_review": False,
    "domain": "context",
    "repo": "web",
    "topic": "contracts",
}
SEARCHES = [
    ("keyword", "when do production deploys happen"),
    ("keyword", "database migrations"),
    ("hybrid", "which day do we ship releases to production"),
    ("hybrid", "how are invoices corrected"),
    ("hybrid", "public API contract changes"),
    ("semantic", "background workers for uploads"),
]
PREAMBLE_TASKS = [
    "Prepare the production deploy of the billing service and run the database migrations first.",
    "Change the public API response for invoices and update the contract evidence.",
]


def ok(response: Any, status: int = 201) -> dict[str, Any]:
    assert response.status_code == status, response.json()
    return response.json()


@pytest.fixture
def built(world, reviewer_reviews_world_domains, reviewer_is_workspace_admin) -> dict[str, Any]:
    """A workspace with a realistic mix: supersession chains and conflicts, re-mentions with their
    words, a policy chain, episodes with links, a promoted candidate with replays, an approved
    remember review, notes, observations, a `none` grant and the audit trail of all of it."""
    ws = world.workspace
    api, api2 = client_for(world.coder), client_for(world.coder2)
    relay = client_for(AgentFactory(workspace=ws, role=world.coder_role, name="chat-relay", relays_human_words=True))
    verifier = client_for(AgentFactory(workspace=ws, role=world.planner_role, name="verifier-v", is_verifier=True))
    set_grant(role=world.coder_role, domain=world.architecture, level="write", by=SYSTEM)
    set_grant(role=world.planner_role, domain=world.conventions, level="none", by=SYSTEM)

    episode = ok(api.post("/api/v1/episodes/", {"kind": "session", "title": "release week"}, format="json"))
    observation = ok(api.post("/api/v1/me/observations/", {"text": "CI deploy job ran on a Tuesday."}, format="json"))
    human = ok(
        relay.post(
            "/api/v1/facts/",
            {**DEPLOYS, "content": "Production deploys happen on Tuesdays.", "veracity": "human_stated"},
            format="json",
        )
    )["fact"]
    lost = ok(
        api.post("/api/v1/facts/", {**DEPLOYS, "content": "Production deploys happen on Fridays."}, format="json")
    )
    assert lost["outcome"] == "conflict_lost"
    again = ok(
        api2.post("/api/v1/facts/", {**DEPLOYS, "content": "Production deploys happen on Tuesdays."}, format="json"),
    )
    assert again["outcome"] == "re_mentioned"
    migrations = ok(
        api.post(
            "/api/v1/facts/",
            {
                "domain": "architecture",
                "topic": "migrations",
                "content": "Database migrations run before the web processes restart.",
                "memory_type": "procedure",
                "episode_id": episode["id"],
                "source_observation_ids": [observation["id"]],
            },
            format="json",
        )
    )["fact"]
    replaced = ok(
        api.post(
            f"/api/v1/facts/{migrations['id']}/supersede/",
            {"content": "Database migrations run in a release job before any web process restarts.", "reason": "ci"},
            format="json",
        )
    )
    for content, topic, domain in [
        ("Ingest runs as a Celery worker; uploads are parsed in the background.", "ingest", "architecture"),
        ("Commit messages are written in the imperative mood.", "commits", "conventions"),
        ("The web repo serves the public API under /api/v1/.", "api", "repo:web/context"),
    ]:
        ok(
            api.post(
                "/api/v1/facts/",
                {
                    "domain": domain,
                    "topic": topic,
                    "content": content,
                    "memory_type": "convention",
                    "episode_id": episode["id"],
                },
                format="json",
            )
        )
    policy = ok(
        api.post("/api/v1/policies/", {"domain": "architecture", "rule": "Deploy only on Tuesdays."}, format="json")
    )
    ok(
        api.post(
            f"/api/v1/policies/{policy['id']}/supersede/",
            {"rule": "Deploy only on Tuesdays, after the migrations job.", "reason": "order matters"},
            format="json",
        )
    )
    ok(api.put("/api/v1/me/notes/", {"notes": "Remember: billing deploys need a feature flag."}, format="json"), 200)

    candidate = ok(api.post("/api/v1/candidates/", CANDIDATE, format="json"))
    ok(
        verifier.post(
            f"/api/v1/candidates/{candidate['id']}/replays/",
            {"probe": "public-contract-regression", "passed": True, "details": "ran in CI"},
            format="json",
        )
    )
    promoted = ok(api.post(f"/api/v1/candidates/{candidate['id']}/promote/", {"write": True}, format="json"))
    assert promoted["decision"] == "promote"

    submitted = ok(
        api.post(
            "/api/v1/reviews/", {"session_id": "turn-7", "repo": "web", "output": OUTPUT, "files": FILES}, format="json"
        )
    )
    review = RememberReview.objects.get(pk=submitted["id"])
    item = review.items.get(path="CONTRIBUTING.md")
    update_item(item=item, by=Actor.of_user(world.reviewer), content="Pull requests stay under 400 lines.")
    approve_review(review=review, by=Actor.of_user(world.reviewer))
    ok(api.post("/api/v1/remember/", {"session_id": "s-1", "content": "Billing deploys need the flag."}, format="json"))
    run = ok(api.post("/api/v1/runs/", {"task": "Fix the flaky deploy pipeline"}, format="json"))
    ok(
        api.post(
            f"/api/v1/runs/{run['id']}/bank/knowledge/",
            {"id": "k1", "content": "The deploy job retries twice.", "tags": ["ci"]},
            format="json",
        ),
    )
    ok(
        api.post(
            f"/api/v1/runs/{run['id']}/interventions/",
            {"step": 3, "reminder": "Check the retry count first.", "window": [{"step": 2, "command": "make"}]},
            format="json",
        ),
    )
    # What the after-commit embedding tasks do in a running instance (tests never commit).
    embed_missing()
    return {"human": human, "lost": lost["fact"], "migrations": migrations, "replaced": replaced}


def export_text(workspace: Workspace, *, with_vectors: bool = False) -> str:
    out = io.StringIO()
    export_workspace(workspace=workspace, out=out, by=SYSTEM, with_vectors=with_vectors)
    return out.getvalue()


def rows_of(workspace: Workspace) -> dict[str, list[int]]:
    """Every exported row of the workspace, per type, in pk order (an import keeps that order)."""
    return {s.kind: list(s.rows(workspace.pk).values_list("pk", flat=True)) for s in sections()}


def id_maps(source: Workspace, copy: Workspace) -> dict[str, dict[int, int]]:
    before, after = rows_of(source), rows_of(copy)
    return {t: dict(zip(before[t], after[t], strict=True)) for t in before}


def client_of_copy(copy: Workspace, name: str):
    """The imported agent of that name, with a newly issued key (imported agents have none)."""
    agent = copy.agents.get(name=name)
    client = client_for(None)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {rotate_key(agent=agent, by=SYSTEM)}")
    return client


def renumber(text: str, facts: dict[int, int]) -> str:
    return re.sub(r"\bfact (\d+)\b", lambda m: f"fact {facts.get(int(m.group(1)), m.group(1))}", text)


def mapped_detail(body: dict[str, Any], m: dict[str, dict[int, int]]) -> dict[str, Any]:
    """A fact detail of the source workspace as the copy should answer it: every id mapped."""
    facts = m["fact"]
    out = json.loads(json.dumps(body))
    out["id"] = facts[out["id"]]
    out["superseded_by"] = facts.get(out["superseded_by"]) if out["superseded_by"] else None
    out["supersede_reason"] = renumber(out["supersede_reason"], facts)
    prov = out["provenance"]
    prov["review_id"] = m["remember_review"][prov["review_id"]] if prov["review_id"] else None
    prov["candidate_id"] = m["candidate"][prov["candidate_id"]] if prov["candidate_id"] else None
    out["source_observation_ids"] = [m["observation"][i] for i in out["source_observation_ids"]]
    for entry in out["history"]:
        entry["id"] = facts[entry["id"]]
        entry["superseded_by"] = facts[entry["superseded_by"]] if entry["superseded_by"] else None
        entry["supersede_reason"] = renumber(entry["supersede_reason"], facts)
    for conflict in out["conflicts"]:
        conflict["id"] = m["conflict"][conflict["id"]]
        for key in ("existing", "proposed", "winner", "loser"):
            conflict[key] = facts[conflict[key]] if conflict[key] else None
    for mention in out["mentions"]:
        mention["id"] = m["fact_mention"][mention["id"]]
    return out


def mapped_recall(item: dict[str, Any], m: dict[str, dict[int, int]]) -> dict[str, Any]:
    """A search hit or preamble fact of the source as the copy should answer it, but for its id
    and score: its provenance's review and candidate mapped."""
    out = {k: v for k, v in json.loads(json.dumps(item)).items() if k not in ("id", "score")}
    prov = out["provenance"]
    prov["review_id"] = m["remember_review"][prov["review_id"]] if prov["review_id"] else None
    prov["candidate_id"] = m["candidate"][prov["candidate_id"]] if prov["candidate_id"] else None
    return out


def same_search(source: dict[str, Any], copy: dict[str, Any], m: dict[str, dict[int, int]]) -> None:
    facts = m["fact"]
    assert (copy["mode"], copy["intent"]) == (source["mode"], source["intent"])
    assert [facts[h["id"]] for h in source["results"]] == [h["id"] for h in copy["results"]], (source, copy)
    for a, b in zip(source["results"], copy["results"], strict=True):
        assert b["score"] == pytest.approx(a["score"], rel=1e-4, abs=1e-6)
        assert mapped_recall(a, m) == {k: v for k, v in b.items() if k not in ("id", "score")}


def same_preamble(source: dict[str, Any], copy: dict[str, Any], m: dict[str, dict[int, int]]) -> None:
    facts = m["fact"]
    for key in ("text", "policies", "working_memory"):
        assert copy[key] == source[key]
    assert [facts[f["id"]] for f in source["facts"]] == [f["id"] for f in copy["facts"]]
    strip = [mapped_recall(f, m) for f in source["facts"]]
    assert strip == [{k: v for k, v in f.items() if k != "id"} for f in copy["facts"]]


# --- the round trip --------------------------------------------------------------------------------
def test_round_trip_answers_the_same_searches_preambles_and_fact_histories(world, built, tmp_path):
    path = tmp_path / "acme.jsonl.gz"
    call_command("export_workspace", "acme", "-o", str(path), stderr=io.StringIO())
    assert path.read_bytes()[:2] == b"\x1f\x8b"  # .gz: compressed
    out = io.StringIO()
    call_command("import_workspace", str(path), "--as", "acme-copy", stdout=out, stderr=io.StringIO())
    assert "Imported workspace acme-copy" in out.getvalue()
    assert "without API keys" in out.getvalue() and "coder-a" in out.getvalue()
    source, copy = world.workspace, Workspace.objects.get(slug="acme-copy")
    m = id_maps(source, copy)
    facts = m["fact"]

    # Exported without vectors: the import embedded every fact again, to the same vectors.
    pairs = {f.pk: f.embedding for f in Fact.objects.filter(workspace__in=[source, copy])}
    assert all(pairs[b] is not None for b in facts.values())
    for a, b in facts.items():
        assert float(np.dot(pairs[a], pairs[b])) >= 0.9999

    # The same histories: every fact's chain, conflicts and mentions, as the same-named agent reads them.
    readers = {
        name: (client_for(getattr(world, attr)), client_of_copy(copy, name))
        for attr, name in (("coder", "coder-a"), ("planner", "planner-a"))
    }
    statuses = []
    for source_client, copy_client in readers.values():
        for a, b in facts.items():
            before, after = source_client.get(f"/api/v1/facts/{a}/"), copy_client.get(f"/api/v1/facts/{b}/")
            assert after.status_code == before.status_code
            statuses.append(before.status_code)
            if before.status_code == 200:
                assert after.json() == mapped_detail(before.json(), m)
    assert 404 in statuses and statuses.count(200) > len(facts)  # the planner's `none` domain stays hidden
    chain = readers["coder-a"][1].get(f"/api/v1/facts/{facts[built['lost']['id']]}/").json()
    assert [h["id"] for h in chain["history"]] == [facts[built["human"]["id"]], facts[built["lost"]["id"]]]
    assert chain["supersede_reason"].endswith(
        f"to fact {facts[built['human']['id']]} (contradicts: `fridays` replaces `tuesdays`)"
    )

    # The same answers to a fixed set of searches and preambles, as agents of the same role
    # (the planner has `none` on conventions: hidden on both sides).
    # Exact nearest neighbours: HNSW is approximate, and the dead entries earlier tests leave in
    # its graph (rolled back, never vacuumed) can crowd out a row on one side and not the other.
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_indexscan = off")
    hits = 0
    for source_client, copy_client in readers.values():
        for mode, query in SEARCHES:
            body = {"query": query, "mode": mode, "limit": 10}
            hits += len(source_client.post("/api/v1/search/", body, format="json").json()["results"])
            same_search(
                ok(source_client.post("/api/v1/search/", body, format="json"), 200),
                ok(copy_client.post("/api/v1/search/", body, format="json"), 200),
                m,
            )
            body["repo"] = "web"
            same_search(
                ok(source_client.post("/api/v1/search/", body, format="json"), 200),
                ok(copy_client.post("/api/v1/search/", body, format="json"), 200),
                m,
            )
        for task in PREAMBLE_TASKS:
            body = {"task": task, "repo": "web"}
            same_preamble(
                ok(source_client.post("/api/v1/preamble/", body, format="json"), 200),
                ok(copy_client.post("/api/v1/preamble/", body, format="json"), 200),
                m,
            )


def test_counts_per_type_are_the_same_in_the_header_the_source_and_the_copy(world, built):
    text = export_text(world.workspace)
    header = json.loads(text.splitlines()[0])
    assert header["format"] == "engram.workspace" and header["version"] == 1 and header["workspace"] == "acme"
    result = import_workspace(lines=text.splitlines(), slug="acme-copy", by=SYSTEM)
    source = {t: len(ids) for t, ids in rows_of(world.workspace).items()}
    copy = {t: len(ids) for t, ids in rows_of(result.workspace).items()}
    assert result.counts == header["counts"]
    # The source gained its `workspace.exported` event, the copy its `workspace.imported` one.
    assert source.pop("audit_event") == copy.pop("audit_event") == header["counts"]["audit_event"] + 1
    assert source == copy == {t: n for t, n in header["counts"].items() if t != "audit_event"}
    for kind in (
        "fact",
        "conflict",
        "fact_mention",
        "policy",
        "episode_fact",
        "replay",
        "promotion_decision",
        "remember_review",
        "review_item",
        "observation",
        "working_memory",
        "grant",
    ):
        assert header["counts"][kind] > 0, kind
    # Nothing of another workspace travels.
    assert '"globex"' not in text and "intruder" not in text


def test_the_copy_keeps_chains_links_and_stored_review_facts_on_its_own_rows(world, built):
    result = import_workspace(lines=export_text(world.workspace).splitlines(), slug="acme-copy", by=SYSTEM)
    copy = result.workspace
    facts = Fact.objects.filter(workspace=copy)
    assert facts.filter(superseded_by__isnull=False).count() == 2
    assert not Fact.objects.filter(workspace=copy, superseded_by__workspace=world.workspace).exists()
    policy = copy.policies.get(superseded_by__isnull=False)
    assert policy.superseded_by.workspace_id == copy.pk and policy.superseded_by.active
    review = RememberReview.objects.get(workspace=copy)
    stored = set(review.items.exclude(stored_fact=None).values_list("stored_fact_id", flat=True))
    assert stored and set(review.resolution["stored_ids"]) == stored
    assert set(Fact.objects.filter(pk__in=stored).values_list("workspace_id", flat=True)) == {copy.pk}
    candidate = copy.candidates.get()
    assert candidate.fact.workspace_id == copy.pk and candidate.fact.origin_candidate_id == candidate.pk
    assert candidate.replays.count() == 1 and candidate.decisions.get().fact_id == candidate.fact_id
    challenged = AuditEvent.objects.filter(workspace=copy, target_type="fact").values_list("target_id", flat=True)
    assert set(challenged) <= set(facts.values_list("pk", flat=True))
    assert AuditEvent.objects.filter(workspace=copy, verb="workspace.imported", target_id=copy.pk).exists()


def test_with_vectors_the_vectors_travel_and_nothing_is_embedded(world, built, monkeypatch):
    text = export_text(world.workspace, with_vectors=True)
    from memory import embeddings

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("no embedding on an import with vectors")

    monkeypatch.setattr(embeddings, "embed_texts", refuse)
    result = import_workspace(lines=text.splitlines(), slug="acme-copy", by=SYSTEM)
    assert result.facts_without_vectors == []
    m = id_maps(world.workspace, result.workspace)["fact"]
    vectors = dict(
        Fact.objects.filter(workspace__in=[world.workspace, result.workspace]).values_list("pk", "embedding")
    )
    for a, b in m.items():
        assert np.allclose(vectors[a], vectors[b], atol=1e-7)


# --- keys ------------------------------------------------------------------------------------------
def test_agent_keys_never_travel_and_imported_agents_need_a_new_key(world, built, tmp_path):
    path = tmp_path / "acme.jsonl"
    call_command("export_workspace", "acme", "-o", str(path), "--with-vectors", stderr=io.StringIO())
    text = path.read_text()
    assert "key_hash" not in text and "key_hint" not in text
    for agent in world.workspace.agents.all():
        assert agent.key_hash not in text and agent.key_hint not in text
    assert world.coder.plain_key not in text
    call_command("import_workspace", str(path), "--as", "acme-copy", stdout=io.StringIO(), stderr=io.StringIO())
    copy = Workspace.objects.get(slug="acme-copy")
    assert sorted(copy.agents.values_list("name", flat=True)) == sorted(
        world.workspace.agents.values_list("name", flat=True)
    )
    assert not copy.agents.filter(revoked_at__isnull=True).exists()  # no usable key until one is issued
    hashes = set(world.workspace.agents.values_list("key_hash", flat=True))
    assert hashes.isdisjoint(copy.agents.values_list("key_hash", flat=True))
    assert client_for(world.coder).get("/api/v1/me/").json()["workspace"] == "acme"  # the old key: the source only
    assert client_of_copy(copy, "coder-a").get("/api/v1/me/").json()["workspace"] == "acme-copy"


# --- refusals --------------------------------------------------------------------------------------
def _tables() -> tuple[int, ...]:
    from memory.models import Agent, Episode, Policy

    return (
        Workspace.objects.count(),
        Fact.objects.count(),
        Policy.objects.count(),
        Agent.objects.count(),
        Episode.objects.count(),
        AuditEvent.objects.count(),
        RememberReview.objects.count(),
    )


def _edit(text: str, kind: str, change: Any) -> str:
    """The file with the first row of `kind` changed by `change(row)`."""
    lines = text.splitlines()
    for i, line in enumerate(lines[1:], start=1):
        row = json.loads(line)
        if row["type"] == kind:
            lines[i] = json.dumps(change(row))
            return "\n".join(lines)
    raise AssertionError(kind)


def _line_of(text: str, kind: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if f'"type": "{kind}"' in line)


BAD_FILES = {
    "wrong version": (lambda t: t.replace('"version": 1', '"version": 2', 1), "version 2 is not supported", None),
    "not a workspace file": (lambda t: '{"hello": 1}\n' + t, "not an Engram workspace file", 1),
    "broken line": (lambda t: t.replace('{"type": "policy"', '{"type": "policy" oops', 1), "not valid JSON", "policy"),
    "dangling ref": (
        lambda t: _edit(t, "conflict", lambda r: {**r, "winner": 999_999}),
        "winner points at fact 999999, which is not in the file",
        "conflict",
    ),
    "unknown type": (lambda t: _edit(t, "episode", lambda r: {**r, "type": "spaceship"}), "unknown type", "spaceship"),
    "unknown field": (
        lambda t: _edit(t, "fact", lambda r: {**r, "colour": "red"}),
        "unknown field(s) for fact",
        "fact",
    ),
    "bad choice": (lambda t: _edit(t, "fact", lambda r: {**r, "memory_type": "gossip"}), "memory_type", "fact"),
    "bad date": (
        lambda t: _edit(t, "episode", lambda r: {**r, "started_at": "yesterday"}),
        "episode started_at: “yesterday” value has an invalid format",
        "episode",
    ),
    "broken rule": (lambda t: _edit(t, "fact", lambda r: {**r, "confidence": 3.5}), "cannot be stored", "fact"),
    "NUL in a text": (lambda t: _edit(t, "fact", lambda r: {**r, "content": "a\u0000b"}), "cannot be stored", "fact"),
    "wrong kind of value": (
        lambda t: _edit(t, "agent", lambda r: {**r, "created_at": [1]}),
        "agent created_at: not a valid value",
        "agent",
    ),
    "huge number": (lambda t: _edit(t, "fact", lambda r: {**r, "recall_count": 10**30}), "line", "fact"),
    "truncated": (lambda t: "\n".join(t.splitlines()[:-3]), "do not match the header's counts", None),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_file_is_refused_naming_the_line_and_writes_nothing(world, built, tmp_path, case):
    text = export_text(world.workspace)
    spoil, message, line_of = BAD_FILES[case]
    bad = spoil(text)
    path = tmp_path / "bad.jsonl"
    path.write_text(bad)
    before = _tables()
    with pytest.raises(CommandError) as refused:
        call_command("import_workspace", str(path), "--as", "acme-copy", stdout=io.StringIO(), stderr=io.StringIO())
    assert message in str(refused.value) and "Nothing was imported" in str(refused.value)
    if line_of is not None:
        number = line_of if isinstance(line_of, int) else _line_of(bad, line_of)
        assert f"line {number}:" in str(refused.value)
    assert _tables() == before
    assert not Workspace.objects.filter(slug="acme-copy").exists()


def test_an_existing_slug_is_refused_unless_imported_under_another(world, built, tmp_path):
    path = tmp_path / "acme.jsonl"
    call_command("export_workspace", "acme", "-o", str(path), stderr=io.StringIO())
    before = _tables()
    with pytest.raises(CommandError, match="workspace 'acme' already exists"):
        call_command("import_workspace", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match="workspace 'globex' already exists"):
        call_command("import_workspace", str(path), "--as", "globex", stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match="slug"):
        call_command("import_workspace", str(path), "--as", "Not a slug!", stdout=io.StringIO(), stderr=io.StringIO())
    assert _tables() == before
    call_command("import_workspace", str(path), "--as", "acme-2", stdout=io.StringIO(), stderr=io.StringIO())
    assert Workspace.objects.get(slug="acme-2").name == "Acme"


def test_export_to_stdout_and_an_unknown_workspace(world, built):
    out = io.StringIO()
    call_command("export_workspace", "acme", stdout=out, stderr=io.StringIO())
    lines = out.getvalue().splitlines()
    assert json.loads(lines[0])["format"] == "engram.workspace"
    assert all(json.loads(line)["type"] for line in lines[1:])
    with pytest.raises(CommandError, match="No workspace 'nowhere'"):
        call_command("export_workspace", "nowhere", stdout=io.StringIO(), stderr=io.StringIO())


# --- the admin action ------------------------------------------------------------------------------
def _staff(user) -> None:
    from django.contrib.auth.models import Permission

    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_workspace", "change_workspace"]))


def _post_action(client, ids: list[int]):
    return client.post(
        "/admin/memory/workspace/",
        {"action": "download_export", "_selected_action": [str(i) for i in ids]},
    )


def test_admin_action_downloads_the_export_for_the_workspace_admin(world, built, client):
    _staff(world.admin_user)
    client.force_login(world.admin_user)
    response = _post_action(client, [world.workspace.pk])
    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    assert 'filename="engram-acme-' in response["Content-Disposition"]
    lines = gzip.decompress(response.content).decode().splitlines()
    assert json.loads(lines[0])["workspace"] == "acme"
    result = import_workspace(lines=lines, slug="acme-from-admin", by=SYSTEM)
    assert result.counts["fact"] == Fact.objects.filter(workspace=world.workspace).count()
    assert AuditEvent.objects.filter(
        workspace=world.workspace, verb="workspace.exported", actor_label="user:wsadmin"
    ).exists()


def test_admin_action_is_refused_to_a_member_who_is_not_admin(world, built, client):
    _staff(world.outsider_reviewer)
    client.force_login(world.outsider_reviewer)
    response = _post_action(client, [world.workspace.pk])
    assert response.status_code == 403
    assert not AuditEvent.objects.filter(verb="workspace.exported").exists()


# --- the format's coverage -------------------------------------------------------------------------
NOT_EXPORTED = {
    "workspacemembership": "people's access: a username may be another person in another instance",
    "decayprofile": "instance-wide, not a workspace's",
    "job": "operational state of background runs",
    "exposure": "recall trail (ids only), kept by the instance that served it",
    "webhooksubscription": "endpoints and secrets of this instance",
    "webhookdelivery": "delivery log of this instance",
}


def test_every_model_of_memory_and_review_travels_or_is_left_out_on_purpose():
    from django.apps import apps

    exported = {s.model._meta.model_name for s in sections()}
    for section in sections():  # every foreign key is mapped (or raises ImproperlyConfigured)
        assert section.relations is not None and section.many is not None
    models = {m._meta.model_name for app in ("memory", "review") for m in apps.get_app_config(app).get_models()}
    assert models - exported - set(NOT_EXPORTED) == set()


def test_admin_action_wants_exactly_one_workspace(world, built, client, django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    response = _post_action(client, [world.workspace.pk, world.other_workspace.pk])
    assert response.status_code == 302
    assert not AuditEvent.objects.filter(verb="workspace.exported").exists()


# --- into an empty instance --------------------------------------------------------------------------
SAME_ANYWHERE_EXCEPT = {
    "agent": {"revoked_at"},  # an imported agent has no key until one is issued
    "audit_event": {"detail"},  # ids inside an event's detail keep the exported numbers (README)
}


def canonical(text: str) -> dict[str, list[dict[str, Any]]]:
    """A file with every ref renumbered 1, 2, … per type in file order, people dropped (an empty
    instance has none) and the export/import events left out: what must survive any round trip."""
    by_type = {s.kind: s for s in sections()}
    rows = [json.loads(line) for line in text.splitlines()[1:]]
    order: dict[str, dict[int, int]] = {}
    for row in rows:
        seen = order.setdefault(row["type"], {})
        seen[row["ref"]] = len(seen) + 1
    model_types = {s.model._meta.model_name: s.kind for s in sections()}
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        section = by_type[row["type"]]
        if row["type"] == "audit_event" and row["verb"] in ("workspace.exported", "workspace.imported"):
            continue
        row = {k: v for k, v in row.items() if k not in SAME_ANYWHERE_EXCEPT.get(row["type"], set())}
        row["ref"] = order[row["type"]][row["ref"]]
        for f, target in section.relations:
            if target == "user":
                row.pop(f.name, None)
            elif target != "workspace" and row.get(f.name) is not None:
                row[f.name] = order[target][row[f.name]]
        for m2m, target in section.many:
            row[m2m.name] = [order[target][v] for v in row[m2m.name]]
        for column, kind in section.prose.items():
            row[column] = re.sub(
                rf"\b{kind} (\d+)\b", lambda m, kind=kind: f"{kind} #{order[kind][int(m.group(1))]}", row[column]
            )
        if row["type"] == "audit_event" and row["target_id"] is not None:
            target = "workspace" if row["target_type"] == "workspace" else model_types[row["target_type"]]
            row["target_id"] = order[target][row["target_id"]]
        if row["type"] == "remember_review" and row["resolution"].get("stored_ids"):
            row["resolution"]["stored_ids"] = [order["fact"][i] for i in row["resolution"]["stored_ids"]]
            for stored in row["resolution"]["stored"]:
                stored["fact_id"] = order["fact"][stored["fact_id"]]
        out.setdefault(row["type"], []).append(row)
    return out


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="makes a database on the embedded server")
def test_import_into_an_empty_instance_then_export_gives_the_same_file(world, built, tmp_path):
    """Another database, migrated from nothing, in other processes: import the file there, export it
    again, and every row, reference, chain and vector is the same (refs renumbered)."""
    from tests.procs import ROOT

    source = tmp_path / "acme.jsonl"
    again = tmp_path / "again.jsonl.gz"
    call_command("export_workspace", "acme", "-o", str(source), "--with-vectors", stderr=io.StringIO())
    name = f"engram_fresh_{os.getpid()}"
    env = {**os.environ, "ENGRAM_DB_NAME": name}
    settings = connection.settings_dict

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    try:
        manage("migrate", "--noinput")
        output = manage("import_workspace", str(source))
        assert "Imported workspace acme" in output and "without API keys" in output
        manage("export_workspace", "acme", "-o", str(again), "--with-vectors")
    finally:
        with psycopg.connect(
            host=settings["HOST"], port=settings["PORT"], user="postgres", dbname="postgres", autocommit=True
        ) as admin_connection:
            admin_connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    before, after = canonical(source.read_text()), canonical(gzip.decompress(again.read_bytes()).decode())
    assert before["fact"] and all(row["embedding"] for row in before["fact"])
    assert before.keys() == after.keys()
    for kind in before:
        assert after[kind] == before[kind], kind
