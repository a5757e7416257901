"""What a write means (issue 14): restatement, contradiction, separate or unsure — and nothing said
is lost. Real PostgreSQL and the real model; the relations come from memory.classifier.classify."""

from __future__ import annotations

import json
import re

import pytest
from guardian.shortcuts import assign_perm

from memory.actors import Actor
from memory.embeddings import embed_meanings, embed_texts, fact_text
from memory.errors import InsufficientPermission, InvalidInput, StateConflict
from memory.models import AuditEvent, Conflict, Fact, FactMention
from memory.selectors import fact_history
from memory.services.conflicts import decide_conflict
from memory.services.facts import FactInput, ProposalResult, propose_fact
from memory.services.hot import harmonize, merge_near_duplicates

# "Mia leads the team" / "Omar leads the team": a new lead, or a second one — the wording cannot
# tell, so neither is decided by a machine.
MIA = "Mia leads the platform team."
OMAR = "Omar leads the platform team."
# The second reading (on by default) reads Mia/Omar as two separate facts; squash- against
# rebase-merging is a pair it is unsure of too.
UNSURE = {
    "rules alone": (MIA, OMAR),
    "second reading": ("We squash-merge pull requests.", "We rebase-merge pull requests."),
}


def propose(world, content, *, topic="team", agent=None, **extra) -> ProposalResult:
    return propose_fact(
        domain=world.architecture,
        data=FactInput(topic=topic, content=content, memory_type="convention", **extra),
        by=Actor.of_agent(agent or world.coder),
    )


def unsure_pair(world, pair: tuple[str, str] = (MIA, OMAR)) -> tuple[Fact, ProposalResult]:
    """Mia's fact by the coder, then Omar's by the planner: a possible conflict."""
    mia = propose(world, pair[0]).fact
    omar = propose(world, pair[1], agent=world.planner)
    assert omar.outcome == "possible_conflict", omar.reason  # the classifier is unsure of this pair
    return mia, omar


def person(world) -> Actor:
    return Actor.of_user(world.admin_user)


@pytest.fixture(params=["rules alone", "second reading"])
def configured(request, settings):
    """Runs a test with the rules alone and with the pair model's second reading (the default)."""
    settings.ENGRAM_PAIR_MODEL = request.param == "second reading"
    return request.param


# --- The three concrete cases -------------------------------------------------------------------


def test_tabs_after_spaces_is_not_a_re_mention_of_spaces(configured, world):
    spaces = propose(world, "Python code is indented with spaces.", topic="style").fact
    tabs = propose(world, "Python code is indented with tabs.", topic="style")
    assert tabs.outcome in ("conflict_won", "conflict_lost", "possible_conflict")
    assert tabs.fact.pk != spaces.pk and tabs.conflict is not None
    spaces.refresh_from_db()
    assert (spaces.mention_count, spaces.confidence) == (1, 0.7)  # not silently reinforced
    assert not FactMention.objects.exists()


def test_rebase_after_squash_is_not_a_re_mention_of_squash(configured, world):
    squash = propose(world, "Feature branches are merged with squash.", topic="merging").fact
    rebase = propose(world, "Feature branches are merged with rebase.", topic="merging")
    assert rebase.outcome in ("conflict_won", "conflict_lost", "possible_conflict")
    assert rebase.fact.pk != squash.pk
    squash.refresh_from_db()
    assert squash.mention_count == 1 and not squash.mentions.exists()


def test_a_restatement_re_mentions_the_original_and_keeps_what_was_said(configured, world):
    original = propose(world, "Deploys ship every Tuesday after the standup.", topic="deploys").fact
    again = propose(world, "Deploys go out on Tuesdays after the standup.", topic="deploys", veracity="tool_generated")
    assert again.outcome == "re_mentioned"
    assert again.fact.pk == original.pk and again.reason.startswith("same meaning")
    original.refresh_from_db()
    assert original.superseded_by_id is None and original.mention_count == 2
    assert Fact.objects.filter(topic="deploys").count() == 1
    mention = FactMention.objects.get(fact=original)
    assert mention.text == "Deploys go out on Tuesdays after the standup."
    assert (mention.agent, mention.veracity, mention.via) == (world.coder, "tool_generated", "proposal")
    assert mention.similarity is not None and mention.similarity > 0.8
    event = AuditEvent.objects.get(verb="fact.re_mentioned", target_id=original.pk)
    assert event.detail["text"] == "Deploys go out on Tuesdays after the standup."
    assert event.detail["mention"] == mention.pk


