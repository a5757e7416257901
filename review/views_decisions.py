"""Meeting decisions (seed 003): a person pastes what a meeting decided; each decision becomes a
human_stated `decision` fact in the workspace's `decisions` domain (memory.services.decisions)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from memory.actors import Actor
from memory.errors import InsufficientPermission, InvalidInput
from memory.models import Workspace
from memory.services.decisions import (
    DECISIONS_DOMAIN,
    MAX_DECISIONS,
    MeetingRecord,
    check_may_record,
    record_meeting_decisions,
    split_decisions,
)
from review.access import workspace_for
from review.forms import MeetingDecisionsForm

TEMPLATE = "review/decisions.html"


def _context(workspace: Workspace, form: MeetingDecisionsForm, **extra: Any) -> dict[str, Any]:
    return {
        "workspace": workspace,
        "tab": "decisions",
        "form": form,
        "domain_name": DECISIONS_DOMAIN,
        "max_decisions": MAX_DECISIONS,
        **extra,
    }


def _outcomes(record: MeetingRecord, lines: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "number": number,
            "text": text,
            "outcome": result.outcome,
            "fact_id": result.fact.pk,
            "compared_with": result.compared_with,
            "reason": result.reason,
        }
        for number, (text, result) in enumerate(zip(lines, record.results, strict=True), start=1)
    ]


@login_required
@require_http_methods(["GET", "POST"])
def meeting_decisions(request: HttpRequest, slug: str) -> HttpResponse:
    """The form (GET), and its submission (POST): 200 with each line's outcome, 422 with the errors
    in place and the input kept, 403 for a person who may not decide in `decisions` (another
    workspace is a 404, as everywhere)."""
    workspace = workspace_for(request.user, slug)
    by = Actor.of_user(request.user)
    try:
        check_may_record(workspace=workspace, by=by)
    except InsufficientPermission as exc:
        form = MeetingDecisionsForm()
        return render(request, TEMPLATE, _context(workspace, form, denied=exc.detail), status=403)
    if request.method == "GET":
        form = MeetingDecisionsForm(initial={"date": timezone.localdate().isoformat()})
        return render(request, TEMPLATE, _context(workspace, form))

    form = MeetingDecisionsForm(request.POST)
    errors: dict[str, list[str]] = {}
    if form.is_valid():
        lines = split_decisions(form.cleaned_data["decisions"])
        try:
            record = record_meeting_decisions(
                workspace=workspace,
                by=by,
                title=form.cleaned_data["title"],
                day=form.cleaned_data["date"],
                decisions=lines,
                topic=form.cleaned_data["topic"],
            )
        except InvalidInput as exc:
            errors = {key: [str(m) for m in messages] for key, messages in exc.fields.items()}
        except InsufficientPermission as exc:
            return render(request, TEMPLATE, _context(workspace, form, denied=exc.detail), status=403)
        else:
            fresh = MeetingDecisionsForm(initial={"date": timezone.localdate().isoformat()})
            context = _context(workspace, fresh, episode=record.episode, outcomes=_outcomes(record, lines))
            return render(request, TEMPLATE, context)
    else:
        errors = {key: [str(m) for m in messages] for key, messages in form.errors.items()}
    line_errors = [
        (int(key.split(".", 1)[1]), messages) for key, messages in errors.items() if key.startswith("decisions.")
    ]
    context = _context(
        workspace,
        form,
        errors={key: messages for key, messages in errors.items() if not key.startswith("decisions.")},
        line_errors=sorted(line_errors),
    )
    return render(request, TEMPLATE, context, status=422)
