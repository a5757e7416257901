"""The run page (SPEC §9): a memory-agent run as a person sees it — the memory bank as it stands,
a timeline of the steps the memory agent reviewed and each decision it took (selective silence
included), and the promotion candidates the run produced."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET

from memory import access
from memory.errors import NotFound
from memory.models import Candidate
from memory.selectors_runs import bank_of, run_for_user, timeline_of
from review.access import reviewable_domain_ids

TEMPLATE = "review/run.html"


def candidate_link(user: Any, candidate: Candidate, reviewable: set[int]) -> str | None:
    """Where a person can open a candidate: its page in the review queue when they may review
    it, else the admin's change page when they may open it (access.may_open_admin); None when no
    page is theirs to use."""
    in_queue = (
        candidate.domain_id in reviewable
        and candidate.requires_human_review
        and candidate.human_approved_at is None
        and not candidate.is_decided
    )
    if in_queue:
        try:
            return reverse("review:queue-detail", kwargs={"kind": "candidate", "pk": candidate.pk})
        except NoReverseMatch:
            pass
    if access.may_open_admin(user, candidate):
        return reverse("admin:memory_candidate_change", args=[candidate.pk])
    return None


@login_required
@require_GET
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        run = run_for_user(request.user, run_id)
    except NotFound:
        raise Http404("No such run.") from None
    bank = bank_of(run)
    candidates = [item for item in bank.items if item.candidate is not None]
    reviewable = reviewable_domain_ids(request.user, [run.workspace_id]) if candidates else set()
    for item in candidates:
        item.candidate_link = candidate_link(request.user, item.candidate, reviewable)  # type: ignore[attr-defined,arg-type]
    interventions = list(run.interventions.all())
    context = {
        "run": run,
        "bank": bank,
        "timeline": timeline_of(run),
        "candidate_items": candidates,
        "decisions": len(interventions),
        "reminders": sum(1 for i in interventions if i.reminder is not None),
    }
    return render(request, TEMPLATE, context)
