"""Review pages for people (htmx)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from memory import access
from memory.models import Fact
from review.selectors import pending_reviews_for_user
from review.selectors_activity import recent_activity
from review.selectors_queue import KINDS, queue_counts


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    workspaces = access.workspaces(request.user, "view")
    remember_reviews = pending_reviews_for_user(request.user)
    counts = queue_counts(request.user)
    visible_workspaces = list(workspaces)
    challenged = access.restrict(  # counted over the domains this person may see only
        Fact.objects.filter(workspace__in=visible_workspaces, status="challenged", superseded_by__isnull=True),
        request.user,
        "view",
    ).count()
    activity = recent_activity(request.user, visible_workspaces)
    return render(
        request,
        "review/dashboard.html",
        {
            "workspaces": visible_workspaces,
            "remember_reviews": remember_reviews,
            "counts": counts,
            "kinds": KINDS,
            "pending_total": sum(counts.values()),
            "challenged": challenged,
            "activity": activity,
        },
    )
