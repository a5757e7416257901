"""Proactive memory-agent runs (SPEC §9): a run, its memory bank, the memory agent's decisions,
and the end of the run, where bank items may be offered as promotion candidates.

Every write locks the run row first (one writer per run at a time, so an upsert never races
its own unique constraint), refuses a finished run, stamps the run's `last_activity_at` (the
daily job closes a run idle for ENGRAM_RUN_ABANDON_HOURS: memory.services.runs) and records its
audit event in the same transaction. Finishing never writes a fact: items go through the
promotion gate (`memory.services.promotion.submit_candidate`) as candidates that require human
review.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.actors import Actor
from memory.audit import record_event
from memory.errors import InvalidInput, NotFound, StateConflict
from memory.models import (
    END_FINISHED,
    STATUS_ITEM_ID,
    Agent,
    BankItem,
    BankKind,
    Candidate,
    FailureClass,
    Intervention,
    MemoryDomain,
    MemoryRun,
    MemoryType,
    RunStatus,
    Workspace,
)
from memory.services import promotion
from memory.services.facts import create_episode
from memory.services.tenancy import create_domain, require_visible_domain

TASK_MAX = 20_000
STATUS_MAX = 8_000
ITEM_CONTENT_MAX = 4_000
OUTCOME_MAX = 200
TAGS_MAX = 20
TAG_MAX = 100
REMINDER_MAX = 2_000
RATIONALE_MAX = 2_000
WINDOW_MAX = 8
WINDOW_TEXT_MAX = 2_000
ITEM_ID_MAX = 100
# Bounded reads: the whole bank is answered by `GET runs/{id}/bank/` and shown on the run page.
BANK_ITEMS_MAX = 200  # knowledge items, and procedural items, per run
# Item ids travel in URL paths (`bank/items/{item_id}/`): no slash, no spaces.
ITEM_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$")
ITEM_ID_RULE = (
    "1–100 characters: letters, digits and . _ : @ - (no spaces or slashes), starting with a letter or digit."
)
# Tags that carry scope: a knowledge item tagged `applies_to:web` / `not_for:cli` offers its
# candidate with that scope and anti-scope (the promotion gate holds a candidate without both).
SCOPE_TAG = "applies_to:"
ANTI_SCOPE_TAGS = ("does_not_apply_to:", "not_for:")
DEFAULT_CANDIDATE_DOMAIN = "knowledge"
MEMORY_AGENT_ORIGIN = "memory_agent"


class RunFinished(StateConflict):
    code = "run_finished"

    def __init__(self, run: MemoryRun) -> None:
        why = f" ({run.end_reason})" if run.end_reason and run.end_reason != END_FINISHED else ""
        super().__init__(f"Run {run.pk} is finished{why}; its memory bank can no longer change.")


# --- Validation (the services are the authority; serializers only check shapes) -------------
def _text(value: str, *, name: str, max_len: int, errors: dict[str, list[str]], allow_blank: bool = False) -> str:
    if not allow_blank and not value.strip():
        errors[name] = ["May not be blank."]
    elif len(value) > max_len:
        errors[name] = [f"At most {max_len} characters."]
    return value.strip()


def _item_id(value: str, errors: dict[str, list[str]], *, name: str = "id") -> str:
    value = value.strip()
    if not ITEM_ID.match(value):
        errors[name] = [ITEM_ID_RULE]
    return value


def _tags(tags: list[str], errors: dict[str, list[str]]) -> list[str]:
    cleaned: list[str] = []
    if len(tags) > TAGS_MAX:
        errors["tags"] = [f"At most {TAGS_MAX} tags."]
        return cleaned
    for tag in tags:
        tag = tag.strip()
        if not tag or len(tag) > TAG_MAX:
            errors["tags"] = [f"Each tag has 1–{TAG_MAX} characters."]
            return []
        if tag not in cleaned:
            cleaned.append(tag)
    return cleaned


def _raise(errors: dict[str, Any]) -> None:
    if errors:
        raise InvalidInput("The request has invalid fields; see `fields`.", fields=errors)


def _lock_running(run: MemoryRun) -> MemoryRun:
    """Lock the run, refuse it once finished, and stamp the write about to happen as its latest
    activity (undone with the write if that fails: a refused call is no sign of life)."""
    run = MemoryRun.objects.select_for_update().get(pk=run.pk)
    if not run.is_running:
        raise RunFinished(run)
    run.last_activity_at = timezone.now()
    run.save(update_fields=["last_activity_at"])
    return run


def _touch(run: MemoryRun, item: BankItem, verb: str, by: Actor, **detail: Any) -> None:
    record_event(
        actor=by,
        verb=verb,
        workspace_id=run.workspace_id,
        target=run,
        detail={"kind": item.kind, "item_id": item.item_id, **detail},
    )


# --- Runs --------------------------------------------------------------------------------------
@transaction.atomic
def start_run(*, agent: Agent, task: str, by: Actor) -> MemoryRun:
    """Open a run for `agent` with an empty bank (its one status item) and a `run` episode."""
    errors: dict[str, list[str]] = {}
    task = _text(task, name="task", max_len=TASK_MAX, errors=errors)
    _raise(errors)
    episode = create_episode(workspace_id=agent.workspace_id, by=by, kind="run", title=task[:300])
    now = timezone.now()
    run = MemoryRun.objects.create(
        workspace_id=agent.workspace_id, agent=agent, task=task, episode=episode, created_at=now, last_activity_at=now
    )
    BankItem.objects.create(run=run, kind=BankKind.STATUS, item_id=STATUS_ITEM_ID, content="")
    record_event(actor=by, verb="run.started", workspace_id=agent.workspace_id, target=run, detail={"task": task[:200]})
    return run


@transaction.atomic
def update_status(*, run: MemoryRun, content: str, by: Actor) -> BankItem:
    """memory_update_status: replace the run's progress note (seen only by the memory agent)."""
    errors: dict[str, list[str]] = {}
    content = _text(content, name="content", max_len=STATUS_MAX, errors=errors, allow_blank=True)
    _raise(errors)
    run = _lock_running(run)
    item = BankItem.objects.get(run=run, kind=BankKind.STATUS)
    item.content, item.updated_at = content, timezone.now()
    item.save(update_fields=["content", "updated_at"])
    _touch(run, item, "run.status_updated", by)
    return item


