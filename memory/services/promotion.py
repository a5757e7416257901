"""The promotion gate (SPEC §7): raw trace → candidate → replay and/or human approval →
promotion decision → fact.

A failure log is not knowledge. A candidate reaches long-term memory only through `promote`
with an explicit write flag, once every gate has passed, and then through the normal write
path (`propose_fact`: re-mention and conflict rules apply) carrying its lifecycle metadata.
Every real decision is a PromotionDecision row with the gate scorecard it was made on; a dry
run writes nothing at all, not even its decision.

The document is parsed in promotion_document and the gates are computed, pure, in promotion_gates;
the writes and the decisions are here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from memory import access
from memory.actors import Actor, require_actor
from memory.audit import record_event
from memory.classifier import Relation
from memory.embeddings import Meaning, embed_meaning
from memory.errors import InsufficientPermission, InvalidInput, StateConflict
from memory.metrics import observe_review_latency
from memory.models import (
    CANDIDATE_SCHEMA,
    AuditEvent,
    Candidate,
    Fact,
    FactStatus,
    MemoryDomain,
    PromotionDecision,
    PromotionStatus,
    Replay,
    ValidatedBy,
    Veracity,
)
from memory.services.conflicts import relate
from memory.services.facts import (
    TOPIC_MAX,
    FactInput,
    Outcome,
    embed_live_without_vectors,
    propose_fact_locked,
    read_before_locking,
    validate_fact_input,
)
from memory.services.lifecycle import ChallengeReason, challenge_fact, revalidate_fact
from memory.services.locking import Replan, write_planned
from memory.services.nearby import nearest_live
from memory.services.promotion_document import (
    CANDIDATE_ID_MAX,
    DETAILS_MAX,
    FAILURE_TYPE_MAX,
    ITEM_MAX,
    LIST_MAX,
    ORIGIN_MAX,
    PROBE_MAX,
    REASON_MAX,
    SUMMARY_MAX,
    CandidateDocument,
    parse_candidate_document,
    string_list,
)
from memory.services.promotion_gates import (
    FAILED,
    GATES,
    PASSED,
    PENDING,
    Scorecard,
    compute_gates,
    failing,
    replay_evidence,
    replay_standing,
    status_for,
)
from memory.services.tenancy import require_visible_domain

# The promotion's public names; the document and the gates live in promotion_document and
# promotion_gates, and callers import their names from here too.
__all__ = [
    "CANDIDATE_ID_MAX",
    "DETAILS_MAX",
    "FAILED",
    "FAILURE_TYPE_MAX",
    "GATES",
    "ITEM_MAX",
    "LIST_MAX",
    "ORIGIN_MAX",
    "PASSED",
    "PENDING",
    "PROBE_MAX",
    "REASON_MAX",
    "SUMMARY_MAX",
    "CandidateDecided",
    "CandidateDocument",
    "Scorecard",
    "approve_candidate",
    "completable",
    "complete_candidate",
    "compute_gates",
    "decide_candidate",
    "deny",
    "dry_run",
    "failing",
    "gates_if_approved",
    "parse_candidate_document",
    "promote",
    "record_replay",
    "replay_evidence",
    "replay_standing",
    "restated_fact",
    "revise_candidate",
    "status_for",
    "submit_candidate",
]


class CandidateDecided(StateConflict):
    code = "candidate_decided"

    def __init__(self, candidate: Candidate) -> None:
        super().__init__(
            f"Candidate {candidate.candidate_id!r} was already decided ({candidate.promotion_status}); "
            "a decision is final."
        )


# --- Writes ------------------------------------------------------------------------------------
def _lock(candidate: Candidate) -> Candidate:
    return (
        Candidate.objects.select_for_update(of=("self",))
        .select_related("domain__repo", "human_approved_by")
        .get(pk=candidate.pk)
    )


def _refresh_status(candidate: Candidate, now: Any) -> Scorecard:
    gates = compute_gates(candidate)
    candidate.promotion_status = status_for(candidate, gates)
    candidate.updated_at = now
    candidate.save(update_fields=["promotion_status", "updated_at"])
    return gates


def _decider(by: Actor) -> dict[str, Any]:
    return {"decided_by_agent": by.agent, "decided_by_user": by.user, "decided_by_label": by.label}


@transaction.atomic
def submit_candidate(
    *, domain: MemoryDomain, topic: str, document: CandidateDocument, by: Actor
) -> tuple[Candidate, bool]:
    """Store a candidate and compute its gates; returns (candidate, created). The same
    candidate_id in the workspace returns the existing candidate unchanged (idempotent).
    Raises InvalidInput for a bad topic or a memory the fact write path would refuse, and
    `unknown_domain` for a domain the submitting agent may not see."""
    if by.agent is not None:
        require_visible_domain(by.agent, domain)
    topic = topic.strip()
    if not topic or len(topic) > TOPIC_MAX:
        raise InvalidInput("A topic has 1 to 200 characters.", fields={"topic": [f"1–{TOPIC_MAX} characters."]})
    try:
        validate_fact_input(FactInput(topic=topic, content=document.proposed_memory, memory_type=document.memory_type))
    except InvalidInput as exc:
        renamed = {"proposed_memory" if k == "content" else k: v for k, v in exc.fields.items()}
        raise InvalidInput(exc.detail, fields=renamed) from None
    with connection.cursor() as cursor:  # serialise two submissions of one candidate_id
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            [f"candidate:{domain.workspace_id}:{document.candidate_id}"],
        )
    existing = Candidate.objects.filter(workspace_id=domain.workspace_id, candidate_id=document.candidate_id).first()
    if existing is not None:
        return existing, False
    now = timezone.now()
    candidate = Candidate.objects.create(
        workspace_id=domain.workspace_id,
        domain=domain,
        topic=topic,
        submitted_by_agent=by.agent,
        submitted_by_label=by.label,
        candidate_id=document.candidate_id,
        schema_version=document.schema_version,
        failure_class=document.failure_class,
        failure_type=document.failure_type,
        source_action_ids=document.source_action_ids,
        root_cause_summary=document.root_cause_summary,
        proposed_memory=document.proposed_memory,
        applies_to=document.applies_to,
        does_not_apply_to=document.does_not_apply_to,
        evidence_refs=document.evidence_refs,
        verification_probe_candidate=document.verification_probe_candidate,
        requires_human_review=document.requires_human_review,
        origin=document.origin,
        memory_type=document.memory_type,
        created_at=now,
        updated_at=now,
    )
    gates = _refresh_status(candidate, now)
    record_event(
        actor=by,
        verb="candidate.submitted",
        workspace_id=domain.workspace_id,
        target=candidate,
        detail={
            "candidate_id": candidate.candidate_id,
            "failure_class": candidate.failure_class,
            "promotion_status": candidate.promotion_status,
            "failing": failing(gates),
        },
    )
    return candidate, True


@transaction.atomic
def record_replay(*, candidate: Candidate, by: Actor, probe: str, passed: bool, details: str = "") -> Replay:
    """Record one replay of the candidate's probe and recompute its gates. Anyone who can see the
    candidate may record one; only a counting replay (`replay_standing`) is evidence. On a promoted
    candidate a failed counting replay, or the submitter's own failed one, challenges its active
    fact; a passing counting one revalidates it. Any other replay is kept and changes nothing."""
    probe = probe.strip()
    if not probe or len(probe) > PROBE_MAX:
        raise InvalidInput("A probe names what was replayed.", fields={"probe": [f"1–{PROBE_MAX} characters."]})
    if len(details) > DETAILS_MAX:
        raise InvalidInput("The details are too long.", fields={"details": [f"At most {DETAILS_MAX} characters."]})
    candidate = _lock(candidate)
    now = timezone.now()
    replay = Replay.objects.create(
        candidate=candidate,
        probe=probe,
        passed=passed,
        details=details,
        recorded_by_agent=by.agent,
        recorded_by_user=by.user,
        recorded_by_label=by.label,
        created_at=now,
    )
    standing = replay_standing(candidate, replay)
    # A hostile agent must not take any promoted fact out of recall with one failed replay, nor
    # bring a challenged one back with a pass. The submitter withdrawing its own rule is harmless.
    by_submitter = by.agent is not None and by.agent.pk == candidate.submitted_by_agent_id
    fact_effect = ""
    if candidate.fact_id is not None:
        fact = Fact.objects.select_for_update().get(pk=candidate.fact_id)
        if not standing.counts and (passed or not by_submitter):
            fact_effect = "ignored"  # the replay does not count: kept, and changes nothing
        elif fact.superseded_by_id is None and not passed and fact.status == FactStatus.ACTIVE:
            challenge_fact(
                fact=fact, by=by, reason=ChallengeReason.FAILED_REPLAY, detail=f"replay #{replay.pk} of {probe!r}"
            )
            fact_effect = "challenged"
        elif fact.superseded_by_id is None and passed and fact.status in (FactStatus.ACTIVE, FactStatus.CHALLENGED):
            revalidate_fact(fact=fact, by=by, validated_by=ValidatedBy.REPLAY, note=f"replay #{replay.pk} passed")
            fact_effect = "revalidated"
    _refresh_status(candidate, now)
    record_event(
        actor=by,
        verb="candidate.replayed",
        workspace_id=candidate.workspace_id,
        target=candidate,
        detail={
            "replay": replay.pk,
            "probe": probe,
            "passed": passed,
            "counts": standing.counts,
            "standing": standing.reason,
            "fact": candidate.fact_id,
            "effect": fact_effect,
        },
    )
    return replay


def _may_review(user: Any, candidate: Candidate) -> bool:
    """The one rule for people (memory.access): a person who may decide the candidate's domain."""
    return access.may_decide_domain(user, candidate.domain_id)


