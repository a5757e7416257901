"""The gates of the promotion (SPEC §7), pure: what a candidate's own fields and replays say about
each gate, and the promotion status that follows. Nothing here writes; memory.services.promotion
records the decisions made on these scorecards."""

from __future__ import annotations

from dataclasses import dataclass

from memory.models import (
    Candidate,
    FailureClass,
    PromotionStatus,
    Replay,
)

PASSED, FAILED, PENDING = "passed", "failed", "pending"
GATES = (
    "failure_class",
    "evidence",
    "provenance",
    "scope",
    "traceability",
    "human_review",
    "write_flag",
    "auto_promotion",
)
IMPORTED_ORIGINS = frozenset({"imported"})
PROMOTABLE_CLASSES = frozenset({FailureClass.AGENT_FAILURE, FailureClass.VERIFICATION_FAILURE})


Gate = dict[str, str]
Scorecard = dict[str, Gate]


# --- Gates (pure) -------------------------------------------------------------------------------
def _gate(status: str, reason: str) -> Gate:
    return {"status": status, "reason": reason}


# Who may vouch for a candidate (issue 13, trust boundary): the agent that proposed a rule cannot
# certify it alone. A replay is evidence only when a person, or a verifier agent (`is_verifier`, set
# by a workspace admin) of the candidate's workspace that did not submit it, recorded it. Standing
# is read live: an agent losing its verifier flag (or its key) stops counting for open candidates;
# decided ones keep the scorecard they were decided on.
@dataclass(frozen=True)
class Standing:
    counts: bool
    reason: str


def replay_standing(candidate: Candidate, replay: Replay) -> Standing:
    """Whether `replay` counts as evidence for `candidate`, and why. Reads replay.recorded_by_agent
    (select it with the replay to avoid a query per row)."""
    who = replay.recorded_by_label
    submitter = f"the candidate's submitter ({who})"
    if replay.recorded_by_user_id is not None:
        if candidate.submitted_by_agent_id is None and candidate.submitted_by_label == who:
            return Standing(False, f"replay #{replay.pk} was recorded by {submitter}; it does not count")
        return Standing(True, f"recorded by {who}, a person")
    agent = replay.recorded_by_agent if replay.recorded_by_agent_id is not None else None
    if agent is None:
        return Standing(
            False,
            f"replay #{replay.pk} was recorded by {who}, neither a person nor a verifier agent; it does not count",
        )
    if agent.pk == candidate.submitted_by_agent_id:
        return Standing(False, f"replay #{replay.pk} was recorded by {submitter}; it does not count")
    if not agent.is_verifier:
        return Standing(
            False, f"replay #{replay.pk} was recorded by agent {agent.name}, which is not a verifier; it does not count"
        )
    if agent.workspace_id != candidate.workspace_id:
        return Standing(
            False, f"replay #{replay.pk} was recorded by agent {agent.name} of another workspace; it does not count"
        )
    if agent.revoked_at is not None:
        return Standing(
            False, f"replay #{replay.pk} was recorded by agent {agent.name}, whose key was revoked; it does not count"
        )
    return Standing(True, f"recorded by verifier agent {agent.name}")


def _replays(candidate: Candidate) -> list[Replay]:
    """Oldest first; uses prefetched `replays` when the caller loaded them (with their agents)."""
    if "replays" in getattr(candidate, "_prefetched_objects_cache", {}):
        return sorted(candidate.replays.all(), key=lambda r: (r.created_at, r.pk))
    return list(candidate.replays.select_related("recorded_by_agent").order_by("created_at", "id"))


@dataclass
class Evidence:
    """The replays as the gate reads them: the latest one that counts, and the later ones that do not."""

    latest: Replay | None
    standing: Standing | None
    ignored: list[tuple[Replay, Standing]]

    @property
    def verified(self) -> bool:
        return self.latest is not None and self.latest.passed


def replay_evidence(candidate: Candidate) -> Evidence:
    """The latest counting replay decides; a later replay that does not count changes nothing
    (a self-recorded pass after a verifier's failure does not flip the gate)."""
    ignored: list[tuple[Replay, Standing]] = []
    for replay in reversed(_replays(candidate)):
        standing = replay_standing(candidate, replay)
        if standing.counts:
            return Evidence(replay, standing, ignored)
        ignored.append((replay, standing))
    return Evidence(None, None, ignored)


IGNORED_SHOWN = 3


def _ignored_note(evidence: Evidence) -> str:
    if not evidence.ignored:
        return ""
    shown = [standing.reason for _, standing in evidence.ignored[:IGNORED_SHOWN]]
    more = len(evidence.ignored) - IGNORED_SHOWN
    if more > 0:
        shown.append(f"{more} earlier replay{'s do' if more > 1 else ' does'} not count either")
    return "; " + "; ".join(shown)


def _approver(candidate: Candidate) -> str:
    user = candidate.human_approved_by
    who = user.get_username() if user is not None else "a person"
    when = candidate.human_approved_at
    return f"approved by {who}" + (f" on {when:%Y-%m-%d %H:%M} UTC" if when else "")


