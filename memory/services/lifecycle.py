"""The fact lifecycle (SPEC §7): status changes, archiving, and the promoted-fact transitions.

A fact's content is never edited in place (SPEC §3); only its status moves, and every move is
audited in the same transaction. `set_fact_status` and `archive_fact` are the admin's free
moves; the lifecycle services below enforce the state machine and refuse anything else with
StateConflict (409):

    active → challenged (a failed replay, a conflict, or stale) → active (revalidated)
    active | challenged → deprecated → archived
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Greatest
from django.utils import timezone

from memory.actors import Actor
from memory.audit import record_event, record_events
from memory.errors import FactNotLive, InvalidInput, StateConflict
from memory.metrics import observe_review_latency
from memory.models import DecayProfile, Fact, FactStatus, ValidatedBy


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


class ChallengeReason:
    FAILED_REPLAY = "failed_replay"
    CONFLICT = "conflict"
    STALE = "stale"
    REVIEW = "review"
    # The fact that replaced it was erased: it is not silently believed again; a person decides.
    ERASURE = "erasure"

    ALL = (FAILED_REPLAY, CONFLICT, STALE, REVIEW, ERASURE)


def _move(fact: Fact, *, to: str, allowed_from: Iterable[str], by: Actor, verb: str, detail: dict) -> Fact:
    """Lock `fact`, check the transition, move it and audit it (the caller holds the transaction)."""
    fact = Fact.objects.select_for_update().get(pk=fact.pk)
    if fact.status not in allowed_from:
        raise StateConflict(
            f"Fact {fact.pk} is {fact.status}; it cannot become {to}.",
            code="invalid_fact_transition",
            fields={"status": [f"{fact.status} → {to} is not a lifecycle transition."]},
        )
    previous, challenged_at = fact.status, fact.status_changed_at
    fact.status = to
    fact.status_changed_at = timezone.now()
    fact.save(update_fields=["status", "status_changed_at"])
    if previous == FactStatus.CHALLENGED and by.user is not None:
        observe_review_latency("challenged", challenged_at, fact.status_changed_at)
    record_event(
        actor=by, verb=verb, workspace_id=fact.workspace_id, target=fact, detail={"from": previous, "to": to, **detail}
    )
    return fact


@transaction.atomic
def challenge_fact(*, fact: Fact, by: Actor, reason: str, detail: str = "") -> Fact:
    """active → challenged (it leaves recall; reviewers see it). `reason` is failed_replay,
    conflict, stale, review or erasure. Raises StateConflict unless the fact is active."""
    if reason not in ChallengeReason.ALL:
        raise InvalidInput(
            f"A challenge reason is one of {', '.join(ChallengeReason.ALL)}.",
            fields={"reason": ["Unknown reason."]},
        )
    return _move(
        fact,
        to=FactStatus.CHALLENGED,
        allowed_from=[FactStatus.ACTIVE],
        by=by,
        verb="fact.challenged",
        detail={"reason": reason, "detail": detail[:500]},
    )


@transaction.atomic
def revalidate_fact(*, fact: Fact, by: Actor, validated_by: str, note: str = "") -> Fact:
    """Validate `fact` again now: challenged → active, or an active fact's validation refreshed
    (so it is not stale). Raises FactNotLive for a superseded fact, StateConflict for a
    deprecated or archived one."""
    if validated_by not in (ValidatedBy.REPLAY, ValidatedBy.HUMAN):
        raise InvalidInput("validated_by is replay or human.", fields={"validated_by": ["replay or human."]})
    fact = Fact.objects.select_for_update().get(pk=fact.pk)
    if fact.superseded_by_id is not None:
        raise FactNotLive(fact.pk)
    if fact.status not in (FactStatus.ACTIVE, FactStatus.CHALLENGED):
        raise StateConflict(
            f"Fact {fact.pk} is {fact.status}; only active or challenged facts are revalidated.",
            code="invalid_fact_transition",
            fields={"status": [f"{fact.status} → active is not a lifecycle transition."]},
        )
    now = timezone.now()
    previous = fact.status
    fact.status, fact.last_validated_at, fact.validated_by = FactStatus.ACTIVE, now, validated_by
    fields = ["status", "last_validated_at", "validated_by"]
    if previous != FactStatus.ACTIVE:
        if by.user is not None:  # a person decided the challenged fact
            observe_review_latency("challenged", fact.status_changed_at, now)
        fact.status_changed_at = now
        fields.append("status_changed_at")
    fact.save(update_fields=fields)
    record_event(
        actor=by,
        verb="fact.revalidated",
        workspace_id=fact.workspace_id,
        target=fact,
        detail={"from": previous, "to": FactStatus.ACTIVE, "validated_by": validated_by, "note": note[:500]},
    )
    return fact


@transaction.atomic
def deprecate_fact(*, fact: Fact, by: Actor, reason: str = "") -> Fact:
    """active | challenged → deprecated: kept for the record, never recalled. StateConflict otherwise."""
    return _move(
        fact,
        to=FactStatus.DEPRECATED,
        allowed_from=[FactStatus.ACTIVE, FactStatus.CHALLENGED],
        by=by,
        verb="fact.deprecated",
        detail={"reason": reason[:500]},
    )


@transaction.atomic
def archive_deprecated_fact(*, fact: Fact, by: Actor) -> Fact:
    """deprecated → archived, the lifecycle's last step. StateConflict for any other status
    (the admin's `archive_fact` is the override that archives from anywhere)."""
    return _move(
        fact, to=FactStatus.ARCHIVED, allowed_from=[FactStatus.DEPRECATED], by=by, verb="fact.archived", detail={}
    )


def lifecycle_managed() -> Q:
    """The facts stale detection watches (SPEC §7, design note 002): those that went through the
    promotion gate — promoted from a candidate (`origin_candidate` set, or origin `promotion`) —
    or that carry a verification probe. Their worth rests on a validation that can age; a plain
    agent or human fact has no probe to replay, and its Weibull decay already fades it in search."""
    return Q(origin_candidate__isnull=False) | Q(origin="promotion") | ~Q(verification="")


@transaction.atomic
def detect_stale(*, now: datetime | None = None, by: Actor | None = None) -> dict[str, int]:
    """Challenge (reason `stale`) every active lifecycle-managed fact (`lifecycle_managed`) not
    validated within its memory type's window; returns how many per memory type (types with none
    are left out). The window is measured from the latest sign of life: last_validated_at (a
    person's revalidation or a passing replay), last_mentioned_at (a re-mention: someone stated it
    again) or created_at. Rows are locked in pk order; one audit INSERT for all challenged facts,
    whose detail says which date the window ran from."""
    by = by or Actor.system("detect_stale")
    now = now or timezone.now()
    counts: dict[str, int] = {}
    for profile in DecayProfile.objects.order_by("memory_type"):
        cutoff = now - timedelta(days=profile.stale_after_days)
        locked = list(
            Fact.objects.select_for_update()
            .filter(lifecycle_managed())
            .filter(memory_type=profile.memory_type, status=FactStatus.ACTIVE, superseded_by__isnull=True)
            # PostgreSQL's GREATEST skips NULLs: a never-validated fact counts from its last mention.
            .alias(alive=Greatest("last_validated_at", "last_mentioned_at", "created_at"))
            .filter(alive__lt=cutoff)
            .order_by("pk")
            .values_list("pk", "workspace_id", "last_validated_at", "last_mentioned_at")
        )
        if not locked:
            continue
        Fact.objects.filter(pk__in=[pk for pk, *_ in locked]).update(
            status=FactStatus.CHALLENGED, status_changed_at=now
        )
        # A first run over a large old workspace may challenge thousands: one INSERT.
        record_events(
            actor=by,
            verb="fact.challenged",
            target_type="fact",
            at=now,
            events=(
                (
                    workspace_id,
                    pk,
                    {
                        "from": FactStatus.ACTIVE,
                        "to": FactStatus.CHALLENGED,
                        "reason": ChallengeReason.STALE,
                        "detail": _stale_detail(profile.stale_after_days, validated, mentioned),
                    },
                )
                for pk, workspace_id, validated, mentioned in locked
            ),
        )
        counts[profile.memory_type] = len(locked)
    return counts


def _stale_detail(days: int, validated: datetime | None, mentioned: datetime | None) -> str:
    """Why, in a reviewer's words: "not validated or mentioned for 180 days (last validated
    2026-01-02, last mentioned 2026-02-03)"."""
    last = f"last validated {validated:%Y-%m-%d}" if validated else "never validated"
    if mentioned:
        last += f", last mentioned {mentioned:%Y-%m-%d}"
    return f"not validated or mentioned for {days} days ({last})"
