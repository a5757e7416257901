"""A person's review of a machine-decided conflict: accept the decision, or restore the
loser's text. Apart from memory.services.conflicts because it supersedes through
memory.services.facts, which itself applies relations through conflicts."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from memory.actors import Actor, require_actor
from memory.audit import record_event
from memory.embeddings import Meaning
from memory.errors import InvalidInput, StateConflict
from memory.metrics import observe_review_latency
from memory.models import Conflict, Fact
from memory.services.facts import FactInput, plan_supersession, supersede_fact_locked
from memory.services.locking import Replan, write_planned


@dataclass(frozen=True)
class _Review:
    """What a review will write, planned outside the transaction: the conflict's domain, and for a
    restoration the live head it supersedes, the text's input and vector, and the reason."""

    domain_id: int
    head_id: int | None = None
    data: FactInput | None = None
    vector: Meaning | None = None
    reason: str = ""


def review_conflict(*, conflict: Conflict, by: Actor, restore_loser: bool, reason: str = "") -> Fact | None:
    """Accept a machine's decision, or restore the loser's text: the current live head of the
    winner's chain is superseded by it, stated by the person (read as a proposal would be:
    memory.services.facts.supersede_fact). Either way the conflict is marked reviewed; a second
    review is refused (StateConflict `conflict_reviewed`). Locks in the write path's order: the
    domain, the conflict, the facts (memory.services.locking)."""
    if not require_actor(by).is_user:
        raise InvalidInput("Only a person reviews conflicts.", code="human_review_required")

    def plan(_hint: None) -> _Review:
        current = Conflict.objects.select_related("winner", "loser").get(pk=conflict.pk)
        _check_reviewable(current)
        if not restore_loser:
            return _Review(current.domain_id)
        head = _live_head(current.winner)
        assert current.loser is not None  # _check_reviewable
        why = reason or f"restored the human-stated fact {current.loser_id} after review"
        data, vector = plan_supersession(fact=head, by=by, content=current.loser.content, reason=why)
        return _Review(current.domain_id, head.pk, data, vector, why)

    def write(planned: _Review) -> Fact | None:
        locked = Conflict.objects.select_for_update(of=("self",)).select_related("winner", "loser").get(pk=conflict.pk)
        _check_reviewable(locked)
        restored = None
        if planned.data is not None and planned.vector is not None:
            head = _live_head(locked.winner)
            if head.pk != planned.head_id:
                raise Replan()  # the winner was replaced since the plan: restore over the new head
            restored = supersede_fact_locked(
                fact=head, by=by, data=planned.data, reason=planned.reason, vector=planned.vector
            )
        locked.reviewed_at, locked.reviewed_by = timezone.now(), by.user
        locked.save(update_fields=["reviewed_at", "reviewed_by"])
        observe_review_latency("conflict", locked.detected_at, locked.reviewed_at)
        record_event(
            actor=by,
            verb="conflict.reviewed",
            workspace_id=locked.workspace_id,
            target=locked,
            detail={"restored": restored.pk if restored else None, "reason": reason},
        )
        return restored

    changed = StateConflict(
        "The conflict's facts kept changing while it was reviewed; try again.", code="conflict_changed"
    )
    return write_planned(plan, write, domains=lambda planned: [planned.domain_id], changed=changed)


def _check_reviewable(conflict: Conflict) -> None:
    if conflict.reviewed_at is not None:
        raise StateConflict("This conflict was already reviewed.", code="conflict_reviewed")
    if conflict.winner is None or conflict.loser is None:
        raise StateConflict("This conflict has no winner to review; decide it instead.", code="conflict_open")


def _live_head(fact: Fact | None) -> Fact:
    """The live end of `fact`'s supersession chain (the winner may have been replaced since)."""
    assert fact is not None  # _check_reviewable
    head = fact
    while head.superseded_by_id is not None:
        head = Fact.objects.get(pk=head.superseded_by_id)
    return head
