"""One item of the review queue as its page shows it, whatever its state: the item itself (also
once decided, for the person who may review its domain), who decided it, what became of it (with
links), and the context a decision needs — who proposed it, the run it came from, its evidence,
why a fact was challenged, which gates really block it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.urls import reverse

from memory import access
from memory.models import (
    AuditEvent,
    BankItem,
    Candidate,
    Conflict,
    Fact,
    FactStatus,
    MemoryRun,
    PromotionDecision,
    Replay,
    Workspace,
)
from memory.selectors import conflict_closure, latest_challenges
from memory.services import promotion
from memory.services.facts import Outcome as Proposal
from review.diff import TextDiff, compare_texts
from review.selectors_queue import QueueEntry, _vectors


@dataclass
class Decided:
    """Who decided an item that no longer waits, what they decided, and when."""

    who: str
    what: str
    when: datetime | None


@dataclass
class ItemOutcome:
    """What a decision did, stated as it is: `code` (new, re_mention, superseded, lost, possible,
    held, denied, kept, restored, same, contradicts, both_true, revalidated, deprecated), a
    sentence, links to what it touched, and for a re-mention the wording that was not kept."""

    code: str
    headline: str
    links: list[tuple[str, str]] = field(default_factory=list)
    diff: TextDiff | None = None
    gates: list[tuple[str, str]] = field(default_factory=list)

    @property
    def tone(self) -> str:
        return {"held": "warn", "denied": "bad", "lost": "warn", "possible": "warn", "deprecated": "bad"}.get(
            self.code, "ok"
        )


def fact_url(workspace: Workspace, fact_id: int) -> str:
    return reverse("review:fact", args=[workspace.slug, fact_id])


def item_url(kind: str, pk: int) -> str:
    return reverse("review:queue-detail", kwargs={"kind": kind, "pk": pk})


# --- The item, in any state ------------------------------------------------------------------------
def item_entry(user: Any, kind: str, pk: int) -> QueueEntry | None:
    """The item whatever its state (pending or decided), if it lies in the person's workspaces and
    in a domain they may review; else None (answered as not found: no existence leak)."""

    def scoped(model: Any) -> Any:  # the one rule (memory.access): the item's workspace and domain
        return access.restrict(model.objects.filter(pk=pk), user, "decide")

    obj: Any
    if kind == "candidate":
        obj = scoped(Candidate).select_related("workspace", "domain__repo").first()
        title, created = (obj.proposed_memory, obj.created_at) if obj else ("", None)
    elif kind in ("conflict", "possible"):
        # Only the pair the kind's page shows, without its vectors (issue 38: the four facts'
        # joins were most of this query's planning).
        sides = ("winner", "loser") if kind == "conflict" else ("existing", "proposed")
        obj = scoped(Conflict).select_related("workspace", "domain__repo", *sides).defer(*_vectors(*sides)).first()
        if obj is not None and kind == "conflict" and obj.winner is None:
            obj = None  # an open possible conflict is not a decided conflict to review
        text = obj and ((obj.winner or obj.proposed).content if kind == "conflict" else obj.proposed.content)
        title, created = (text, obj.detected_at) if obj else ("", None)
    elif kind == "challenged":
        obj = scoped(Fact).select_related("workspace", "domain__repo").defer("embedding", "content_embedding").first()
        title, created = (obj.content, obj.status_changed_at) if obj else ("", None)
    else:
        return None
    if obj is None or created is None:
        return None
    return QueueEntry(
        kind=kind,
        key=f"{kind}-{pk}",
        title=str(title)[:120],
        workspace=obj.workspace,
        domain_label=obj.domain.label,
        created_at=created,
        obj=obj,
    )


def _user_name(user: Any) -> str:
    return user.get_username() if user is not None else "someone"


def decided_of(entry: QueueEntry) -> Decided:
    """Who took the item out of the queue, what they decided and when (for an item that no longer
    waits for this person)."""
    obj = entry.obj
    if entry.kind == "candidate":
        final = obj.decisions.filter(decision__in=["promote", "deny"]).order_by("-created_at", "-id").first()
        if final is not None:
            what = "approved it" if final.decision == "promote" else f"denied it ({final.reason})"
            if final.auto:
                what = "promoted it automatically"
            who = _user_name(final.decided_by_user) if final.decided_by_user_id else final.decided_by_label
            return Decided(who, what, final.created_at)
        if obj.human_approved_at is not None:
            return Decided(_user_name(obj.human_approved_by), "approved it", obj.human_approved_at)
        return Decided("the gate", f"routed it to {obj.get_promotion_status_display()}", obj.updated_at)
    if entry.kind == "conflict":
        if obj.reviewed_at is None:
            return Decided("nobody", "nothing yet", None)
        event = _last_event("conflict", obj.pk, ["conflict.reviewed", "conflict.decided"])
        restored = bool(event and (event.detail or {}).get("restored"))
        what = "restored the human-stated fact" if restored else "kept the decision"
        if obj.resolution != Conflict.Resolution.MACHINE:
            what = f"decided it ({obj.get_resolution_display()})"
        return Decided(_user_name(obj.reviewed_by), what, obj.reviewed_at)
    if entry.kind == "possible":
        if obj.status != Conflict.Status.OPEN:
            return Decided(_user_name(obj.decided_by), f"decided it: {obj.get_resolution_display()}", obj.decided_at)
        # Left open, its pair no longer live: the reason the API gives as `closed_reason`.
        return Decided("Engram", f"closed it: {conflict_closure(obj) or 'a fact of the pair is no longer live'}", None)
    event = _last_event(
        "fact",
        obj.pk,
        ["fact.revalidated", "fact.deprecated", "fact.archived", "fact.status_changed", "fact.superseded"],
    )
    what = {
        "fact.revalidated": "revalidated it",
        "fact.deprecated": "deprecated it",
        "fact.archived": "archived it",
        "fact.superseded": "superseded it",
    }.get(event.verb if event else "", f"moved it to {obj.status}")
    return Decided(event.actor_label if event else "someone", what, event.created_at if event else None)


def asked_with(user: Any, entry: QueueEntry) -> tuple[int, str | None] | None:
    """For a possible conflict that does not wait on its own because it is joined to a question that
    still waits (memory.selectors.asked_alone): that question's id, and its page's URL when the
    person may open it. None for any other item. (Such a pair is neither decided nor closed: its
    page said "Engram closed it: a fact of the pair is no longer live", both facts live.)"""
    obj = entry.obj
    if entry.kind != "possible" or obj.status != Conflict.Status.OPEN or obj.question_id is None:
        return None
    if conflict_closure(obj):
        return None
    question = obj.question_id
    may_open = access.restrict(Conflict.objects.filter(pk=question), user, "decide").exists()
    return question, item_url("possible", question) if may_open else None


def _last_event(target_type: str, target_id: int, verbs: list[str]) -> AuditEvent | None:
    return (
        AuditEvent.objects.filter(target_type=target_type, target_id=target_id, verb__in=verbs)
        .order_by("-created_at", "-id")
        .first()
    )


# --- Outcomes ------------------------------------------------------------------------------------
def candidate_outcome(decision: PromotionDecision) -> ItemOutcome:
    """What a candidate's decision did, from the decision row and the rows it wrote."""
    candidate = decision.candidate
    ws = candidate.workspace
    if decision.decision == PromotionDecision.Kind.DENY:
        return ItemOutcome("denied", f"Denied: {decision.reason}")
    if decision.decision == PromotionDecision.Kind.REFUSED:
        blocking = [(name, gate["reason"]) for name, gate in decision.scorecard.items() if gate["status"] != "passed"]
        names = ", ".join(name for name, _ in blocking)
        return ItemOutcome(
            "held",
            f"Approved, but not promoted: held on gate {names}. Nothing was written to memory.",
            [(f"Candidate #{candidate.pk}: complete it", item_url("candidate", candidate.pk))],
            gates=blocking,
        )
    fact_id = decision.fact_id
    assert fact_id is not None
    fact_link = (f"fact #{fact_id}", fact_url(ws, fact_id))
    if decision.outcome == Proposal.RE_MENTIONED:
        fact = Fact.objects.only("content").get(pk=fact_id)
        kept_diff = None
        if fact.content != candidate.proposed_memory:
            kept_diff = compare_texts(
                fact.content, candidate.proposed_memory, old_label="kept (live wording)", new_label="not kept"
            )
        return ItemOutcome(
            "re_mention",
            f"Approved, but not stored as new: re-mention of fact #{fact_id}, which already said this. Its wording was kept and its mention count "
            "rose; the approved wording was stored only as a mention.",
            [fact_link],
            diff=kept_diff,
        )
    conflict = (
        Conflict.objects.filter(proposed_id=fact_id).select_related("existing").order_by("-detected_at", "-id").first()
    )
    if decision.outcome == Proposal.CONFLICT_WON and conflict is not None:
        replaced = "replaced the wording of" if conflict.rule == Conflict.Rule.HUMAN else "superseded"
        return ItemOutcome(
            "superseded",
            f"Approved and promoted as fact #{fact_id}; it {replaced} fact #{conflict.existing_id}.",
            [fact_link, (f"fact #{conflict.existing_id} (superseded)", fact_url(ws, conflict.existing_id))],
        )
    if decision.outcome == Proposal.CONFLICT_LOST and conflict is not None:
        return ItemOutcome(
            "lost",
            f"Approved and stored as fact #{fact_id}, which lost a conflict to fact #{conflict.existing_id} on "
            f"{conflict.get_rule_display()} and was challenged.",
            [fact_link, (f"fact #{conflict.existing_id}", fact_url(ws, conflict.existing_id))],
        )
    if decision.outcome == Proposal.POSSIBLE_CONFLICT and conflict is not None:
        return ItemOutcome(
            "possible",
            f"Approved and promoted as fact #{fact_id}; it may contradict fact #{conflict.existing_id}: both stay live "
            f"until a person decides possible conflict #{conflict.pk}.",
            [fact_link, (f"possible conflict #{conflict.pk}", item_url("possible", conflict.pk))],
        )
    return ItemOutcome("new", f"Approved and promoted as a new fact #{fact_id}.", [fact_link])