@transaction.atomic
def approve_candidate(*, candidate: Candidate, by: Actor, note: str = "") -> Candidate:
    """A person's approval: evidence for the gate (it does not promote by itself). Raises
    InsufficientPermission unless `by` is a person of the candidate's workspace, CandidateDecided
    once decided."""
    if not require_actor(by).is_user:
        raise InsufficientPermission(
            "Only a person can approve a candidate.", code="human_approval_required", fields={}
        )
    if not _may_review(by.user, candidate):
        raise InsufficientPermission("You may not decide this candidate's domain.", code="not_a_member")
    candidate = _lock(candidate)
    if candidate.is_decided:
        raise CandidateDecided(candidate)
    now = timezone.now()
    if candidate.human_approved_at is None:  # approving again is no new decision
        observe_review_latency("candidate", candidate.created_at, now)
    candidate.human_approved_by, candidate.human_approved_at = by.user, now
    candidate.human_approval_note = note.strip()[:500]
    candidate.save(update_fields=["human_approved_by", "human_approved_at", "human_approval_note"])
    gates = _refresh_status(candidate, now)
    record_event(
        actor=by,
        verb="candidate.approved",
        workspace_id=candidate.workspace_id,
        target=candidate,
        detail={"note": candidate.human_approval_note, "failing": failing(gates)},
    )
    return candidate


