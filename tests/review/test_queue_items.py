"""One queue item (issue 18): its own page and its htmx fragment, decisions with and without
htmx, outcomes stated as they are (with links), 409 on an item someone else decided, 422 that
keeps the reviewer's input, the context a decision needs, and diffs with headers."""

import json

import pytest
from django.test import Client

from memory.actors import Actor
from memory.models import BankItem, Candidate, Conflict, Fact, MemoryRun
from memory.services.facts import FactInput, propose_fact, supersede_fact
from memory.services.lifecycle import challenge_fact
from memory.services.promotion import approve_candidate, promote, record_replay
from review.diff import compare_texts
from tests.conftest import client_for

pytestmark = pytest.mark.usefixtures("reviewer_reviews_world_domains")

HX = {"HTTP_HX_REQUEST": "true"}

DOC = {
    "schema": "awtl.memory_candidate.v2",
    "failure_class": "agent_failure",
    "failure_type": "wrong_command",
    "source_action_ids": ["a-1"],
    "root_cause_summary": "Ran the wrong command.",
    "scope": {"applies_to": ["web"], "does_not_apply_to": ["mobile"]},
    "evidence_refs": ["ci:42"],
    "verification_probe_candidate": "npm-build",
    "requires_human_review": True,
    "domain": "architecture",
    "topic": "build",
}

OLD_WORDING = "Run the tests with make test before pushing."
RESTATED = "Before pushing, run the tests with make test."


def submit(world, text: str, *, cid: str, **changes) -> Candidate:
    body = {**DOC, "candidate_id": cid, "proposed_memory": text, **changes}
    response = client_for(world.coder).post("/api/v1/candidates/", body, format="json")
    assert response.status_code in (200, 201), response.content
    return Candidate.objects.get(pk=response.json()["id"])


def live_fact(world, text: str, topic: str = "build") -> Fact:
    return propose_fact(
        domain=world.architecture,
        by=Actor.of_agent(world.coder),
        data=FactInput(topic=topic, content=text, memory_type="procedure"),
    ).fact


def item(kind: str, pk: int) -> str:
    return f"/review/{kind}/{pk}/"


def decide(kind: str, pk: int) -> str:
    return f"/review/{kind}/{pk}/decide/"


# --- The item page ------------------------------------------------------------------------------
def test_item_page_is_a_full_page_with_the_queue_beside_it_and_a_fragment_for_htmx(world, client):
    candidate = submit(world, "Use npm ci in CI builds.", cid="c-page")
    client.force_login(world.reviewer)
    page = client.get(item("candidate", candidate.pk))
    html = page.content.decode()
    assert page.status_code == 200
    assert "<html" in html and 'id="queue"' in html  # styled page with the list beside it
    assert f'id="item-candidate-{candidate.pk}"' in html and 'data-testid="queue-detail"' in html
    assert page.context["current_key"] == f"candidate-{candidate.pk}"
    assert f'id="entry-candidate-{candidate.pk}"' in html
    fragment = client.get(item("candidate", candidate.pk), **HX)
    assert fragment.status_code == 200
    assert "<html" not in fragment.content.decode()
    assert f'id="item-candidate-{candidate.pk}"' in fragment.content.decode()
    # The buttons work without htmx too: a plain form POST to the decide URL.
    assert f'method="post" action="{decide("candidate", candidate.pk)}"' in html
    for action in ("approve", "deny", "edit"):
        assert f'data-action="{action}"' in html
    assert 'name="reason" data-field="reason"' in html and 'name="edited_text" data-field="edit"' in html


def test_plain_post_decides_and_redirects_to_the_item_page_with_the_outcome(world, client):
    candidate = submit(world, "Use npm ci in CI builds.", cid="c-plain")
    client.force_login(world.reviewer)
    response = client.post(decide("candidate", candidate.pk), {"action": "approve"})
    assert response.status_code == 302 and response["Location"] == item("candidate", candidate.pk)
    page = client.get(response["Location"])
    html = page.content.decode()
    candidate.refresh_from_db()
    assert candidate.fact_id is not None
    assert "Approved and promoted as a new fact" in html
    assert f'href="/memory/acme/facts/{candidate.fact_id}/"' in html
    assert 'data-testid="already-decided"' in html and "reviewer approved it" in html
    assert '<fieldset class="controls" disabled>' in html


def test_htmx_decision_answers_the_outcome_and_triggers_the_next_item(world, client):
    candidate = submit(world, "Use npm ci in CI builds.", cid="c-hx")
    client.force_login(world.reviewer)
    response = client.post(decide("candidate", candidate.pk), {"action": "approve"}, **HX)
    assert response.status_code == 200
    trigger = json.loads(response["HX-Trigger"])
    assert "queue-changed" in trigger and trigger["engram:decided"] == {"kind": "candidate", "id": candidate.pk}
    assert 'data-outcome="new"' in response.content.decode()