def _failure_class_gate(candidate: Candidate) -> Gate:
    match candidate.failure_class:
        case FailureClass.AGENT_FAILURE:
            return _gate(PASSED, "agent_failure: the agent's own mistake may become a rule")
        case FailureClass.VERIFICATION_FAILURE if candidate.verification_probe_candidate:
            return _gate(PASSED, f"verification_failure with its probe {candidate.verification_probe_candidate!r}")
        case FailureClass.VERIFICATION_FAILURE:
            return _gate(FAILED, "verification_failure may be promoted only with its verification probe")
        case FailureClass.ENVIRONMENT_BLOCKER:
            return _gate(FAILED, "environment_blocker: an outage or missing tool is not knowledge; never promoted")
        case FailureClass.FLAKY_BLOCKER:
            return _gate(FAILED, "flaky_blocker: a failure that does not reproduce; never promoted")
        case FailureClass.HARNESS_BLOCKER:
            return _gate(FAILED, "harness_blocker: routed to the harness-fix list, never to memory")
    return _gate(FAILED, f"unknown failure class {candidate.failure_class!r}")


NEEDS_EVIDENCE = (
    "needs a passing replay recorded by a person or a verifier agent other than the submitter, or a human approval"
)


def _evidence_gate(candidate: Candidate, evidence: Evidence) -> Gate:
    approved_at = candidate.human_approved_at
    latest, note = evidence.latest, _ignored_note(evidence)
    if latest is not None and latest.passed:
        who = evidence.standing.reason if evidence.standing is not None else ""
        return _gate(PASSED, f"replay #{latest.pk} of {latest.probe!r} passed, {who}{note}")
    if approved_at is not None and (latest is None or latest.created_at <= approved_at):
        return _gate(PASSED, _approver(candidate) + note)
    if latest is not None:
        return _gate(
            FAILED,
            f"the latest counting replay #{latest.pk} of {latest.probe!r} failed; "
            f"needs a passing replay or an approval{note}",
        )
    return _gate(PENDING, NEEDS_EVIDENCE + note)


def _traceability_gate(candidate: Candidate) -> Gate:
    actions, refs = len(candidate.source_action_ids or []), len(candidate.evidence_refs or [])
    if not actions and not refs:
        return _gate(
            FAILED,
            "held: no source_action_ids and no evidence_refs; a rule must point back at the trace it came from",
        )
    return _gate(
        PASSED,
        f"{actions} source action{'s' if actions != 1 else ''}, {refs} evidence ref{'s' if refs != 1 else ''}",
    )


def _scope_gate(candidate: Candidate) -> Gate:
    missing = [
        name
        for name, value in (
            ("scope (applies_to)", candidate.applies_to),
            ("anti-scope (does_not_apply_to)", candidate.does_not_apply_to),
        )
        if not value
    ]
    if missing:
        return _gate(
            FAILED, f"held: no {' and no '.join(missing)}; a rule right in one place must not apply everywhere"
        )
    return _gate(
        PASSED, f"applies to {', '.join(candidate.applies_to)}; not to {', '.join(candidate.does_not_apply_to)}"
    )


def compute_gates(candidate: Candidate, *, write: bool | None = None, auto: bool | None = None) -> Scorecard:
    """Every gate of SPEC §7 as {name: {status: passed|failed|pending, reason}}, from the
    candidate's own fields and replays. `write`/`auto` describe a promote call; left None, the
    write gate is pending and the automatic gate tells whether the candidate is eligible."""
    evidence = replay_evidence(candidate)
    verified = evidence.verified
    gates: Scorecard = {
        "failure_class": _failure_class_gate(candidate),
        "evidence": _evidence_gate(candidate, evidence),
        "provenance": (
            _gate(FAILED, "imported-only: nothing in this workspace observed it; an outside trace is not the truth")
            if candidate.origin in IMPORTED_ORIGINS
            else _gate(PASSED, f"origin {candidate.origin}")
        ),
        "scope": _scope_gate(candidate),
        "traceability": _traceability_gate(candidate),
    }
    if not candidate.requires_human_review:
        gates["human_review"] = _gate(PASSED, "not required")
    elif candidate.human_approved_at is not None:
        gates["human_review"] = _gate(PASSED, _approver(candidate))
    else:
        gates["human_review"] = _gate(PENDING, "requires human review: waiting for a person's approval")

    if write is None:
        gates["write_flag"] = _gate(PENDING, "nothing is written until promote is called with write=true")
    elif write:
        gates["write_flag"] = _gate(PASSED, "write=true")
    else:
        gates["write_flag"] = _gate(FAILED, "no write flag: a dry run, nothing written")

    if auto is False:
        gates["auto_promotion"] = _gate(PASSED, "not an automatic promotion")
    elif candidate.requires_human_review:
        gates["auto_promotion"] = _gate(FAILED, "requires human review: never promoted automatically")
    elif not verified:
        gates["auto_promotion"] = _gate(
            FAILED if auto else PENDING,
            "not replay-verified: automatic promotion needs a passing replay recorded by a person "
            "or a verifier agent other than the submitter",
        )
    else:
        gates["auto_promotion"] = _gate(PASSED, "replay-verified independently and no human review required")
    return gates


def failing(gates: Scorecard) -> list[str]:
    return [name for name in GATES if gates[name]["status"] != PASSED]


def status_for(candidate: Candidate, gates: Scorecard) -> str:
    """The promotion_status an undecided candidate has given its gates; decisions are final."""
    if candidate.is_decided:
        return candidate.promotion_status
    if candidate.failure_class == FailureClass.HARNESS_BLOCKER:
        return PromotionStatus.HARNESS_FIX
    if gates["failure_class"]["status"] == FAILED or gates["provenance"]["status"] == FAILED:
        return PromotionStatus.BLOCKED
    if gates["scope"]["status"] == FAILED or gates["traceability"]["status"] == FAILED:
        return PromotionStatus.HELD
    return PromotionStatus.CANDIDATE