@transaction.atomic
def revise_candidate(*, candidate: Candidate, by: Actor, proposed_memory: str) -> Candidate:
    """A reviewer's edit of the proposed rule before approving it (edit-and-approve). The agent's
    text is kept in the audit event. Raises InvalidInput for an empty or oversized text."""
    text = _rule_text(proposed_memory)
    candidate = _lock(candidate)
    if candidate.is_decided:
        raise CandidateDecided(candidate)
    before = candidate.proposed_memory
    if text != before:
        candidate.proposed_memory = text
        candidate.updated_at = timezone.now()
        candidate.save(update_fields=["proposed_memory", "updated_at"])
        record_event(
            actor=by,
            verb="candidate.revised",
            workspace_id=candidate.workspace_id,
            target=candidate,
            detail={"before": before, "after": text},
        )
    return candidate


def _rule_text(proposed_memory: str) -> str:
    text = proposed_memory.strip()
    if not text or len(text) > 4000:
        raise InvalidInput(
            "The rule must have 1 to 4000 characters.", fields={"proposed_memory": ["1–4000 characters."]}
        )
    return text


# --- Inference before the transaction ----------------------------------------------------------
# A `_locked` step receives the vector of the text it will store, computed before its transaction
# opened (memory.services.locking: plan, lock, re-check, write). When it finds the text changed
# since, or the gates passing only now (a concurrent replay), it raises Replan(text) before writing
# anything: the transaction rolls back, the text it met is embedded outside, and the step runs again.