def _upsert(run: MemoryRun, kind: str, item_id: str, values: dict[str, Any]) -> tuple[BankItem, bool]:
    now = timezone.now()
    item = BankItem.objects.filter(run=run, kind=kind, item_id=item_id).first()
    if item is None:
        if BankItem.objects.filter(run=run, kind=kind).count() >= BANK_ITEMS_MAX:  # the run row is locked
            raise StateConflict(
                f"Run {run.pk} already holds {BANK_ITEMS_MAX} {kind} items: replace one (same id) or delete one.",
                code="bank_full",
                fields={"id": [f"At most {BANK_ITEMS_MAX} {kind} items per run."]},
            )
        return BankItem.objects.create(
            run=run, kind=kind, item_id=item_id, created_at=now, updated_at=now, **values
        ), True
    for name, value in values.items():
        setattr(item, name, value)
    item.updated_at = now
    item.save(update_fields=[*values, "updated_at"])
    return item, False


@transaction.atomic
def save_knowledge(*, run: MemoryRun, item_id: str, content: str, tags: list[str], by: Actor) -> tuple[BankItem, bool]:
    """memory_save_knowledge: create or replace a stable fact of the run (a requirement, a path,
    a constraint). Returns (item, created)."""
    errors: dict[str, list[str]] = {}
    item_id = _item_id(item_id, errors)
    content = _text(content, name="content", max_len=ITEM_CONTENT_MAX, errors=errors)
    tags = _tags(tags, errors)
    _raise(errors)
    run = _lock_running(run)
    item, created = _upsert(run, BankKind.KNOWLEDGE, item_id, {"content": content, "tags": tags})
    _touch(run, item, "run.knowledge_saved", by, created=created)
    return item, created


@transaction.atomic
def save_procedural(*, run: MemoryRun, item_id: str, content: str, outcome: str, by: Actor) -> tuple[BankItem, bool]:
    """memory_save_procedural: create or replace an attempt and its outcome (a command that
    failed or worked, a diagnosis). Returns (item, created)."""
    errors: dict[str, list[str]] = {}
    item_id = _item_id(item_id, errors)
    content = _text(content, name="content", max_len=ITEM_CONTENT_MAX, errors=errors)
    outcome = _text(outcome, name="outcome", max_len=OUTCOME_MAX, errors=errors)
    _raise(errors)
    run = _lock_running(run)
    item, created = _upsert(run, BankKind.PROCEDURAL, item_id, {"content": content, "outcome": outcome})
    _touch(run, item, "run.procedural_saved", by, created=created, outcome=outcome)
    return item, created