def test_a_re_mention_is_listed_in_the_fact_detail_newest_first(configured, world, api):
    first = api.post(
        "/api/v1/facts/",
        {
            "domain": "architecture",
            "topic": "deploys",
            "content": "Deploys ship every Tuesday after the standup.",
            "memory_type": "convention",
        },
        format="json",
    ).json()
    for text in ("Deploys go out on Tuesdays after the standup.", "deploys ship every tuesday after the standup"):
        body = api.post(
            "/api/v1/facts/",
            {"domain": "architecture", "topic": "deploys", "content": text, "memory_type": "convention"},
            format="json",
        ).json()
        assert body["outcome"] == "re_mentioned" and body["fact"]["id"] == first["fact"]["id"]
        assert body["reason"].startswith("same meaning")
    detail = api.get(f"/api/v1/facts/{first['fact']['id']}/").json()
    assert detail["mentions_total"] == 2
    assert [m["text"] for m in detail["mentions"]] == [
        "deploys ship every tuesday after the standup",
        "Deploys go out on Tuesdays after the standup.",
    ]
    assert detail["mentions"][0]["agent"] == world.coder.name and detail["mentions"][0]["by_person"] is False
    assert {"observed_at", "similarity", "created_at", "via", "reason"} <= set(detail["mentions"][0])


# --- Unsure: a possible conflict, decided by a person ---------------------------------------------


def test_an_unsure_pair_keeps_both_live_with_one_open_possible_conflict(configured, world, api):
    mia, omar = unsure_pair(world, UNSURE[configured])
    assert Fact.objects.filter(topic="team").live().count() == 2
    conflict = Conflict.objects.get()
    assert (conflict.status, conflict.resolution, conflict.rule) == ("open", "", "")
    assert (conflict.existing_id, conflict.proposed_id) == (mia.pk, omar.fact.pk)
    assert conflict.winner_id is None and conflict.loser_id is None
    assert conflict.reason.startswith("unsure") and omar.conflict_id == conflict.pk
    assert AuditEvent.objects.filter(verb="conflict.opened", target_id=conflict.pk).exists()
    listed = api.get("/api/v1/conflicts/?status=open").json()
    assert listed["count"] == 1
    row = listed["results"][0]
    assert (row["status"], row["winner"], row["existing"], row["proposed"]) == ("open", None, mia.pk, omar.fact.pk)
    assert row["proposed_content"] == UNSURE[configured][1] and row["winner_content"] is None
    assert api.get("/api/v1/conflicts/?status=decided").json()["count"] == 0


def test_the_proposal_says_possible_conflict_over_the_api(world, api):
    propose(world, MIA)
    body = api.post(
        "/api/v1/facts/",
        {"domain": "architecture", "topic": "team", "content": OMAR, "memory_type": "convention"},
        format="json",
    ).json()
    assert body["outcome"] == "possible_conflict"
    assert body["conflict_id"] == Conflict.objects.get().pk
    assert body["reason"].startswith("unsure")


def test_a_person_deciding_same_makes_the_newer_a_mention_of_the_older(world):
    mia, omar = unsure_pair(world)
    conflict = decide_conflict(conflict=omar.conflict, by=person(world), resolution="same", note="one lead")
    mia.refresh_from_db()
    newer = Fact.objects.get(pk=omar.fact.pk)
    assert mia.superseded_by_id is None and mia.mention_count == 2
    assert newer.superseded_by_id == mia.pk and "a person decided" in newer.supersede_reason
    mention = FactMention.objects.get(fact=mia)
    assert (mention.text, mention.via, mention.merged_fact_id) == (OMAR, "review", newer.pk)
    assert (conflict.status, conflict.resolution, conflict.rule) == ("decided", "same", "human")
    assert conflict.winner_id is None and conflict.decided_by == world.admin_user
    assert conflict.decision_note == "one lead"
    assert AuditEvent.objects.filter(verb="conflict.decided", target_id=conflict.pk).exists()
    assert AuditEvent.objects.filter(verb="fact.merged", target_id=newer.pk, detail__text=OMAR).exists()
    # The text a person tied to Mia's fact restates it from now on, and is asked about no more.
    again = propose(world, OMAR, agent=world.coder2)
    assert (again.outcome, again.fact.pk) == ("re_mentioned", mia.pk)
    assert Conflict.objects.filter(status="open").count() == 0