# --- 409: decided by someone else ----------------------------------------------------------------
def test_decision_on_an_item_another_reviewer_decided_answers_409_with_who_what_and_when(world, client):
    candidate = submit(world, "Use npm ci in CI builds.", cid="c-race")
    first, second = Client(), Client()
    first.force_login(world.admin_user)
    second.force_login(world.reviewer)
    second_page = second.get(item("candidate", candidate.pk), **HX)  # both have the item open
    assert second_page.status_code == 200
    assert first.post(decide("candidate", candidate.pk), {"action": "approve"}, **HX).status_code == 200
    late = second.post(decide("candidate", candidate.pk), {"action": "deny", "reason": "duplicate"}, **HX)
    html = late.content.decode()
    assert late.status_code == 409
    assert "Already decided: wsadmin approved it at " in html and "UTC" in html
    assert '<fieldset class="controls" disabled>' in html
    assert "queue-changed" in json.loads(late["HX-Trigger"])
    assert Candidate.objects.get(pk=candidate.pk).promotion_status == "active"  # the deny changed nothing
    # Without htmx: back to the item page with the message.
    plain = second.post(decide("candidate", candidate.pk), {"action": "deny", "reason": "duplicate"})
    assert plain.status_code == 302
    assert "Already decided: wsadmin approved it" in second.get(plain["Location"]).content.decode()


def test_a_challenged_fact_revalidated_by_someone_else_answers_409(world, client):
    fact = live_fact(world, "The cache TTL is 60 seconds.", topic="cache")
    challenge_fact(fact=fact, by=Actor.of_user(world.admin_user), reason="stale")
    other = Client()
    other.force_login(world.admin_user)
    assert other.post(decide("challenged", fact.pk), {"action": "revalidate"}, **HX).status_code == 200
    client.force_login(world.reviewer)
    late = client.post(decide("challenged", fact.pk), {"action": "deprecate"}, **HX)
    assert late.status_code == 409 and "wsadmin revalidated it" in late.content.decode()


# --- Outcomes -------------------------------------------------------------------------------------
def test_restatement_offers_the_choice_and_keep_is_a_re_mention_showing_the_wording_not_kept(world, client):
    old = live_fact(world, OLD_WORDING)
    candidate = submit(world, RESTATED, cid="c-keep")
    client.force_login(world.reviewer)
    detail = client.get(item("candidate", candidate.pk), **HX).content.decode()
    assert 'data-testid="restatement-choice"' in detail and "restates live" in detail
    response = client.post(decide("candidate", candidate.pk), {"action": "approve", "on_restatement": "keep"}, **HX)
    html = response.content.decode()
    assert 'data-outcome="re_mention"' in html
    assert f"re-mention of fact #{old.pk}" in html and f'href="/memory/acme/facts/{old.pk}/"' in html
    assert "not kept" in html and "<ins>" in html  # the diff of the wording thrown away
    old.refresh_from_db()
    assert old.content == OLD_WORDING and old.mention_count == 2 and old.superseded_by_id is None


def test_restatement_replace_supersedes_the_old_fact_by_the_rule_human(world, client):
    old = live_fact(world, OLD_WORDING)
    candidate = submit(world, RESTATED, cid="c-replace")
    client.force_login(world.reviewer)
    response = client.post(decide("candidate", candidate.pk), {"action": "approve", "on_restatement": "replace"}, **HX)
    html = response.content.decode()
    candidate.refresh_from_db()
    new = candidate.fact
    assert new.pk != old.pk and new.content == RESTATED
    old.refresh_from_db()
    assert old.superseded_by_id == new.pk
    assert Conflict.objects.get(winner=new, loser=old).rule == "human"
    assert 'data-outcome="superseded"' in html and f"replaced the wording of fact #{old.pk}" in html
    assert f'href="/memory/acme/facts/{new.pk}/"' in html and f'href="/memory/acme/facts/{old.pk}/"' in html


def test_a_contradicting_candidate_says_which_fact_it_superseded(world, client):
    old = live_fact(world, "The web app builds with npm run build on Node 18.")
    candidate = submit(world, "The web app builds with npm run build on Node 20.", cid="c-sup")
    client.force_login(world.reviewer)
    html = client.post(decide("candidate", candidate.pk), {"action": "approve"}, **HX).content.decode()
    candidate.refresh_from_db()
    assert 'data-outcome="superseded"' in html
    assert f"Approved and promoted as fact #{candidate.fact_id}; it superseded fact #{old.pk}" in html