@dataclass(frozen=True)
class PlannedVector:
    text: str
    vector: Meaning


def _plan_vector(candidate: Candidate, text: str) -> PlannedVector:
    """Outside any transaction: embed `text` as the candidate's fact, and give the live facts of
    its topic a vector, so the locked step compares without inference."""
    vector = embed_meaning(candidate.topic, text)
    embed_live_without_vectors(candidate.domain_id, candidate.topic)
    read_before_locking([((candidate.domain_id, candidate.topic), text, vector)])
    return PlannedVector(text, vector)


def _vector_for(planned: PlannedVector | None, text: str) -> Meaning:
    """Under the lock: the planned vector of `text`, else Replan (nothing written yet)."""
    if planned is None or planned.text != text:
        raise Replan(text)
    return planned.vector


def _with_planned_vector(
    step: Callable[[PlannedVector | None], PromotionDecision], candidate: Candidate, planned: PlannedVector | None
) -> PromotionDecision:
    """`step` under the candidate's domain lock (write_planned), first with the caller's plan, then
    with the text a stale step met."""

    def plan(text: str | None) -> PlannedVector | None:
        return planned if text is None else _plan_vector(candidate, text)

    changed = StateConflict(
        "The candidate kept changing while it was being decided; try again.", code="candidate_changed"
    )
    return write_planned(plan, step, domains=lambda _: [candidate.domain_id], changed=changed)


def promote(*, candidate: Candidate, by: Actor, write: bool, auto: bool = False) -> PromotionDecision:
    """Decide a candidate. Without `write` it is a dry run: the decision it would make is
    returned unsaved and nothing at all is written. With `write`, a `refused` decision is
    recorded when a gate has not passed (the candidate stays open), else the fact is written
    through propose_fact with its lifecycle metadata and a `promote` decision is recorded.
    Raises CandidateDecided (409) once the candidate was promoted or denied."""
    if not write:
        return dry_run(candidate=candidate, by=by, auto=auto)
    fresh = Candidate.objects.select_related("human_approved_by").get(pk=candidate.pk)
    planned = None
    if not fresh.is_decided and not failing(compute_gates(fresh, write=True, auto=auto)):
        planned = _plan_vector(fresh, fresh.proposed_memory)
    return _with_planned_vector(lambda p: _decide_locked(candidate=fresh, by=by, auto=auto, planned=p), fresh, planned)


CANDIDATE_ACTIONS = ("approve", "edit_approve", "deny")


RESTATEMENT_CHOICES = ("keep", "replace")