def test_a_person_deciding_contradicts_supersedes_the_loser_with_the_human_rule(world):
    mia, omar = unsure_pair(world)
    conflict = decide_conflict(conflict=omar.conflict, by=person(world), resolution="contradicts", winner_id=mia.pk)
    assert (conflict.status, conflict.resolution, conflict.rule) == ("decided", "contradicts", "human")
    assert (conflict.winner_id, conflict.loser_id) == (mia.pk, omar.fact.pk)
    loser = Fact.objects.get(pk=omar.fact.pk)
    assert loser.superseded_by_id == mia.pk and "a person decided" in loser.supersede_reason
    assert Fact.objects.get(pk=mia.pk).superseded_by_id is None
    assert [f.pk for f in fact_history(mia)] == [mia.pk, loser.pk]
    assert conflict.reviewed_at is not None  # a person's decision waits in no other queue
    assert not FactMention.objects.exists()


def test_a_person_deciding_both_true_dismisses_the_pair_for_good(world):
    _mia, omar = unsure_pair(world)
    conflict = decide_conflict(conflict=omar.conflict, by=person(world), resolution="both_true")
    assert (conflict.status, conflict.resolution, conflict.rule) == ("dismissed", "both_true", "human")
    assert Fact.objects.filter(topic="team").live().count() == 2
    report = harmonize(agent=world.coder)  # written by two agents: harmonize compares them
    assert (report.possible_conflicts, report.conflicts_found) == (0, 0)
    assert propose(world, OMAR).outcome == "re_mentioned"  # the same words again: not re-flagged
    assert propose(world, MIA, agent=world.planner).outcome == "re_mentioned"
    assert Conflict.objects.count() == 1
    assert merge_near_duplicates(domain_id=world.architecture.pk, topic="team", by=person(world)) == 0


def test_a_second_decision_is_refused_with_conflict_decided(world):
    _mia, omar = unsure_pair(world)
    decide_conflict(conflict=omar.conflict, by=person(world), resolution="both_true")
    with pytest.raises(StateConflict) as refused:
        decide_conflict(conflict=omar.conflict, by=person(world), resolution="same")
    assert refused.value.code == "conflict_decided" and refused.value.status == 409


def test_only_a_person_decides_and_the_winner_is_one_of_the_pair(world):
    _mia, omar = unsure_pair(world)
    with pytest.raises(InvalidInput) as agent_tried:
        decide_conflict(conflict=omar.conflict, by=Actor.of_agent(world.coder), resolution="same")
    assert agent_tried.value.code == "human_review_required"
    with pytest.raises(InvalidInput):
        decide_conflict(conflict=omar.conflict, by=person(world), resolution="contradicts", winner_id=None)
    with pytest.raises(InvalidInput):
        decide_conflict(conflict=omar.conflict, by=person(world), resolution="keep_both")
    with pytest.raises(InsufficientPermission):  # a member who may not review the domain
        decide_conflict(conflict=omar.conflict, by=Actor.of_user(world.reviewer), resolution="same")
    assert Conflict.objects.get().status == "open"