def last_candidate_outcome(candidate: Candidate) -> ItemOutcome | None:
    """The outcome of the candidate's final decision, else of its last refused one; None if none."""
    decisions = list(candidate.decisions.exclude(decision="dry_run").order_by("-created_at", "-id")[:5])
    final = next((d for d in decisions if d.decision in ("promote", "deny")), None)
    chosen = final or (decisions[0] if decisions and candidate.human_approved_at else None)
    if chosen is None:
        return None
    chosen.candidate = candidate
    return candidate_outcome(chosen)


# --- Context for a decision ----------------------------------------------------------------------
@dataclass
class Proposer:
    name: str
    role: str
    run: MemoryRun | None
    episode_id: int | None


def proposer_of(candidate: Candidate) -> Proposer:
    """The proposing agent (name and role, or the submitter's label) and the run it came from."""
    agent = candidate.submitted_by_agent
    item = (
        BankItem.objects.filter(candidate=candidate, run__workspace_id=candidate.workspace_id)
        .select_related("run")
        .order_by("-created_at")
        .first()
    )
    run = item.run if item is not None else None
    return Proposer(
        name=agent.name if agent is not None else candidate.submitted_by_label or "unknown",
        role=agent.role.name if agent is not None else "",
        run=run,
        episode_id=run.episode_id if run is not None else None,
    )