def decide_candidate(
    *,
    candidate: Candidate,
    by: Actor,
    action: str,
    reason: str = "",
    edited_text: str | None = None,
    on_restatement: str = "keep",
) -> PromotionDecision:
    """A person's decision of a candidate in the review queue, as one use case: `approve` (the
    approval, then the promotion when every gate passes), `edit_approve` (`edited_text` replaces
    the rule first) or `deny` (final, and only with a reason: the agent learns from it). Revision,
    approval and promotion commit together or not at all; the vector is computed before.
    When the rule restates a live fact (the write classifier's SAME), `on_restatement` says what
    the person chose: `keep` the live wording (a re-mention) or `replace` it with the rule's
    (memory.services.conflicts.apply_replacement: the old fact superseded, rule `human`).

    Returns the PromotionDecision (`promote`, `refused` or `deny`). Raises InvalidInput
    (`reason_required`, `unknown_action`, a bad text or choice), InsufficientPermission,
    CandidateDecided."""
    reason = reason.strip()
    if on_restatement not in RESTATEMENT_CHOICES:
        raise InvalidInput(
            f"On a restatement, one of {', '.join(RESTATEMENT_CHOICES)}.",
            fields={"on_restatement": [", ".join(RESTATEMENT_CHOICES)]},
        )
    if action == "deny":
        if not reason:
            raise InvalidInput(
                "Say why you deny it: the agent learns from the reason.",
                code="reason_required",
                fields={"reason": ["A reason is required to deny."]},
            )
        return deny(candidate=candidate, by=by, reason=reason)
    if action not in CANDIDATE_ACTIONS:
        raise InvalidInput(
            f"Unknown action {action!r}.", code="unknown_action", fields={"action": [", ".join(CANDIDATE_ACTIONS)]}
        )
    text = _rule_text(edited_text or "") if action == "edit_approve" else None
    fresh = Candidate.objects.select_related("human_approved_by").get(pk=candidate.pk)
    planned = None
    # Inference before the transaction, when the gates will pass once this approval (and edit) is in.
    if not fresh.is_decided and by.user is not None and not failing(gates_if_approved(fresh, by.user, text)):
        planned = _plan_vector(fresh, text if text is not None else fresh.proposed_memory)
    return _with_planned_vector(
        lambda p: _decide_candidate_locked(
            candidate=fresh, by=by, note=reason, text=text, planned=p, on_restatement=on_restatement
        ),
        fresh,
        planned,
    )


def gates_if_approved(candidate: Candidate, user: Any, text: str | None = None) -> Scorecard:
    """The gates as they would read once `user` approved `candidate` (with `text` as its rule, if
    given) and asked for the promotion: what would still block it. Pure: nothing is written."""
    approved = copy.copy(candidate)
    approved.human_approved_by, approved.human_approved_at = user, timezone.now()
    approved.proposed_memory = text if text is not None else candidate.proposed_memory
    return compute_gates(approved, write=True, auto=False)


def restated_fact(candidate: Candidate, text: str | None = None) -> tuple[Fact, float] | None:
    """The live fact the rule (or `text`) would only restate if promoted now — the write
    classifier's SAME, earlier decisions applied, as the promotion would read it — with the
    similarity; None when it would not re-mention anything. A read (one embedding, no write)."""
    content = text if text is not None else candidate.proposed_memory
    vector = embed_meaning(candidate.topic, content).content
    live = nearest_live(candidate.domain_id, vector)
    if not live:
        return None
    match = relate(content, vector, live)
    if match is None or match.kind != Relation.SAME:
        return None
    return match.fact, match.similarity


def _edited_by_person(candidate: Candidate) -> bool:
    """A person rewrote the rule before it was promoted (edit-and-approve): the fact is `human_edited`."""
    return AuditEvent.objects.filter(
        verb="candidate.revised", target_type="candidate", target_id=candidate.pk, actor_user__isnull=False
    ).exists()


def _decide_candidate_locked(
    *,
    candidate: Candidate,
    by: Actor,
    note: str,
    text: str | None,
    planned: PlannedVector | None,
    on_restatement: str = "keep",
) -> PromotionDecision:
    if text is not None:
        revise_candidate(candidate=candidate, by=by, proposed_memory=text)
    approve_candidate(candidate=candidate, by=by, note=note)
    return _decide_locked(candidate=candidate, by=by, auto=False, planned=planned, on_restatement=on_restatement)