def test_harmonize_opens_an_unsure_pair_once(world):
    common = dict(workspace=world.workspace, domain=world.architecture, topic="team", memory_type="convention")
    mia = Fact.objects.create(content=MIA, confidence=0.7, created_by_agent=world.coder, **common)
    omar = Fact.objects.create(content=OMAR, confidence=0.7, created_by_agent=world.planner, **common)
    vectors = embed_texts([fact_text("team", MIA), fact_text("team", OMAR)])
    for fact, vector in zip((mia, omar), vectors, strict=True):
        Fact.objects.filter(pk=fact.pk).update(embedding=vector)
    first = harmonize(agent=world.coder)
    assert (first.possible_conflicts, first.resolved) == (1, 0)
    conflict = Conflict.objects.get()
    assert (conflict.status, conflict.detected_by, conflict.existing_id, conflict.proposed_id) == (
        "open",
        "harmonize",
        mia.pk,
        omar.pk,
    )
    assert harmonize(agent=world.coder).possible_conflicts == 0  # already asked
    assert Fact.objects.filter(topic="team").live().count() == 2


def test_near_duplicates_filed_under_two_topics_of_a_domain_are_merged_and_other_domains_are_not(world):
    def fact(domain, topic: str, content: str) -> Fact:
        made = Fact.objects.create(
            workspace=world.workspace,
            domain=domain,
            topic=topic,
            content=content,
            memory_type="convention",
            confidence=0.7,
        )
        (vector,) = embed_texts([fact_text(topic, content)])
        Fact.objects.filter(pk=made.pk).update(embedding=vector, content_embedding=embed_texts([content])[0])
        return made

    first = fact(world.architecture, "logs", "We keep logs for 30 days.")
    second = fact(world.architecture, "retention", "We keep logs for 30 days")
    elsewhere = fact(world.conventions, "logs", "We keep logs for 30 days.")
    assert merge_near_duplicates(domain_id=world.architecture.pk, by=Actor.of_agent(world.coder)) == 1
    assert Fact.objects.filter(pk__in=(first.pk, second.pk)).live().count() == 1
    assert Fact.objects.filter(pk=elsewhere.pk).live().exists()


def test_a_merged_near_duplicate_keeps_its_text_as_a_mention(world):
    common = dict(workspace=world.workspace, domain=world.architecture, topic="logs", memory_type="convention")
    kept = Fact.objects.create(content="We keep logs for 30 days.", veracity="human_stated", confidence=1.0, **common)
    dropped = Fact.objects.create(
        content="Logs are retained for 30 days.", confidence=0.7, created_by_agent=world.planner, **common
    )
    FactMention.objects.create(fact=dropped, text="Logs stay 30 days.", veracity="agent_inferred")
    assert merge_near_duplicates(domain_id=world.architecture.pk, topic="logs", by=Actor.of_agent(world.coder)) == 1
    kept.refresh_from_db()
    assert Fact.objects.get(pk=dropped.pk).superseded_by_id == kept.pk
    texts = {m.text: m for m in kept.mentions.all()}
    assert set(texts) == {"Logs are retained for 30 days.", "Logs stay 30 days."}  # its mentions moved along
    merged = texts["Logs are retained for 30 days."]
    assert (merged.via, merged.merged_fact_id, merged.agent) == ("merge", dropped.pk, world.planner)
    assert kept.mention_count == 2
    event = AuditEvent.objects.get(verb="fact.merged", target_id=dropped.pk)
    assert event.detail["text"] == "Logs are retained for 30 days." and event.detail["into"] == kept.pk


def test_a_promoted_rule_that_loses_a_harmonised_conflict_is_challenged(world):
    from tests.factories import CandidateFactory

    candidate = CandidateFactory(domain=world.architecture)
    common = dict(workspace=world.workspace, domain=world.architecture, topic="node", memory_type="procedure")
    promoted = Fact.objects.create(
        content="The web app requires Node 20.",
        confidence=0.7,
        created_by_agent=world.coder,
        origin_candidate=candidate,
        **common,
    )
    human = Fact.objects.create(
        content="The web app requires Node 22.",
        veracity="human_stated",
        confidence=1.0,
        created_by_agent=world.planner,
        **common,
    )
    vectors = embed_texts([fact_text("node", promoted.content), fact_text("node", human.content)])
    for fact, vector in zip((promoted, human), vectors, strict=True):
        Fact.objects.filter(pk=fact.pk).update(embedding=vector)
    assert harmonize(agent=world.coder).resolved == 1
    promoted.refresh_from_db()
    assert promoted.superseded_by_id == human.pk and promoted.status == "challenged"


