"""A person's review of a machine-decided conflict: accept the decision, or restore the
loser's text. Apart from memory.services.conflicts because it supersedes through
memory.services.facts, which itself applies relations through conflicts."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from memory.actors import Actor, require_actor
from memory.audit import record_event
from memory.errors import InvalidInput, StateConflict
from memory.metrics import observe_review_latency
from memory.models import Conflict, Fact
from memory.services.facts import supersede_fact


@transaction.atomic
def review_conflict(*, conflict: Conflict, by: Actor, restore_loser: bool, reason: str = "") -> Fact | None:
    """Accept a machine's decision, or restore the loser's text: the current live head of the
    winner's chain is superseded by it, stated by the person. Either way the conflict is marked
    reviewed; a second review is refused (StateConflict `conflict_reviewed`)."""
    if not require_actor(by).is_user:
        raise InvalidInput("Only a person reviews conflicts.", code="human_review_required")
    conflict = Conflict.objects.select_for_update(of=("self",)).select_related("winner", "loser").get(pk=conflict.pk)
    if conflict.reviewed_at is not None:
        raise StateConflict("This conflict was already reviewed.", code="conflict_reviewed")
    if conflict.winner is None or conflict.loser is None:
        raise StateConflict("This conflict has no winner to review; decide it instead.", code="conflict_open")
    restored = None
    if restore_loser:
        head = conflict.winner
        while head.superseded_by_id is not None:  # the winner may have been replaced since
            head = Fact.objects.get(pk=head.superseded_by_id)
        restored = supersede_fact(
            fact=head,
            by=by,
            content=conflict.loser.content,
            reason=reason or f"restored the human-stated fact {conflict.loser_id} after review",
        )
    conflict.reviewed_at, conflict.reviewed_by = timezone.now(), by.user
    conflict.save(update_fields=["reviewed_at", "reviewed_by"])
    observe_review_latency("conflict", conflict.detected_at, conflict.reviewed_at)
    record_event(
        actor=by,
        verb="conflict.reviewed",
        workspace_id=conflict.workspace_id,
        target=conflict,
        detail={"restored": restored.pk if restored else None, "reason": reason},
    )
    return restored