def test_a_held_candidate_says_which_gate_holds_it_with_a_link_back(world, client):
    candidate = submit(world, "Pin the Node version in CI.", cid="c-held", scope={"applies_to": ["web"]})
    client.force_login(world.reviewer)
    html = client.post(decide("candidate", candidate.pk), {"action": "approve"}, **HX).content.decode()
    assert 'data-outcome="held"' in html and "held on gate scope" in html
    assert f'href="{item("candidate", candidate.pk)}"' in html
    assert Candidate.objects.get(pk=candidate.pk).fact_id is None


def test_a_candidate_that_may_contradict_a_fact_links_the_possible_conflict(world, client):
    mia = live_fact(world, "Mia leads the platform team.", topic="team")
    candidate = submit(world, "Omar leads the platform team.", cid="c-possible", topic="team")
    client.force_login(world.reviewer)
    html = client.post(decide("candidate", candidate.pk), {"action": "approve"}, **HX).content.decode()
    conflict = Conflict.objects.get(existing=mia, status="open")
    assert 'data-outcome="possible"' in html and f"it may contradict fact #{mia.pk}" in html
    assert f'href="/review/possible/{conflict.pk}/"' in html


def test_save_edit_and_approve_stores_human_edited(world, client):
    candidate = submit(world, "Use npm ci in CI builds.", cid="c-edit")
    client.force_login(world.reviewer)
    response = client.post(
        decide("candidate", candidate.pk),
        {"action": "edit_approve", "edited_text": "Use npm ci (never npm install) in CI builds."},
        **HX,
    )
    assert response.status_code == 200
    fact = Candidate.objects.get(pk=candidate.pk).fact
    assert fact.content == "Use npm ci (never npm install) in CI builds." and fact.human_edited is True


def test_plain_approve_does_not_mark_the_fact_human_edited(world, client):
    candidate = submit(world, "Use npm ci in CI builds.", cid="c-noedit")
    client.force_login(world.reviewer)
    client.post(decide("candidate", candidate.pk), {"action": "approve"}, **HX)
    assert Candidate.objects.get(pk=candidate.pk).fact.human_edited is False


# --- 422 keeps the input and the whole detail --------------------------------------------------------
def test_deny_without_reason_redraws_the_full_detail_with_the_typed_edit(world, client):
    rival = live_fact(world, "The web app builds with npm run build on Node 18.")
    candidate = submit(world, "The web app builds with npm run build on Node 20.", cid="c-422")
    client.force_login(world.reviewer)
    typed = "The web app builds with npm run build on Node 22, typed by me."
    response = client.post(decide("candidate", candidate.pk), {"action": "deny", "edited_text": typed}, **HX)
    html = response.content.decode()
    assert response.status_code == 422
    assert typed in html and 'data-testid="error-reason"' in html
    assert 'data-testid="gates"' in html and 'data-gate="scope"' in html
    assert f"fact #{rival.pk}" in html and "No live fact on this topic" not in html
    assert 'data-testid="diff"' in html


def test_empty_edit_redraws_with_the_reason_kept(world, client):
    candidate = submit(world, "Use npm ci in CI builds.", cid="c-empty")
    client.force_login(world.reviewer)
    response = client.post(
        decide("candidate", candidate.pk), {"action": "edit_approve", "edited_text": "  ", "reason": "my note"}, **HX
    )
    html = response.content.decode()
    assert response.status_code == 422
    assert 'value="my note"' in html and 'data-testid="error-edit"' in html and 'data-testid="gates"' in html
    assert Candidate.objects.get(pk=candidate.pk).human_approved_at is None


# --- Context for a decision ----------------------------------------------------------------------
def test_detail_names_the_agent_its_role_the_run_and_links_the_evidence(world, client):
    fact = live_fact(world, "Builds run on Node 18.", topic="node")
    run = MemoryRun.objects.create(workspace=world.workspace, agent=world.coder, task="fix the build")
    candidate = submit(
        world, "Use npm ci in CI builds.", cid="c-ctx", evidence_refs=[f"fact:{fact.pk}", f"run:{run.pk}", "ci:42"]
    )
    BankItem.objects.create(run=run, kind="procedural", item_id="p-1", content="npm ci", candidate=candidate)
    client.force_login(world.reviewer)
    html = client.get(item("candidate", candidate.pk), **HX).content.decode()
    assert 'data-testid="proposer-agent">coder-a<' in html and 'data-testid="proposer-role">coder<' in html
    assert f'href="/review/runs/{run.pk}/" data-testid="proposer-run"' in html
    assert f'<a href="/memory/acme/facts/{fact.pk}/" data-testid="evidence-link">fact:{fact.pk}</a>' in html
    assert f'<a href="/review/runs/{run.pk}/" data-testid="evidence-link">run:{run.pk}</a>' in html
    assert "<code>ci:42</code>" in html