# --- The review queue -----------------------------------------------------------------------------


def test_the_queue_lists_a_possible_conflict_and_a_reviewer_decides_it(world, client):
    mia, omar = unsure_pair(world)
    client.force_login(world.outsider_reviewer)
    assert client.get(f"/review/possible/{omar.conflict_id}/").status_code == 404
    client.force_login(world.reviewer)  # a member without the domain's review permission
    assert client.post(f"/review/possible/{omar.conflict_id}/decide/", {"action": "same"}).status_code == 404
    assign_perm("memory.review_domain", world.reviewer, world.architecture)
    page = client.get("/review/?kind=possible")
    assert [e.key for e in page.context["entries"]] == [f"possible-{omar.conflict_id}"]
    detail = client.get(f"/review/possible/{omar.conflict_id}/")
    html = detail.content.decode()
    assert "Mia" in html and "Omar" in html and "unsure" in html
    decided = client.post(
        f"/review/possible/{omar.conflict_id}/decide/",
        {"action": "existing_wins", "reason": "Mia took over"},
        HTTP_HX_REQUEST="true",
    )
    assert decided.status_code == 200 and "queue-changed" in json.loads(decided["HX-Trigger"])
    conflict = Conflict.objects.get()
    assert (conflict.winner_id, conflict.rule, conflict.decided_by) == (mia.pk, "human", world.reviewer)
    assert conflict.decision_note == "Mia took over"
    again = client.post(f"/review/possible/{omar.conflict_id}/decide/", {"action": "both_true"}, HTTP_HX_REQUEST="true")
    assert again.status_code == 409 and "Already decided: reviewer decided it" in again.content.decode()
    assert client.get("/review/?kind=possible").context["entries"] == []


def test_the_fact_page_lists_mentions_and_possible_conflicts(world, client):
    mia, _omar = unsure_pair(world)
    propose(world, "Mia leads the platform team.", agent=world.coder2)  # identical: a re-mention
    client.force_login(world.admin_user)
    html = client.get(f"/memory/{world.workspace.slug}/facts/{mia.pk}/").content.decode()
    assert re.search(r"#\d+ may contradict #\d+", html) and "waiting for a person" in html
    assert 'data-testid="mentions"' in html and world.coder2.name in html


# --- A stream of distinct statements on one topic -------------------------------------------------


def stream_sentences() -> list[str]:
    """Distinct real facts of the tuning search set (bench/data/recall/search_tune.jsonl), each one's
    current version: no `-old` or `-restated` variant, which contradict or restate another on purpose."""
    from bench.datasets import search_set

    tune = search_set("tune")
    dead = tune.superseded_keys()
    return [
        f["content"] for f in tune.facts if f["key"] not in dead and not re.search(r"-(old|older|restated)\b", f["key"])
    ]


@pytest.mark.slow
@pytest.mark.second_reading
def test_a_stream_of_distinct_statements_on_one_topic_is_neither_merged_nor_superseded(world):
    sentences = stream_sentences()
    assert len(sentences) >= 200 and len(set(sentences)) == len(sentences)
    topic = "conversation"
    vectors = embed_meanings([(topic, s) for s in sentences], bulk=True)
    outcomes: dict[str, int] = {}
    by = Actor.of_agent(world.coder)
    for text, vector in zip(sentences, vectors, strict=True):
        result = propose_fact(
            domain=world.architecture,
            data=FactInput(topic=topic, content=text, memory_type="observation"),
            by=by,
            embedding=vector,
        )
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
    superseded = Fact.objects.filter(topic=topic, superseded_by__isnull=False).count()
    lost = superseded + outcomes.get("re_mentioned", 0)
    assert lost <= 0.02 * len(sentences), (outcomes, superseded)
    # Everything said is still there: as a live fact, or kept in a chain or a mention.
    assert Fact.objects.filter(topic=topic).count() + FactMention.objects.count() == len(sentences)
    # issue 34: at most 6 questions for 200 distinct statements on one topic
    assert outcomes.get("possible_conflict", 0) <= 6 * len(sentences) / 200, outcomes