def dry_run(*, candidate: Candidate, by: Actor, auto: bool = False) -> PromotionDecision:
    """The decision `promote(write=True)` would record, unsaved (pk None): nothing is written."""
    candidate = Candidate.objects.select_related("domain__repo", "human_approved_by").get(pk=candidate.pk)
    if candidate.is_decided:
        raise CandidateDecided(candidate)
    gates = compute_gates(candidate, write=False, auto=auto)
    blocking = [name for name in failing(gates) if name != "write_flag"]
    if blocking:
        verdict = "would not promote: " + "; ".join(f"{name}: {gates[name]['reason']}" for name in blocking)
    else:
        verdict = "would promote with write=true"
    return PromotionDecision(
        candidate=candidate,
        decision=PromotionDecision.Kind.DRY_RUN,
        auto=auto,
        write=False,
        scorecard=gates,
        reason=f"Dry run, nothing written: {verdict}.",
        created_at=timezone.now(),
        **_decider(by),
    )


def _decide_locked(
    *, candidate: Candidate, by: Actor, auto: bool, planned: PlannedVector | None, on_restatement: str = "keep"
) -> PromotionDecision:
    candidate = _lock(candidate)  # lock, then re-check: the gates may have moved since the read
    if candidate.is_decided:
        raise CandidateDecided(candidate)
    now = timezone.now()
    gates = compute_gates(candidate, write=True, auto=auto)
    blocking = failing(gates)
    if blocking:
        _refresh_status(candidate, now)
        decision = PromotionDecision.objects.create(
            candidate=candidate,
            decision=PromotionDecision.Kind.REFUSED,
            auto=auto,
            write=True,
            scorecard=gates,
            reason="Not promoted: " + "; ".join(f"{name}: {gates[name]['reason']}" for name in blocking) + ".",
            created_at=now,
            **_decider(by),
        )
        record_event(
            actor=by,
            verb="candidate.promotion_refused",
            workspace_id=candidate.workspace_id,
            target=candidate,
            detail={"decision": decision.pk, "failing": blocking, "auto": auto},
        )
        return decision

    latest = replay_evidence(candidate).latest
    validated_by = ValidatedBy.REPLAY if latest is not None and latest.passed else ValidatedBy.HUMAN
    probe = candidate.verification_probe_candidate or (latest.probe if latest is not None else "")
    vector = _vector_for(planned, candidate.proposed_memory)  # before anything is written
    result = propose_fact_locked(
        domain=candidate.domain,
        data=FactInput(
            topic=candidate.topic,
            content=candidate.proposed_memory,
            memory_type=candidate.memory_type,
            # A person who approved it vouches for it; otherwise it is the agent's verified inference.
            veracity=Veracity.HUMAN_STATED if candidate.human_approved_at else Veracity.AGENT_INFERRED,
            # The approval is a person's act (approve_candidate refuses agents), so it vouches even
            # when an agent asks for the promotion.
            vouched_by_person=candidate.human_approved_at is not None,
            extra={
                "origin": "promotion",
                "origin_candidate": candidate,
                "validated_by": validated_by,
                "valid_for": list(candidate.applies_to),
                "not_valid_for": list(candidate.does_not_apply_to),
                "verification": probe,
                "last_validated_at": now,
                "verification_contract_version": CANDIDATE_SCHEMA,
                "status": FactStatus.ACTIVE,
                "source": "promotion",
                "rationale": candidate.root_cause_summary,
                "human_edited": _edited_by_person(candidate),
            },
            on_restatement=on_restatement,
        ),
        by=by,
        vector=vector,
    )
    fact = result.fact
    if result.outcome == Outcome.RE_MENTIONED:
        fact = _adopt_existing(fact, candidate=candidate, by=by, validated_by=validated_by, probe=probe)
    candidate.fact = fact
    candidate.promotion_status = PromotionStatus.ACTIVE
    candidate.updated_at = now
    candidate.save(update_fields=["fact", "promotion_status", "updated_at"])
    explained = {
        Outcome.CREATED: f"promoted as fact {fact.pk}",
        Outcome.CONFLICT_WON: f"promoted as fact {fact.pk}; it superseded fact {result.compared_with} in a conflict",
        Outcome.CONFLICT_LOST: f"stored as fact {fact.pk}, which lost a conflict to fact {result.compared_with} "
        "and was challenged for review",
        Outcome.RE_MENTIONED: f"fact {fact.pk} already said this: re-mentioned and revalidated",
        Outcome.POSSIBLE_CONFLICT: f"promoted as fact {fact.pk}; it may contradict fact {result.compared_with}, "
        f"so both stay live until a person decides (possible conflict {result.conflict_id})",
    }[result.outcome]
    decision = PromotionDecision.objects.create(
        candidate=candidate,
        decision=PromotionDecision.Kind.PROMOTE,
        auto=auto,
        write=True,
        scorecard=gates,
        fact=fact,
        outcome=result.outcome,
        reason=f"Every gate passed ({validated_by}); {explained}.",
        created_at=now,
        **_decider(by),
    )
    record_event(
        actor=by,
        verb="candidate.promoted",
        workspace_id=candidate.workspace_id,
        target=candidate,
        detail={"decision": decision.pk, "fact": fact.pk, "outcome": result.outcome, "auto": auto},
    )
    return decision