def test_only_gates_that_block_are_red(world, client):
    ready = submit(world, "Use npm ci in CI builds.", cid="c-ready")
    held = submit(world, "Pin the Node version.", cid="c-held2", scope={"applies_to": ["web"]})
    client.force_login(world.reviewer)
    html = client.get(item("candidate", ready.pk), **HX).content.decode()
    assert 'data-gate="auto_promotion" data-tone="neutral"' in html
    assert 'data-gate="human_review" data-tone="neutral"' in html
    assert 'data-tone="blocks"' not in html
    held_html = client.get(item("candidate", held.pk), **HX).content.decode()
    assert 'data-gate="scope" data-tone="blocks"' in held_html
    assert 'data-gate="auto_promotion" data-tone="neutral"' in held_html


def test_a_challenged_fact_shows_the_failed_replay_text(world, client):
    candidate = submit(world, "Use npm ci in CI builds.", cid="c-chal")
    by = Actor.of_user(world.admin_user)
    approve_candidate(candidate=candidate, by=by)
    fact = promote(candidate=candidate, by=by, write=True).fact
    record_replay(candidate=candidate, by=by, probe="npm-build", passed=False, details="npm ci: lockfile out of date")
    assert Fact.objects.get(pk=fact.pk).status == "challenged"
    client.force_login(world.reviewer)
    html = client.get(item("challenged", fact.pk), **HX).content.decode()
    assert 'data-testid="challenge-replay"' in html and "npm ci: lockfile out of date" in html
    assert "failed_replay" in html


# --- Diffs -----------------------------------------------------------------------------------------
def test_side_by_side_diff_has_current_and_proposed_headers(world, client):
    live_fact(world, "The web app builds with npm run build on Node 18.")
    candidate = submit(world, "The web app builds with npm run build on Node 20.", cid="c-diff")
    client.force_login(world.reviewer)
    html = client.get(item("candidate", candidate.pk), **HX).content.decode()
    assert 'data-testid="diff-head-old">current · fact #' in html
    assert 'data-testid="diff-head-new">proposed</h4>' in html
    assert "<ins>20</ins>" in html and "<del>18</del>" in html


def test_unrelated_texts_are_stacked_instead_of_interleaved(world, client):
    live_fact(world, "The web app builds with npm run build on Node 18.")
    candidate = submit(world, "Deploys happen on Fridays after the standup meeting.", cid="c-far")
    client.force_login(world.reviewer)
    html = client.get(item("candidate", candidate.pk), **HX).content.decode()
    assert 'data-testid="diff-unrelated"' in html and "diff-stacked" in html
    d = compare_texts("alpha beta gamma", "delta epsilon zeta")
    assert d.stacked and "<del>" not in d.old and "<ins>" not in d.new
    assert not compare_texts("Node 18 builds the app.", "Node 20 builds the app.").stacked


def test_edit_box_live_diff_against_the_agents_wording(world, client):
    candidate = submit(world, "Use npm ci in CI builds.", cid="c-live")
    client.force_login(world.reviewer)
    html = client.get(item("candidate", candidate.pk), **HX).content.decode()
    assert f'hx-post="/review/candidate/{candidate.pk}/diff/"' in html and "delay:300ms" in html
    response = client.post(
        f"/review/candidate/{candidate.pk}/diff/", {"edited_text": "Use npm ci in all CI builds."}, **HX
    )
    diff = response.content.decode()
    assert response.status_code == 200
    assert "agent&#x27;s wording" in diff and "your edit" in diff and "<ins>all </ins>" in diff
    client.force_login(world.outsider_reviewer)
    assert client.post(f"/review/candidate/{candidate.pk}/diff/", {"edited_text": "x"}).status_code == 404


def test_fact_history_shows_a_word_diff_between_consecutive_versions(world, client):
    first = live_fact(world, "Deploys happen on Tuesdays.", topic="deploys")
    second = supersede_fact(fact=first, by=Actor.of_user(world.admin_user), content="Deploys happen on Thursdays.")
    client.force_login(world.reviewer)
    html = client.get(f"/memory/acme/facts/{second.pk}/").content.decode()
    assert 'data-testid="history-diff"' in html and f"changes from #{first.pk}" in html
    assert "<del>Tuesdays</del>" in html and "<ins>Thursdays</ins>" in html
