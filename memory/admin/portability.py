"""The workspace admin's "download an export" action (issue 21): the same file as
`manage.py export_workspace SLUG -o FILE.jsonl.gz`, for one workspace its admin selected."""

from __future__ import annotations

import gzip
import io
from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpResponse
from django.utils import timezone

from memory import access
from memory.actors import Actor
from memory.services.portability import export_workspace

if TYPE_CHECKING:
    from django.http import HttpRequest


@admin.action(description="Download an export of the selected workspace (JSON Lines, gzip; agents without keys)")
def download_export(model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
    picked = list(queryset[:2])
    if len(picked) != 1:
        model_admin.message_user(request, "Select exactly one workspace to export.", level=messages.WARNING)
        return None
    workspace = picked[0]
    # The file holds everything of the workspace (agents' private notes, reviewed files' texts).
    if not access.is_workspace_admin(request.user, workspace):
        raise PermissionDenied
    text = io.StringIO()
    export_workspace(workspace=workspace, out=text, by=Actor.of_user(request.user))
    response = HttpResponse(gzip.compress(text.getvalue().encode("utf-8")), content_type="application/gzip")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="engram-{workspace.slug}-{stamp}.jsonl.gz"'
    return response
