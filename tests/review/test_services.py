"""Remember review services: submission, edits, approval into facts, rejection, consumption."""

import pytest
from django.contrib.auth import get_user_model

from memory.actors import Actor
from memory.errors import InvalidInput
from memory.models import AuditEvent, EpisodeFact, Fact, MemoryDomain
from review.errors import ReviewAlreadyConsumed, ReviewAlreadyResolved, ReviewNotFound, ReviewStillPending
from review.models import LayerMapping, RememberReview, ReviewItem
from review.services import (
    FILE_BODY_CHARS,
    SOURCE,
    approve_review,
    consume_review,
    reject_review,
    set_layer_mapping,
    submit_review,
    update_item,
)
from tests.factories import MembershipFactory, UserFactory, WorkspaceFactory
from tests.review.samples import ARCH_NOTE, FILES, OUTPUT, PROFILE_NOTE


@pytest.fixture(autouse=True)
def _reviewers_decide_every_layer(world):
    """These tests act as people who may decide every item: approved items land in domains that
    may not exist yet (created on approval), which only workspace admins may decide (issue 16).
    Per-domain reviewers are tested in tests/test_people_access.py."""
    from memory.models import WorkspaceMembership

    WorkspaceMembership.objects.filter(
        workspace=world.workspace, user__in=[world.reviewer, world.outsider_reviewer]
    ).update(is_admin=True)


def _submit(world, output=OUTPUT, files=FILES, repo="web"):
    return submit_review(agent=world.coder, session_id="turn-1", output=output, files=files, repo=repo)


def _item(review, path):
    return ReviewItem.objects.get(review=review, path=path)


def _by(user):
    return Actor.of_user(user)


# --- submit ----------------------------------------------------------------------------------
def test_submit_creates_a_pending_review_with_parsed_items_and_default_mappings(world):
    review = _submit(world)
    assert review.status == "pending" and review.repo.slug == "web" and review.used_fallback is False
    items = list(review.items.order_by("order"))
    assert [i.path for i in items] == ["docs/architecture.md", "CONTRIBUTING.md", "billing/rules.py"]
    assert items[0].bytes == len(FILES["docs/architecture.md"].encode())
    assert items[0].file_text == FILES["docs/architecture.md"]
    assert all(i.selected for i in items)
    assert dict(LayerMapping.objects.filter(workspace=world.workspace).values_list("layer", "domain_name")) == {
        "user/profile": "profile",
        "project/context": "context",
        "domain/knowledge": "knowledge",
    }
    assert AuditEvent.objects.filter(verb="remember_review.submitted", target_id=review.pk).exists()


def test_submit_without_any_item_is_refused_and_writes_nothing(world):
    before = (RememberReview.objects.count(), AuditEvent.objects.count())
    with pytest.raises(InvalidInput) as err:
        _submit(world, output="Nothing durable came out of this turn.")
    assert err.value.code == "no_review_items"
    assert (RememberReview.objects.count(), AuditEvent.objects.count()) == before


def test_submit_with_an_unknown_repo_is_refused(world):
    with pytest.raises(InvalidInput) as err:
        _submit(world, repo="nope")
    assert err.value.code == "unknown_repo"
    assert not RememberReview.objects.exists()


def test_submit_keeps_existing_mappings(world):
    set_layer_mapping(
        workspace=world.workspace, layer="user/profile", domain_name="people", per_repo=False, by=_by(world.admin_user)
    )
    _submit(world)
    assert LayerMapping.objects.get(workspace=world.workspace, layer="user/profile").domain_name == "people"


# --- edits -----------------------------------------------------------------------------------
def test_update_item_saves_each_choice_at_once_and_audits_it(world):
    review = _submit(world)
    item = _item(review, "CONTRIBUTING.md")
    update_item(
        item=item,
        by=_by(world.reviewer),
        selected=False,
        layer="domain/knowledge",
        rationale="Team-wide.",
        content="New",
    )
    item.refresh_from_db()
    assert (item.selected, item.layer, item.effective_rationale, item.note) == (
        False,
        "domain/knowledge",
        "Team-wide.",
        "New",
    )
    assert item.note_edited and item.layer_edited and item.rationale_edited
    event = AuditEvent.objects.get(verb="remember_review.item_edited")
    assert event.actor_user == world.reviewer
    assert set(event.detail["changed"]) == {"selected", "layer", "rationale", "content"}


def test_update_item_with_the_suggestion_sent_back_in_crlf_is_not_an_edit(world):
    review = _submit(world)
    item = _item(review, "CONTRIBUTING.md")
    update_item(item=item, by=_by(world.reviewer), content=PROFILE_NOTE.replace(" ", " ") + "\r\n")
    item.refresh_from_db()
    assert not item.note_edited
    update_item(item=item, by=_by(world.reviewer), layer="user/profile")  # the recommended one
    item.refresh_from_db()
    assert item.edited_layer == "" and not item.layer_edited


