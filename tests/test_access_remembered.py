"""A request reads a person's workspace and domain ids once (memory.access.remembering, issue 38):
the rules must answer exactly what they answer as subqueries, for every persona, model and action,
and a change of rights inside the request must be seen by the next rule that asks."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.http import HttpResponse
from django.test import RequestFactory
from guardian.shortcuts import assign_perm, remove_perm

from config.middleware import AccessMemoMiddleware
from memory import access
from memory.models import Fact, WorkspaceMembership
from review.models import LayerMapping, RememberReview, ReviewItem
from tests.access_matrix_world import Matrix
from tests.access_matrix_world import matrix as matrix  # the fixture
from tests.factories import DomainFactory, FactFactory, MembershipFactory, RepoFactory, UserFactory

pytestmark = pytest.mark.django_db

# Every model the rules scope by workspace and domain, those with rules of their own among them.
LABELS = sorted(
    {
        *access.SCOPES,
        "memory.fact",
        "memory.candidate",
        "memory.conflict",
        "memory.policy",
        "memory.exposure",
        "review.rememberreview",
        "review.reviewitem",
    }
)


def _seen(label: str, user: Any, action: str) -> set[int]:
    model = apps.get_model(label)
    return set(access.restrict(model._default_manager.all(), user, action).values_list("pk", flat=True))


def _people(m: Matrix) -> dict[str, Any]:
    return {**{k: v for k, v in m.users.items() if v is not None}, **m.targets}


def _per_repo_review(m: Matrix) -> tuple[RememberReview, Any, Any]:
    """A review of a repo whose project/context items land in that repo's `context` domain (a
    per-repo mapping), a person who reviews that domain only, and one who reviews the workspace's
    `context` domain (no repo) only."""
    acme = m.workspaces["ws"].workspace
    repo = RepoFactory(workspace=acme, slug="billing")
    context = DomainFactory(workspace=acme, repo=repo, name="context")
    unrepo = DomainFactory(workspace=acme, repo=None, name="context")  # same name, no repo: not where it lands
    LayerMapping.objects.create(workspace=acme, layer="project/context", domain_name="context", per_repo=True)
    agent = m.rows["review.rememberreview"]["in"].agent
    review = RememberReview.objects.create(workspace=acme, agent=agent, repo=repo, session_id="repo", raw_output="{}")
    ReviewItem.objects.create(
        review=review, order=0, path="docs/ctx.md", recommended_layer="project/context", rationale="r", selected=True
    )
    person = UserFactory(username="contextrev", is_staff=False)
    MembershipFactory(user=person, workspace=acme)
    assign_perm("memory.review_domain", person, context)
    other = UserFactory(username="unreporev", is_staff=False)
    MembershipFactory(user=other, workspace=acme)
    assign_perm("memory.review_domain", other, unrepo)
    return review, person, other


def test_the_remembered_ids_answer_as_the_subqueries_for_every_persona_model_and_action(matrix: Matrix) -> None:
    review, context_reviewer, other_context_reviewer = _per_repo_review(matrix)
    # A reviewer through a group only.
    by_group = UserFactory(username="bygroup", is_staff=False)
    MembershipFactory(user=by_group, workspace=matrix.workspaces["ws"].workspace)
    matrix.group.user_set.add(by_group)
    assign_perm("memory.review_domain", matrix.group, matrix.rows["memory.fact"]["out"].domain)
    people = {
        **_people(matrix),
        "context_reviewer": context_reviewer,
        "other": other_context_reviewer,
        "by_group": by_group,
    }
    compared = 0
    for name, user in people.items():
        for label in LABELS:
            for action in access.ACTIONS:
                plain = _seen(label, user, action)
                with access.remembering():
                    remembered = _seen(label, user, action)
                    assert _seen(label, user, action) == remembered  # the second read is the memo's
                assert remembered == plain, (name, label, action)
                compared += 1
    assert compared == len(people) * len(LABELS) * 3
    # The rule is not vacuous: the per-repo item is the context reviewer's, and only theirs among
    # reviewers of one workspace's domains; the matrix's reviewer sees the mixed review, not `out`.
    with access.remembering():
        assert _seen("review.rememberreview", context_reviewer, "view") == {review.pk}
        assert _seen("review.rememberreview", other_context_reviewer, "view") == set()
        incidents = matrix.rows["memory.fact"]["out"].domain
        assert _seen("memory.fact", by_group, "decide") == set(
            Fact.objects.filter(domain=incidents).values_list("pk", flat=True)
        )
        assert _seen("review.reviewitem", matrix.users["reviewer"], "decide") == {
            matrix.rows["review.reviewitem"]["in"].pk,
            matrix.rows["review.rememberreview"]["in"].items.get().pk,
        }
        reviewer_sees = _seen("review.rememberreview", matrix.users["reviewer"], "view")
    rows = matrix.rows["review.rememberreview"]
    assert reviewer_sees == {rows["in"].pk, rows["mixed"].pk}


def test_a_change_of_rights_inside_a_request_is_seen_by_the_next_rule(matrix: Matrix) -> None:
    reviewer = matrix.users["reviewer"]
    acme = matrix.workspaces["ws"].workspace
    incidents = matrix.rows["memory.fact"]["out"].domain
    architecture = matrix.rows["memory.fact"]["in"].domain
    out_fact = matrix.rows["memory.fact"]["out"]
    with access.remembering():
        assert not access.may(reviewer, "decide", out_fact)
        assign_perm("memory.review_domain", reviewer, incidents)
        assert access.may(reviewer, "decide", out_fact)
        remove_perm("memory.review_domain", reviewer, incidents)
        assert not access.may(reviewer, "decide", out_fact)
        # Through a group.
        assign_perm("memory.review_domain", matrix.group, incidents)
        matrix.group.user_set.add(reviewer)
        assert access.may(reviewer, "decide", out_fact)
        matrix.group.user_set.remove(reviewer)
        assert not access.may(reviewer, "decide", out_fact)
        # Membership: made admin, then no longer a member.
        membership = WorkspaceMembership.objects.get(user=reviewer, workspace=acme)
        membership.is_admin = True
        membership.save()
        assert access.may(reviewer, "administer", acme)
        membership.delete()
        assert not access.may(reviewer, "view", matrix.rows["memory.fact"]["in"])
        assert not access.workspaces(reviewer).exists()
    # A domain made in a workspace someone administers is theirs at once.
    admin = matrix.targets["admin"]
    with access.remembering():
        assert access.may(admin, "decide", out_fact)
        fresh = DomainFactory(workspace=acme, name="fresh")
        fact = FactFactory(domain=fresh)
        assert access.may(admin, "decide", fact)
        assert fresh.pk in set(access.domains(admin).values_list("pk", flat=True))
    assert Fact.objects.filter(domain=architecture).exists()


def test_pages_and_the_admin_are_served_inside_remembering() -> None:
    seen: list[bool] = []

    def view(request: Any) -> HttpResponse:
        seen.append(access._remembered.get() is not None)
        return HttpResponse("ok")

    AccessMemoMiddleware(view)(RequestFactory().get("/"))
    assert seen == [True]
    assert access._remembered.get() is None  # and only inside the request