def _adopt_existing(fact: Fact, *, candidate: Candidate, by: Actor, validated_by: str, probe: str) -> Fact:
    """A promotion that re-mentions a live fact validates it, and gives it the candidate's scope
    where it had none (propose_fact applies lifecycle fields only to new rows)."""
    fact = revalidate_fact(fact=fact, by=by, validated_by=validated_by, note=f"promotion of {candidate.candidate_id}")
    fields = ["verification_contract_version"]
    fact.verification_contract_version = CANDIDATE_SCHEMA
    for name, value in (
        ("valid_for", list(candidate.applies_to)),
        ("not_valid_for", list(candidate.does_not_apply_to)),
        ("verification", probe),
    ):
        if not getattr(fact, name) and value:
            setattr(fact, name, value)
            fields.append(name)
    if fact.origin_candidate_id is None:
        fact.origin_candidate = candidate
        fields.append("origin_candidate")
    fact.save(update_fields=fields)
    return fact


@transaction.atomic
def deny(*, candidate: Candidate, by: Actor, reason: str = "") -> PromotionDecision:
    """A final no: the candidate becomes `denied`, recorded with the gates at that moment.
    Raises CandidateDecided once decided, InvalidInput for an over-long reason."""
    if len(reason) > REASON_MAX:
        raise InvalidInput("The reason is too long.", fields={"reason": [f"At most {REASON_MAX} characters."]})
    candidate = _lock(candidate)
    if candidate.is_decided:
        raise CandidateDecided(candidate)
    now = timezone.now()
    gates = compute_gates(candidate)
    if by.user is not None and candidate.human_approved_at is None:  # a person's no, not a later change of mind
        observe_review_latency("candidate", candidate.created_at, now)
    candidate.promotion_status = PromotionStatus.DENIED
    candidate.updated_at = now
    candidate.save(update_fields=["promotion_status", "updated_at"])
    decision = PromotionDecision.objects.create(
        candidate=candidate,
        decision=PromotionDecision.Kind.DENY,
        write=False,
        scorecard=gates,
        reason=reason.strip() or "Denied.",
        created_at=now,
        **_decider(by),
    )
    record_event(
        actor=by,
        verb="candidate.denied",
        workspace_id=candidate.workspace_id,
        target=candidate,
        detail={"decision": decision.pk, "reason": decision.reason},
    )
    return decision