def test_update_item_refuses_an_unknown_layer_and_a_note_longer_than_a_fact(world, settings):
    review = _submit(world)
    item = _item(review, "CONTRIBUTING.md")
    with pytest.raises(InvalidInput) as err:
        update_item(item=item, by=_by(world.reviewer), layer="team/secrets", content="x" * 20_000)
    assert set(err.value.fields) == {"layer", "content"}
    item.refresh_from_db()
    assert item.edited_layer == "" and item.edited_content is None


def test_a_person_of_another_workspace_cannot_edit(world):
    review = _submit(world)
    stranger = UserFactory(username="stranger")
    MembershipFactory(user=stranger, workspace=world.other_workspace)
    with pytest.raises(ReviewNotFound):
        update_item(item=_item(review, "CONTRIBUTING.md"), by=_by(stranger), selected=False)
    with pytest.raises(ReviewNotFound):
        approve_review(review=review, by=_by(stranger))


# --- approve ---------------------------------------------------------------------------------
def test_approve_stores_each_selected_item_as_a_fact_in_its_layer_domain(world):
    review = _submit(world)
    update_item(item=_item(review, "billing/rules.py"), by=_by(world.reviewer), selected=False)
    update_item(item=_item(review, "CONTRIBUTING.md"), by=_by(world.reviewer), content="PRs under 300 lines.")
    review = approve_review(review=review, by=_by(world.reviewer), reviewer_note="Thanks.")

    assert review.status == "approved" and review.resolved_by == world.reviewer and review.resolved_at
    arch = _item(review, "docs/architecture.md").stored_fact
    profile = _item(review, "CONTRIBUTING.md").stored_fact
    assert _item(review, "billing/rules.py").stored_fact is None
    assert arch.domain == world.repo_context  # project/context → repo:web/context
    assert profile.domain.label == "profile"  # created on demand
    assert arch.content == ARCH_NOTE and profile.content == "PRs under 300 lines."
    assert (arch.human_edited, arch.veracity, arch.memory_type) == (False, "agent_inferred", "convention")
    assert (profile.human_edited, profile.veracity, profile.memory_type) == (True, "human_stated", "profile")
    for fact, path, layer in (
        (arch, "docs/architecture.md", "project/context"),
        (profile, "CONTRIBUTING.md", "user/profile"),
    ):
        assert fact.source == SOURCE and fact.origin == "remember_review"
        assert (fact.source_file, fact.source_layer) == (path, layer)  # the path is provenance…
        assert fact.topic != path  # …not the topic (issue 18)
        assert fact.rationale and fact.embedding is not None
        assert fact.created_by_user == world.reviewer and fact.validated_by == "human"
    assert (arch.topic, profile.topic) == ("ingest runs as a celery worker", "prs under 300 lines")
    assert EpisodeFact.objects.filter(fact=arch, episode__kind="review").exists()

    resolution = review.resolution
    assert resolution["approved"] is True
    assert resolution["selected_paths"] == ["docs/architecture.md", "CONTRIBUTING.md"]
    assert resolution["stored_ids"] == [arch.pk, profile.pk]
    assert resolution["edits"] == {"CONTRIBUTING.md": {"content": "PRs under 300 lines."}}
    assert "billing/rules.py (deselected)" in resolution["note"] and "Thanks." in resolution["note"]
    event = AuditEvent.objects.get(verb="remember_review.approved")
    assert event.detail["stored_ids"] == [arch.pk, profile.pk]


def test_approve_uses_the_start_of_the_file_when_the_note_is_empty_and_skips_empty_items(world):
    text = "# Big\n" + "y" * 20_000
    output = '```json\n{"recommendations": [{"path": "big.md"}, {"path": "empty.md"}]}\n```'
    review = _submit(world, output=output, files={"big.md": text, "empty.md": ""})
    review = approve_review(review=review, by=_by(world.reviewer))
    fact = _item(review, "big.md").stored_fact
    assert fact.content == text[:FILE_BODY_CHARS]
    assert _item(review, "empty.md").stored_fact is None
    assert review.resolution["skipped_paths"] == ["empty.md"]
    assert review.resolution["selected_paths"] == ["big.md", "empty.md"]


def test_project_context_without_a_repo_goes_to_the_workspace_context_domain(world):
    review = _submit(world, repo=None)
    review = approve_review(review=review, by=_by(world.reviewer))
    fact = _item(review, "docs/architecture.md").stored_fact
    assert fact.domain.repo is None and fact.domain.name == "context"


def test_admins_remap_a_layer_to_another_domain(world):
    set_layer_mapping(
        workspace=world.workspace,
        layer="domain/knowledge",
        domain_name="conventions",
        per_repo=False,
        by=_by(world.admin_user),
    )
    review = approve_review(review=_submit(world), by=_by(world.reviewer))
    assert _item(review, "billing/rules.py").stored_fact.domain == world.conventions
    assert AuditEvent.objects.filter(verb="layer_mapping.changed").exists()


def test_a_layer_override_changes_the_domain_and_memory_type(world):
    review = _submit(world)
    update_item(item=_item(review, "billing/rules.py"), by=_by(world.reviewer), layer="user/profile")
    review = approve_review(review=review, by=_by(world.reviewer))
    fact = _item(review, "billing/rules.py").stored_fact
    assert (fact.domain.label, fact.memory_type, fact.source_layer) == ("profile", "profile", "user/profile")
    assert review.resolution["edits"] == {"billing/rules.py": {"layer": "user/profile"}}