@transaction.atomic
def delete_item(*, run: MemoryRun, item_id: str, by: Actor, kind: str | None = None) -> list[BankItem]:
    """memory_delete: remove the knowledge and/or procedural item with this id (`kind` narrows it).
    The status item cannot be deleted (update it instead). Raises NotFound when nothing matches."""
    if kind is not None and kind not in (BankKind.KNOWLEDGE, BankKind.PROCEDURAL):
        raise InvalidInput("`kind` is knowledge or procedural.", fields={"kind": ["knowledge or procedural."]})
    run = _lock_running(run)
    qs = BankItem.objects.filter(run=run, item_id=item_id).exclude(kind=BankKind.STATUS)
    if kind is not None:
        qs = qs.filter(kind=kind)
    items = list(qs.order_by("kind"))
    if not items:
        raise NotFound(f"Run {run.pk} has no bank item {item_id!r}.", code="bank_item_not_found")
    BankItem.objects.filter(pk__in=[i.pk for i in items]).delete()
    record_event(
        actor=by,
        verb="run.item_deleted",
        workspace_id=run.workspace_id,
        target=run,
        detail={"item_id": item_id, "kinds": [i.kind for i in items]},
    )
    return items


def _window(window: list[dict[str, Any]], errors: dict[str, Any]) -> list[dict[str, Any]]:
    """The reviewed steps, bounded: {step, command, thought, ok, output}; long text is cut."""
    if len(window) > WINDOW_MAX:
        errors["window"] = [f"At most {WINDOW_MAX} steps (the memory agent reviews the last {WINDOW_MAX})."]
        return []
    cleaned = []
    for entry in window:
        step = entry.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            errors["window"] = ["Each step has a non-negative integer `step`."]
            return []
        ok = entry.get("ok")
        cleaned.append(
            {
                "step": step,
                "command": str(entry.get("command") or "")[:WINDOW_TEXT_MAX],
                "thought": str(entry.get("thought") or "")[:WINDOW_TEXT_MAX],
                "ok": ok if isinstance(ok, bool) else None,
                "output": str(entry.get("output") or "")[:WINDOW_TEXT_MAX],
            }
        )
    return cleaned


@transaction.atomic
def log_intervention(
    *,
    run: MemoryRun,
    step: int,
    reminder: str | None,
    by: Actor,
    rationale: str = "",
    window: list[dict[str, Any]] | None = None,
) -> Intervention:
    """Log one decision of the memory agent before step `step`: a reminder appended to the action
    agent's context, or None — selective silence, recorded as well."""
    errors: dict[str, Any] = {}
    if step < 0:
        errors["step"] = ["A non-negative integer."]
    if reminder is not None:
        reminder = _text(reminder, name="reminder", max_len=REMINDER_MAX, errors=errors)
    rationale = _text(rationale, name="rationale", max_len=RATIONALE_MAX, errors=errors, allow_blank=True)
    steps = _window(window or [], errors)
    _raise(errors)
    run = _lock_running(run)
    intervention = Intervention.objects.create(
        run=run, step=step, reminder=reminder, rationale=rationale, window=steps, created_at=timezone.now()
    )
    record_event(
        actor=by,
        verb="run.intervened" if reminder is not None else "run.stayed_silent",
        workspace_id=run.workspace_id,
        target=run,
        detail={"step": step, "intervention": intervention.pk},
    )
    return intervention


# --- Finishing: bank items → promotion candidates ---------------------------------------------
@dataclass
class FinishResult:
    run: MemoryRun
    candidates: list[Candidate] = field(default_factory=list)


def run_page_path(run_id: int) -> str:
    return f"/review/runs/{run_id}/"


def _scope_of(item: BankItem) -> tuple[list[str], list[str], list[str]]:
    """(plain tags, applies_to, does_not_apply_to) from a knowledge item's tags."""
    plain, scope, anti = [], [], []
    for tag in item.tags or []:
        if tag.startswith(SCOPE_TAG) and tag[len(SCOPE_TAG) :].strip():
            scope.append(tag[len(SCOPE_TAG) :].strip())
        elif anti_prefix := next((p for p in ANTI_SCOPE_TAGS if tag.startswith(p)), None):
            if tag[len(anti_prefix) :].strip():
                anti.append(tag[len(anti_prefix) :].strip())
        else:
            plain.append(tag)
    return plain, scope, anti