# --- Completion in the review queue (issue 18) --------------------------------------------------
# A held candidate lacks what a person can supply: its scope, its anti-scope, the evidence refs
# that trace it back to a run. A reviewer adds them in the queue, then decides. Nothing else moves:
# replays, the human-review flag, the approval, the failure class and the origin stay as they were,
# so a gate that needs a replay by someone other than the submitter (or a person's approval) still
# needs it after a completion.
COMPLETION_GATES = {"applies_to": "scope", "does_not_apply_to": "scope", "evidence_refs": "traceability"}
COMPLETION_NOTE_MAX = 500


def completable(gates: Scorecard) -> bool:
    """Whether a person can complete a candidate with these gates (scope or traceability held)."""
    return any(gates[gate]["status"] == FAILED for gate in set(COMPLETION_GATES.values()))


@transaction.atomic
def complete_candidate(
    *,
    candidate: Candidate,
    by: Actor,
    applies_to: list[str] | None = None,
    does_not_apply_to: list[str] | None = None,
    evidence_refs: list[str] | None = None,
    note: str = "",
) -> Candidate:
    """A person adds what holds a candidate back (scope, anti-scope, evidence refs) and the gates
    are computed again; additions only, each to a gate that still fails. Raises
    InsufficientPermission (an agent, or not a decider of the domain), InvalidInput (nothing to
    add, a bad item, a gate that already passes), CandidateDecided."""
    if not require_actor(by).is_user:
        raise InsufficientPermission(
            "Only a person can complete a candidate in the queue.", code="human_approval_required", fields={}
        )
    if not _may_review(by.user, candidate):
        raise InsufficientPermission("You may not decide this candidate's domain.", code="not_a_member")
    errors: dict[str, Any] = {}
    additions: dict[str, list[str]] = {}
    for name, value in (
        ("applies_to", applies_to),
        ("does_not_apply_to", does_not_apply_to),
        ("evidence_refs", evidence_refs),
    ):
        cleaned, problem = string_list(list(value) if value is not None else None)
        if problem:
            errors[name] = [problem]
        elif cleaned:
            additions[name] = cleaned
    note = note.strip()
    if len(note) > COMPLETION_NOTE_MAX:
        errors["note"] = [f"At most {COMPLETION_NOTE_MAX} characters."]
    if errors:
        raise InvalidInput("Some additions are invalid; see `fields`.", fields=errors)
    if not additions:
        raise InvalidInput(
            "Add a scope, an anti-scope or an evidence ref: nothing was added.",
            code="nothing_to_add",
            fields={"non_field_errors": ["Nothing to add."]},
        )
    candidate = _lock(candidate)  # lock, then re-check: someone may have completed or decided it
    if candidate.is_decided:
        raise CandidateDecided(candidate)
    gates = compute_gates(candidate)
    for name in additions:
        gate = COMPLETION_GATES[name]
        if gates[gate]["status"] != FAILED:
            errors[name] = [f"The {gate} gate already passes; nothing holds it back."]
    merged = {name: list(getattr(candidate, name) or []) for name in additions}
    for name, items in additions.items():
        merged[name] += [item for item in items if item not in merged[name]]
        if len(merged[name]) > LIST_MAX:
            errors.setdefault(name, []).append(f"At most {LIST_MAX} items in all.")
    if errors:
        raise InvalidInput("These additions cannot be made; see `fields`.", code="not_held", fields=errors)
    now = timezone.now()
    before = {name: list(getattr(candidate, name) or []) for name in additions}
    for name, items in merged.items():
        setattr(candidate, name, items)
    candidate.save(update_fields=[*merged, "updated_at"])
    gates = _refresh_status(candidate, now)
    record_event(
        actor=by,
        verb="candidate.completed",
        workspace_id=candidate.workspace_id,
        target=candidate,
        detail={
            "added": {name: [i for i in merged[name] if i not in before[name]] for name in merged},
            "note": note,
            "promotion_status": candidate.promotion_status,
            "failing": failing(gates),
        },
    )
    return candidate