def test_approving_twice_is_a_conflict_and_stores_nothing_more(world):
    review = approve_review(review=_submit(world), by=_by(world.reviewer))
    count = Fact.objects.count()
    with pytest.raises(ReviewAlreadyResolved) as err:
        approve_review(review=review, by=_by(world.admin_user))
    assert err.value.code == "review_already_resolved" and err.value.status == 409
    with pytest.raises(ReviewAlreadyResolved):
        reject_review(review=review, by=_by(world.admin_user))
    with pytest.raises(ReviewAlreadyResolved):
        update_item(item=_item(review, "CONTRIBUTING.md"), by=_by(world.reviewer), selected=False)
    assert Fact.objects.count() == count


def test_approving_the_same_file_again_re_mentions_the_fact(world):
    first = approve_review(review=_submit(world), by=_by(world.reviewer))
    # Another turn (the first turn's review stays its session's live one until consumed).
    again = submit_review(agent=world.coder, session_id="turn-2", output=OUTPUT, files=FILES, repo="web")
    second = approve_review(review=again, by=_by(world.reviewer))
    assert second.resolution["stored_ids"] == first.resolution["stored_ids"]
    assert {s["outcome"] for s in second.resolution["stored"]} == {"re_mentioned"}


# --- reject ----------------------------------------------------------------------------------
def test_reject_stores_nothing_and_keeps_the_edits_for_the_audit_log(world):
    review = _submit(world)
    update_item(item=_item(review, "CONTRIBUTING.md"), by=_by(world.reviewer), content="Edited, then rejected.")
    domains, facts = MemoryDomain.objects.count(), Fact.objects.count()
    review = reject_review(review=review, by=_by(world.reviewer), reviewer_note="Not durable.")
    assert review.status == "rejected"
    assert (MemoryDomain.objects.count(), Fact.objects.count()) == (domains, facts)
    assert review.resolution["approved"] is False and review.resolution["stored_ids"] == []
    assert review.resolution["edits"] == {"CONTRIBUTING.md": {"content": "Edited, then rejected."}}
    event = AuditEvent.objects.get(verb="remember_review.rejected")
    assert event.detail["edits"] == {"CONTRIBUTING.md": {"content": "Edited, then rejected."}}
    assert _item(review, "CONTRIBUTING.md").edited_content == "Edited, then rejected."


# --- consume ---------------------------------------------------------------------------------
def test_consume_follows_pending_approved_consumed_and_nothing_else(world):
    review = _submit(world)
    agent = Actor.of_agent(world.coder)
    with pytest.raises(ReviewStillPending):
        consume_review(review=review, by=agent)
    approve_review(review=review, by=_by(world.reviewer))
    consumed = consume_review(review=review, by=agent)
    assert consumed.status == "consumed" and consumed.consumed_at and consumed.resolution["approved"] is True
    with pytest.raises(ReviewAlreadyConsumed):
        consume_review(review=review, by=agent)
    with pytest.raises(ReviewAlreadyResolved):
        approve_review(review=review, by=_by(world.reviewer))


def test_a_rejected_review_is_consumed_too(world):
    review = reject_review(review=_submit(world), by=_by(world.reviewer))
    assert consume_review(review=review, by=Actor.of_agent(world.coder)).status == "consumed"


def test_another_agent_of_the_workspace_cannot_consume_a_review_it_did_not_submit(world):
    review = reject_review(review=_submit(world), by=_by(world.reviewer))
    with pytest.raises(ReviewNotFound):
        consume_review(review=review, by=Actor.of_agent(world.planner))


def test_an_agent_of_another_workspace_cannot_consume(world):
    review = approve_review(review=_submit(world), by=_by(world.reviewer))
    with pytest.raises(ReviewNotFound):
        consume_review(review=review, by=Actor.of_agent(world.foreign_agent))


def test_a_superuser_may_review_any_workspace(world):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    other = WorkspaceFactory(slug="initech")
    assert other.pk  # no membership needed
    review = approve_review(review=_submit(world), by=_by(root))
    assert review.status == "approved"


def test_the_status_check_constraint_holds_in_the_database(world):
    from django.db import IntegrityError, transaction

    review = _submit(world)
    with pytest.raises(IntegrityError), transaction.atomic():
        RememberReview.objects.filter(pk=review.pk).update(status="archived")
    with pytest.raises(IntegrityError), transaction.atomic():
        RememberReview.objects.filter(pk=review.pk).update(status="approved")  # no resolved_at


def test_seed_demo_leaves_one_pending_review_for_the_demo_workspace(db, settings, tmp_path):
    import io

    from django.core.management import call_command

    settings.ENGRAM_HOME = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    review = RememberReview.objects.get(workspace__slug="demo")
    assert review.status == "pending" and review.repo.slug == "web-app" and review.agent.name == "coder-1"
    assert [i.recommended_layer for i in review.items.order_by("order")] == [
        "domain/knowledge",
        "project/context",
        "user/profile",
    ]
    assert all(i.bytes > 0 for i in review.items.all())
