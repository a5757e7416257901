"""Fact lifecycle changes made by people (SPEC §7): status changes and archiving.

A fact's content is never edited in place (SPEC §3); only its status moves, and every move is
audited in the same transaction.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from memory.actors import Actor
from memory.audit import record_event
from memory.errors import InvalidInput
from memory.models import Fact, FactStatus


@transaction.atomic
def archive_fact(*, fact: Fact, by: Actor) -> Fact:
    """Retire `fact` for good (status `archived`: never recalled, never compared against).

    Idempotent: an already archived fact is returned unchanged and no event is written."""
    fact = Fact.objects.select_for_update().get(pk=fact.pk)  # lock, then re-check
    if fact.status == FactStatus.ARCHIVED:
        return fact
    previous = fact.status
    fact.status = FactStatus.ARCHIVED
    fact.status_changed_at = timezone.now()
    fact.save(update_fields=["status", "status_changed_at"])
    record_event(actor=by, verb="fact.archived", workspace_id=fact.workspace_id, target=fact, detail={"from": previous})
    return fact


@transaction.atomic
def set_fact_status(*, fact: Fact, status: str, by: Actor, reason: str = "") -> Fact:
    """Move `fact` to `status` (active, challenged, deprecated, archived), audited with the old one.

    Raises InvalidInput for an unknown status; a move to the current status changes nothing."""
    if status not in FactStatus.values:
        raise InvalidInput(
            f"Fact status must be one of {', '.join(FactStatus.values)}.",
            code="invalid_fact_status",
            fields={"status": ["Unknown status."]},
        )
    if status == FactStatus.ARCHIVED:
        # One verb for archiving, whichever page or action asked for it.
        return archive_fact(fact=fact, by=by)
    fact = Fact.objects.select_for_update().get(pk=fact.pk)
    if fact.status == status:
        return fact
    previous = fact.status
    fact.status = status
    fact.status_changed_at = timezone.now()
    fact.save(update_fields=["status", "status_changed_at"])
    record_event(
        actor=by,
        verb="fact.status_changed",
        workspace_id=fact.workspace_id,
        target=fact,
        detail={"from": previous, "to": status, "reason": reason},
    )
    return fact