def candidate_document(
    item: BankItem, run: MemoryRun, *, failure_class: str, applies_to: list[str], does_not_apply_to: list[str]
) -> dict[str, Any]:
    """The `awtl.memory_candidate.v2` document a bank item is offered as: origin memory_agent,
    requiring human review, pointing back at the run (its page and the item)."""
    _, tag_scope, tag_anti = _scope_of(item)
    if item.kind == BankKind.PROCEDURAL:
        summary = f"Attempt recorded by the memory agent in run {run.pk} (outcome: {item.outcome}). Task: {run.task}"
        memory_type = MemoryType.PROCEDURE
    else:
        summary = f"Stable fact recorded by the memory agent in run {run.pk}. Task: {run.task}"
        memory_type = MemoryType.CONVENTION
    return {
        "candidate_id": f"run-{run.pk}-{item.kind}-{item.item_id}",
        "failure_class": failure_class,
        "failure_type": f"memory_agent_{item.kind}",
        "source_action_ids": [f"run:{run.pk}/{item.kind}:{item.item_id}"],
        "root_cause_summary": summary[: promotion.SUMMARY_MAX],
        "proposed_memory": item.content,
        "scope": {
            "applies_to": list(dict.fromkeys([*tag_scope, *applies_to])),
            "does_not_apply_to": list(dict.fromkeys([*tag_anti, *does_not_apply_to])),
        },
        "evidence_refs": [f"run:{run.pk}", run_page_path(run.pk)],
        "requires_human_review": True,
        "origin": MEMORY_AGENT_ORIGIN,
        "memory_type": memory_type,
    }


def default_candidate_domain(workspace_id: int) -> MemoryDomain:
    """The workspace `knowledge` domain (created with the default grants when missing)."""
    workspace = Workspace.objects.get(pk=workspace_id)
    return create_domain(workspace=workspace, name=DEFAULT_CANDIDATE_DOMAIN, by=Actor.system("memory_agent"))


@transaction.atomic
def finish_run(
    *,
    run: MemoryRun,
    by: Actor,
    offer_candidates: bool,
    domain: MemoryDomain | None = None,
    topic: str | None = None,
    item_ids: list[str] | None = None,
    failure_class: str = FailureClass.AGENT_FAILURE,
    applies_to: list[str] | None = None,
    does_not_apply_to: list[str] | None = None,
) -> FinishResult:
    """Close the run. With `offer_candidates`, each knowledge and procedural item (or those named
    in `item_ids`) becomes a promotion candidate — origin memory_agent, requiring human review —
    through the promotion gate; never a fact. Raises RunFinished the second time, InvalidInput
    (nothing written) for an unknown item id or an item the gate refuses."""
    run = _lock_running(run)
    items = list(
        BankItem.objects.filter(run=run, kind__in=[BankKind.KNOWLEDGE, BankKind.PROCEDURAL]).order_by(
            "kind", "created_at", "id"
        )
    )
    if item_ids is not None:
        known = {i.item_id for i in items}
        unknown = [i for i in item_ids if i not in known]
        if unknown:
            raise InvalidInput(
                "Some item ids are not in the bank.", fields={"items": [f"Unknown item {i!r}." for i in unknown]}
            )
        items = [i for i in items if i.item_id in set(item_ids)]
    candidates: list[Candidate] = []
    if offer_candidates and items:
        target = domain or default_candidate_domain(run.workspace_id)
        if target.workspace_id != run.workspace_id:
            raise InvalidInput("The domain belongs to another workspace.", fields={"domain": ["Unknown domain."]})
        if by.agent is not None:
            require_visible_domain(by.agent, target)
        for item in items:
            plain_tags, _, _ = _scope_of(item)
            item_topic = (topic or (plain_tags[0] if plain_tags else "") or item.item_id)[:200]
            document = candidate_document(
                item,
                run,
                failure_class=failure_class,
                applies_to=applies_to or [],
                does_not_apply_to=does_not_apply_to or [],
            )
            try:
                parsed = promotion.parse_candidate_document(document)
                candidate, _ = promotion.submit_candidate(domain=target, topic=item_topic, document=parsed, by=by)
            except InvalidInput as exc:
                raise InvalidInput(
                    f"Bank item {item.kind}:{item.item_id} cannot be offered: {exc.detail}",
                    code=exc.code,
                    fields={"items": {item.item_id: exc.fields or [exc.detail]}},
                ) from None
            item.candidate = candidate
            item.save(update_fields=["candidate"])
            candidates.append(candidate)
    run.status, run.finished_at, run.end_reason = RunStatus.FINISHED, timezone.now(), END_FINISHED
    run.save(update_fields=["status", "finished_at", "end_reason"])
    record_event(
        actor=by,
        verb="run.finished",
        workspace_id=run.workspace_id,
        target=run,
        detail={"offer_candidates": offer_candidates, "candidates": [c.pk for c in candidates]},
    )
    return FinishResult(run=run, candidates=candidates)
