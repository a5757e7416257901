"""Review pages for people (htmx)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from memory.models import Workspace


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    workspaces = Workspace.objects.for_user(request.user)
    return render(request, "review/dashboard.html", {"workspaces": workspaces})