_REF = re.compile(r"^(?P<kind>fact|replay|run)\s*[:#/-]\s*#?(?P<id>\d+)$", re.IGNORECASE)


def evidence_links(candidate: Candidate) -> list[tuple[str, str | None]]:
    """Each evidence ref with a link when it names something Engram knows: `fact:N` (a fact of the
    same workspace), `replay:N` (a replay of this candidate, shown below), `run:N` (a run of the
    workspace), or a path of this site."""
    refs = list(candidate.evidence_refs or [])
    wanted: dict[str, set[int]] = {"fact": set(), "replay": set(), "run": set()}
    for ref in refs:
        if m := _REF.match(ref.strip()):
            wanted[m["kind"].lower()].add(int(m["id"]))
    facts = set(
        Fact.objects.filter(pk__in=wanted["fact"], workspace_id=candidate.workspace_id).values_list("pk", flat=True)
    )
    replays = set(Replay.objects.filter(pk__in=wanted["replay"], candidate=candidate).values_list("pk", flat=True))
    runs = set(
        MemoryRun.objects.filter(pk__in=wanted["run"], workspace_id=candidate.workspace_id).values_list("pk", flat=True)
    )
    out: list[tuple[str, str | None]] = []
    for ref in refs:
        url = None
        if m := _REF.match(ref.strip()):
            kind, pk = m["kind"].lower(), int(m["id"])
            if kind == "fact" and pk in facts:
                url = fact_url(candidate.workspace, pk)
            elif kind == "replay" and pk in replays:
                url = f"#replay-{pk}"
            elif kind == "run" and pk in runs:
                url = reverse("review:run", args=[pk])
        elif ref.startswith(("/review/", "/memory/")) and "//" not in ref:
            url = ref
        out.append((ref, url))
    return out


@dataclass
class GateRow:
    name: str
    status: str
    reason: str
    tone: str  # passed | blocks | neutral
    label: str


def gate_rows(candidate: Candidate, user: Any) -> list[GateRow]:
    """The gates as a reviewer should read them: red only for what would still block the promotion
    once this person approved; what their approval settles (human review, evidence) and what does
    not apply to a person's decision (automatic promotion, the write flag) are neutral."""
    gates = promotion.compute_gates(candidate)
    after = promotion.gates_if_approved(candidate, user)
    rows = []
    for name in promotion.GATES:
        gate = gates[name]
        if gate["status"] == promotion.PASSED:
            tone, label = "passed", "passed"
        elif after[name]["status"] != promotion.PASSED:
            tone, label = "blocks", "blocks"
        elif name in ("human_review", "evidence"):
            tone, label = "neutral", "settled by your approval"
        else:
            tone, label = "neutral", "not applicable"
        rows.append(GateRow(name, gate["status"], gate["reason"], tone, label))
    return rows


@dataclass
class Challenge:
    reason: str
    detail: str
    who: str
    when: datetime | None
    replay: Replay | None = None
    conflict: Conflict | None = None
    diff: TextDiff | None = None


_LOST_CONFLICT = re.compile(r"lost conflict (\d+)")
_REPLAY = re.compile(r"replay #(\d+)")


def challenge_of(fact: Fact) -> Challenge | None:
    """Why a fact was challenged: the failed replay (its text) or the conflict it lost (the
    winner's text and the diff), from the latest `fact.challenged` event."""
    event = latest_challenges([fact], current_only=False).get(fact.pk)
    if event is None:
        return None
    detail = event.detail or {}
    text = str(detail.get("detail", ""))
    challenge = Challenge(str(detail.get("reason", "")), text, event.actor_label, event.created_at)
    if (m := _REPLAY.search(text)) and fact.origin_candidate_id:
        challenge.replay = Replay.objects.filter(pk=int(m[1]), candidate_id=fact.origin_candidate_id).first()
    elif challenge.reason == "failed_replay" and fact.origin_candidate_id:
        challenge.replay = (
            Replay.objects.filter(candidate_id=fact.origin_candidate_id, passed=False).order_by("-created_at").first()
        )
    if m := _LOST_CONFLICT.search(text):
        challenge.conflict = (
            Conflict.objects.filter(pk=int(m[1]), workspace_id=fact.workspace_id).select_related("winner").first()
        )
        if challenge.conflict is not None and challenge.conflict.winner is not None:
            challenge.diff = compare_texts(
                fact.content, challenge.conflict.winner.content, old_label="challenged fact", new_label="the winner"
            )
    return challenge


def is_pending(entry: QueueEntry) -> bool:
    """Whether the item still waits for a decision (in someone's queue), by its own state."""
    obj = entry.obj
    if entry.kind == "candidate":
        return not obj.is_decided and obj.human_approved_at is None
    if entry.kind == "conflict":
        return obj.reviewed_at is None
    if entry.kind == "possible":
        return obj.status == Conflict.Status.OPEN and obj.existing.is_live and obj.proposed.is_live
    return obj.status == FactStatus.CHALLENGED and obj.superseded_by_id is None
