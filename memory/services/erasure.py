"""Erasure (issue 21): a workspace admin erases a subject — facts matching a selection and every
row derived from them — leaving only a tombstone in the audit trail.

`select_subject(workspace, selection)` reads: it returns the plan (the facts, and per kind the
rows that will be deleted, unlinked or scrubbed), which the preview shows exactly. `erase(plan,
reason, by)` writes it in one transaction: the facts are locked, the derived rows recomputed
under the lock (so a mention written between preview and confirm goes too), then deleted or
scrubbed, and one `subject.erased` event records who, when, why, the ids per kind and a SHA-256
of the erased contents — never the content.

Rows of apps above `memory` (remember review items) take part through `register(extension)`;
memory imports nothing above it (.importlinter).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.contrib.postgres.search import SearchQuery
from django.db import connection, transaction
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from memory import access, recalls
from memory.actors import Actor, require_actor
from memory.audit import record_event
from memory.caches import clear_caches
from memory.errors import EngramError, InsufficientPermission, StateConflict
from memory.models import (
    Agent,
    AuditEvent,
    BankItem,
    Candidate,
    Conflict,
    Episode,
    EpisodeFact,
    Fact,
    FactMention,
    FactStatus,
    HotMemory,
    Job,
    MemoryDomain,
    Policy,
    Workspace,
)
from memory.services.lifecycle import ChallengeReason, challenge_fact
from memory.services.tenancy import parse_domain_label

ERASED = "[erased]"
SELECTION_KINDS = ("ids", "domain", "search", "agent", "review")
MAX_IDS = 1000


class InvalidSelection(EngramError):
    code = "invalid_selection"
    status = 400


class NothingToErase(EngramError):
    code = "nothing_to_erase"
    status = 400

    def __init__(self) -> None:
        super().__init__("The selection matches no fact of this workspace: nothing would be erased.")


class SelectionChanged(StateConflict):
    code = "selection_changed"

    def __init__(self) -> None:
        super().__init__("The selection matches other facts than the preview showed; preview it again.")


def check_previewed(plan: ErasurePlan, previewed: Iterable[int] | None) -> None:
    """Refuse (409 selection_changed) when the selection now matches other facts than the
    preview listed: a person confirms exactly what they saw. None: no preview to compare."""
    if previewed is not None and set(previewed) != set(plan.fact_ids):
        raise SelectionChanged()


class ErasureForbidden(InsufficientPermission):
    code = "erasure_forbidden"

    def __init__(self) -> None:
        super().__init__("Only a workspace admin (a person) may erase; agents never can.")


# --- Selections ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Selection:
    """What to erase: fact ids; a domain (+ topic); a full-text query; an agent's writes; the
    facts stored from one remember review."""

    kind: str
    ids: tuple[int, ...] = ()
    domain: str = ""
    topic: str = ""
    query: str = ""
    agent: str = ""
    review: int | None = None

    def describe(self, *, tombstone: bool = False) -> dict[str, Any]:
        """The selection as typed; for the tombstone, a query or topic (which may quote the
        content) is replaced by its SHA-256."""
        values: dict[str, Any] = {
            "ids": list(self.ids),
            "domain": self.domain,
            "topic": self.topic,
            "query": self.query,
            "agent": self.agent,
            "review": self.review,
        }
        if tombstone:
            for name in ("topic", "query"):
                if values[name]:
                    values[f"{name}_sha256"] = hashlib.sha256(values.pop(name).encode("utf-8")).hexdigest()
        return {"kind": self.kind, **{k: v for k, v in values.items() if v not in ("", [], None)}}


def _bad(field_name: str, message: str) -> InvalidSelection:
    return InvalidSelection(f"The selection is not valid: {message}", fields={field_name: [message]})


def parse_selection(data: Any) -> Selection:
    """A Selection from its JSON form (`{"kind": "ids", "ids": [1, 2]}`, `{"kind": "domain",
    "domain": "repo:web/context", "topic": "…"}`, `{"kind": "search", "query": "…"}`, `{"kind":
    "agent", "agent": "coder-a"}`, `{"kind": "review", "review": 7}`). Raises InvalidSelection."""
    if not isinstance(data, dict):
        raise _bad("selection", "an object with a `kind` is expected.")
    kind = data.get("kind")
    if kind not in SELECTION_KINDS:
        raise _bad("kind", f"one of {', '.join(SELECTION_KINDS)}.")

    def text(name: str, *, required: bool, limit: int = 300) -> str:
        value = data.get(name, "")
        if value is None:
            value = ""
        if not isinstance(value, str) or len(value) > limit:
            raise _bad(name, f"a string of at most {limit} characters.")
        value = value.strip()
        if required and not value:
            raise _bad(name, "required for this kind of selection.")
        return value

    if kind == "ids":
        raw = data.get("ids")
        if isinstance(raw, str):
            raw = [p for p in raw.replace(",", " ").split() if p]
        if not isinstance(raw, list) or not raw or len(raw) > MAX_IDS:
            raise _bad("ids", f"a list of 1 to {MAX_IDS} fact ids.")
        ids: list[int] = []
        for value in raw:
            if isinstance(value, bool):
                raise _bad("ids", "fact ids are positive integers.")
            try:
                number = int(value)
            except (TypeError, ValueError):
                raise _bad("ids", "fact ids are positive integers.") from None
            if number <= 0 or number > 2**63 - 1:
                raise _bad("ids", "fact ids are positive integers.")
            ids.append(number)
        return Selection(kind="ids", ids=tuple(sorted(set(ids))))
    if kind == "domain":
        return Selection(kind="domain", domain=text("domain", required=True), topic=text("topic", required=False))
    if kind == "search":
        return Selection(kind="search", query=text("query", required=True, limit=500))
    if kind == "agent":
        return Selection(kind="agent", agent=text("agent", required=True, limit=100))
    raw_review = data.get("review")
    if isinstance(raw_review, bool) or not isinstance(raw_review, int | str):
        raise _bad("review", "a remember review id.")
    try:
        review = int(raw_review)
    except ValueError:
        raise _bad("review", "a remember review id.") from None
    if review <= 0 or review > 2**63 - 1:
        raise _bad("review", "a remember review id.")
    return Selection(kind="review", review=review)


# --- Extensions: rows of apps above memory ----------------------------------------------------
class ErasureExtension(Protocol):
    """Rows an app above `memory` keeps about facts (remember review items, …)."""

    def select(self, workspace: Workspace, selection: Selection) -> list[int] | None:
        """Fact ids for a selection kind this app owns, else None."""

    def derive(self, workspace: Workspace, fact_ids: set[int], texts: list[str]) -> Derived:
        """What of this app's rows goes with the facts (and the texts they hold)."""

    def apply(self, derived: Derived, texts: list[str]) -> None:
        """Delete or scrub what `derive` found (inside erase's transaction)."""


_extensions: list[ErasureExtension] = []


def register(extension: ErasureExtension) -> None:
    """Called from an app's ready(): its rows take part in every preview and erasure."""
    if not any(type(e) is type(extension) for e in _extensions):
        _extensions.append(extension)


@dataclass
class Derived:
    """Rows found for the erased facts: `deleted` go, `scrubbed` stay with their text removed;
    `texts` are further contents they hold (they are scrubbed wherever else they appear)."""

    deleted: dict[str, list[int]] = field(default_factory=dict)
    scrubbed: dict[str, list[int]] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)


# --- The plan ---------------------------------------------------------------------------------
@dataclass
class ErasurePlan:
    workspace: Workspace
    selection: Selection
    facts: list[Fact]
    deleted: dict[str, list[int]]
    scrubbed: dict[str, list[int]]
    unlinked: dict[str, list[int]]
    relinked: list[dict[str, Any]]
    texts: list[str]
    parts: list[tuple[ErasureExtension, Derived]] = field(default_factory=list)

    @property
    def fact_ids(self) -> list[int]:
        return [f.pk for f in self.facts]

    @property
    def is_empty(self) -> bool:
        return not self.facts

    def counts(self) -> dict[str, int]:
        """Rows per kind: `<model>` deleted, `<model>:scrubbed` kept without the text,
        `<model>:unlinked` keeping the row but losing its link to the facts, `fact:relinked`."""
        counts = {"memory.fact": len(self.facts)}
        counts.update({label: len(ids) for label, ids in self.deleted.items() if ids})
        counts.update({f"{label}:scrubbed": len(ids) for label, ids in self.scrubbed.items() if ids})
        counts.update({f"{label}:unlinked": len(ids) for label, ids in self.unlinked.items() if ids})
        if self.relinked:
            counts["memory.fact:relinked"] = len(self.relinked)
        return counts

    def as_dict(self) -> dict[str, Any]:
        """The preview, as the API and the page show it: counts per kind and the facts' texts."""
        return {
            "workspace": self.workspace.slug,
            "selection": self.selection.describe(),
            "counts": self.counts(),
            "facts": [
                {
                    "id": f.pk,
                    "domain": f.domain.label,
                    "topic": f.topic,
                    "content": f.content,
                    "status": f.status,
                    "superseded_by": f.superseded_by_id,
                }
                for f in self.facts
            ],
            "relinked": self.relinked,
        }


def _domain(workspace: Workspace, label: str) -> MemoryDomain:
    repo_slug, name = parse_domain_label(label)
    qs = MemoryDomain.objects.select_related("repo").filter(workspace=workspace, name=name)
    qs = qs.filter(repo__slug=repo_slug) if repo_slug else qs.filter(repo__isnull=True)
    found = qs.first()
    if found is None:
        raise _bad("domain", f"no domain {label!r} in this workspace.")
    return found


def _selected_ids(workspace: Workspace, selection: Selection) -> list[int]:
    facts = Fact.objects.filter(workspace=workspace)
    if selection.kind == "ids":
        return list(facts.filter(pk__in=selection.ids).values_list("pk", flat=True))
    if selection.kind == "domain":
        facts = facts.filter(domain=_domain(workspace, selection.domain))
        if selection.topic:
            facts = facts.filter(topic=selection.topic)
        return list(facts.values_list("pk", flat=True))
    if selection.kind == "search":
        # A plain full-text match over every fact of the workspace (superseded, archived and
        # hidden domains included), like the memory browser's search: the agents' hybrid ranking
        # would add facts that merely resemble the query (its semantic and graph voices).
        query = SearchQuery(selection.query, search_type="websearch", config="english")
        return list(facts.filter(search_vector=query).values_list("pk", flat=True))
    if selection.kind == "agent":
        agent = Agent.objects.filter(workspace=workspace, name=selection.agent).first()
        if agent is None:
            raise _bad("agent", f"no agent {selection.agent!r} in this workspace.")
        return list(facts.filter(created_by_agent=agent).values_list("pk", flat=True))
    for extension in _extensions:
        found = extension.select(workspace, selection)
        if found is not None:
            return list(facts.filter(pk__in=found).values_list("pk", flat=True))
    raise _bad("kind", f"selections of kind {selection.kind!r} are not available.")


def text_variants(texts: Iterable[str]) -> list[str]:
    """Each text as stored in a text column and inside JSON (escaped), longest first."""
    variants: set[str] = set()
    for text in texts:
        if not text:
            continue
        variants.add(text)
        variants.add(json.dumps(text, ensure_ascii=False)[1:-1])
        variants.add(json.dumps(text)[1:-1])
    return sorted(variants, key=lambda t: (-len(t), t))


def scrub_text(value: str, texts: list[str]) -> str:
    """`value` with every occurrence of the erased texts replaced by `[erased]`."""
    for text in texts:
        if text and text in value:
            value = value.replace(text, ERASED)
    return value


def scrub_json(value: Any, texts: list[str]) -> Any:
    """A JSON value with the erased texts replaced in every string (keys included)."""
    if isinstance(value, str):
        return scrub_text(value, texts)
    if isinstance(value, list):
        return [scrub_json(v, texts) for v in value]
    if isinstance(value, dict):
        return {scrub_text(str(k), texts): scrub_json(v, texts) for k, v in value.items()}
    return value


def json_holding(texts: list[str], column: str = "detail") -> Q:
    """Rows whose JSON `column` (as text) contains one of the texts (case-sensitive, as stored)."""
    condition = Q()
    for text in text_variants(texts):
        condition |= Q(**{f"_{column}_text__contains": text})
    return condition


def _ids_only(detail: Any) -> Any:
    """An audit detail reduced to ids: numbers, booleans and lists of them; strings dropped."""
    if isinstance(detail, dict):
        kept = {k: _ids_only(v) for k, v in detail.items()}
        return {k: v for k, v in kept.items() if v is not None and v != {} and v != []}
    if isinstance(detail, list):
        kept_list = [_ids_only(v) for v in detail]
        return [v for v in kept_list if v is not None]
    if isinstance(detail, bool | int | float):
        return detail
    return None


def _derive(workspace: Workspace, fact_ids: set[int], facts: list[Fact]) -> dict[str, Any]:
    """Every memory row derived from the facts, and the texts to scrub elsewhere."""
    ws = workspace.pk
    texts = [f.content for f in facts]
    mentions = FactMention.objects.filter(Q(fact_id__in=fact_ids) | Q(merged_fact_id__in=fact_ids))
    mention_rows = list(mentions.values_list("pk", "text"))
    texts += [t for _, t in mention_rows]
    hot = HotMemory.objects.filter(workspace_id=ws).filter(
        Q(consolidated_fact_id__in=fact_ids) | Q(content__in=set(texts))
    )
    hot_rows = list(hot.values_list("pk", "content"))
    texts += [t for _, t in hot_rows]
    origin = {f.origin_candidate_id for f in facts if f.origin_candidate_id}
    holds = Q()
    for text in set(texts):
        holds |= Q(proposed_memory__contains=text)
    candidates = Candidate.objects.filter(workspace_id=ws).filter(Q(fact_id__in=fact_ids) | Q(pk__in=origin) | holds)
    candidate_rows = list(candidates.values_list("pk", "proposed_memory"))
    candidate_ids = [pk for pk, _ in candidate_rows]
    texts += [t for _, t in candidate_rows]
    texts = list(dict.fromkeys(t for t in texts if t))
    conflicts = Conflict.objects.filter(workspace_id=ws).filter(
        Q(existing_id__in=fact_ids) | Q(proposed_id__in=fact_ids) | Q(winner_id__in=fact_ids) | Q(loser_id__in=fact_ids)
    )
    # Episodes that met the facts, and any whose title (a task or query) quotes an erased text.
    quoting = Q()
    for text in texts:
        quoting |= Q(title__contains=text)
    linked = set(EpisodeFact.objects.filter(fact_id__in=fact_ids).values_list("episode_id", flat=True))
    if texts:
        linked |= set(Episode.objects.filter(workspace_id=ws).filter(quoting).values_list("pk", flat=True))
    episode_ids = sorted(linked)
    policies = Policy.objects.filter(workspace_id=ws, derived_from__in=fact_ids).distinct()
    relinked = []
    for older in Fact.objects.filter(superseded_by_id__in=fact_ids).exclude(pk__in=fact_ids).order_by("pk"):
        successor = _successor(older.superseded_by_id, fact_ids)
        relinked.append({"fact": older.pk, "was": older.superseded_by_id, "now": successor})
    return {
        "texts": texts,
        "deleted": {
            "memory.factmention": sorted(pk for pk, _ in mention_rows),
            "memory.episodefact": sorted(EpisodeFact.objects.filter(fact_id__in=fact_ids).values_list("pk", flat=True)),
            "memory.hotmemory": sorted(pk for pk, _ in hot_rows),
            "memory.candidate": sorted(candidate_ids),
            "memory.bankitem": sorted(
                BankItem.objects.filter(candidate_id__in=candidate_ids).values_list("pk", flat=True)
            ),
            "memory.conflict": sorted(conflicts.values_list("pk", flat=True)),
        },
        "unlinked": {"memory.policy": sorted(policies.values_list("pk", flat=True))},
        "episodes": episode_ids,
        "candidate_ids": candidate_ids,
        "relinked": relinked,
    }


def _successor(fact_id: int | None, erased: set[int]) -> int | None:
    """The first fact after `fact_id` along the chain that is not erased (or None)."""
    seen: set[int] = set()
    while fact_id is not None and fact_id in erased and fact_id not in seen:
        seen.add(fact_id)
        fact_id = Fact.objects.filter(pk=fact_id).values_list("superseded_by_id", flat=True).first()
    return fact_id


def _audit_targets(deleted: dict[str, list[int]], fact_ids: Iterable[int]) -> Q:
    condition = Q(target_type="fact", target_id__in=list(fact_ids))
    for label, ids in deleted.items():
        if ids:
            condition |= Q(target_type=label.split(".")[1], target_id__in=ids)
    return condition


def _plan(workspace: Workspace, selection: Selection, fact_ids: list[int], *, lock: bool) -> ErasurePlan:
    qs = Fact.objects.filter(workspace=workspace, pk__in=fact_ids).select_related("domain__repo").order_by("pk")
    if lock:
        qs = qs.select_for_update(of=("self",))
    facts = list(qs)
    ids = {f.pk for f in facts}
    found = _derive(workspace, ids, facts)
    texts: list[str] = found["texts"]
    parts: list[tuple[ErasureExtension, Derived]] = []
    deleted: dict[str, list[int]] = found["deleted"]
    scrubbed: dict[str, list[int]] = {"memory.episode": found["episodes"]}
    for extension in _extensions:
        part = extension.derive(workspace, ids, texts)
        parts.append((extension, part))
        texts = list(dict.fromkeys(texts + [t for t in part.texts if t]))
        deleted.update(part.deleted)
        scrubbed.update(part.scrubbed)
    variants = text_variants(texts)
    audit = (
        AuditEvent.objects.filter(workspace=workspace)
        .annotate(_detail_text=Cast("detail", TextField()))
        .filter(_audit_targets(deleted, ids) | json_holding(texts))
    )
    jobs = Job.objects.filter(workspace=workspace).annotate(
        _report_text=Cast("report", TextField()), _arguments_text=Cast("arguments", TextField())
    )
    job_q = Q()
    for text in variants:
        job_q |= Q(_report_text__contains=text) | Q(_arguments_text__contains=text)
    scrubbed["memory.auditevent"] = sorted(audit.values_list("pk", flat=True)) if ids else []
    scrubbed["memory.job"] = sorted(jobs.filter(job_q).values_list("pk", flat=True)) if ids and variants else []
    # A memory run's bank item that quotes an erased text (an agent noted the fact during a run):
    # kept without the text (issue 39); one offered as a deleted candidate goes with it above.
    bank_q = Q()
    for text in variants:
        bank_q |= Q(content__contains=text)
    quoting = BankItem.objects.filter(run__workspace=workspace).exclude(pk__in=deleted.get("memory.bankitem", []))
    scrubbed["memory.bankitem"] = (
        sorted(quoting.filter(bank_q).values_list("pk", flat=True)) if ids and variants else []
    )
    return ErasurePlan(
        workspace=workspace,
        selection=selection,
        facts=facts,
        deleted=deleted,
        scrubbed=scrubbed,
        unlinked=found["unlinked"],
        relinked=found["relinked"],
        texts=texts,
        parts=parts,
    )


def select_subject(workspace: Workspace, selection: Selection) -> ErasurePlan:
    """The plan of what erasing `selection` in `workspace` removes; writes nothing. Raises
    InvalidSelection (unknown domain, agent or review)."""
    return _plan(workspace, selection, _selected_ids(workspace, selection), lock=False)


def content_hash(facts: Iterable[Fact], texts: Iterable[str]) -> str:
    """SHA-256 of the erased contents: the canonical JSON of `{"facts": [[id, topic, content]…]
    sorted by id, "texts": [every erased text, sorted]}` — whoever holds the content can check it."""
    body = {
        "facts": [[f.pk, f.topic, f.content] for f in sorted(facts, key=lambda f: f.pk)],
        "texts": sorted(set(texts)),
    }
    return hashlib.sha256(json.dumps(body, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()


def _forget_in_process(fact_ids: list[int]) -> None:
    """This process's recall counters of the erased facts and every cache that may hold a text of
    one (memory.caches); other processes drop theirs as their entries age out (README: Erasure)."""
    recalls.buffer.forget(fact_ids)
    clear_caches()


def erase(*, plan: ErasurePlan, reason: str, by: Actor) -> AuditEvent:
    """Erase what `plan` selected, recomputed under lock, in one transaction; returns the
    tombstone (`subject.erased`). Raises ErasureForbidden unless `by` is a person administering
    the workspace, InvalidSelection without a reason, NothingToErase if no fact is left."""
    if not require_actor(by).is_user or not access.is_workspace_admin(by.user, plan.workspace):
        raise ErasureForbidden()
    reason = (reason or "").strip()
    if not reason or len(reason) > 500:
        raise InvalidSelection(
            "Give the reason for the erasure (at most 500 characters).",
            code="reason_required",
            fields={"reason": ["Required, at most 500 characters."]},
        )
    # Episodes opened by recalls moments ago wait in this process's buffer: written first, so
    # the scan below sees their titles (issue 22).
    recalls.settle()
    with transaction.atomic():
        locked = _plan(plan.workspace, plan.selection, plan.fact_ids, lock=True)
        if locked.is_empty:
            raise NothingToErase()
        event = _erase_locked(locked, reason, by)
        ids = locked.fact_ids
        transaction.on_commit(lambda: _forget_in_process(ids))
        tables = compaction_tables(locked)
        with connection.cursor() as cursor:
            cursor.execute("SELECT txid_current()")
            xid = int(cursor.fetchone()[0])
        transaction.on_commit(lambda: _compact_later(tables, event.pk, xid))
    return event


def _compact_later(tables: list[str], event_id: int, xid: int) -> None:
    """The compaction as a Celery task (in-process without a broker, as every task); by name, as
    schedule_embedding does: memory.tasks wraps this module."""
    from celery import current_app

    current_app.tasks["memory.tasks.compact_after_erasure"].delay(tables, event_id, xid)


def _erase_locked(plan: ErasurePlan, reason: str, by: Actor) -> AuditEvent:
    ids = plan.fact_ids
    variants = text_variants(plan.texts)
    digest = content_hash(plan.facts, plan.texts)
    # Chain neighbours first: an older fact must not point at a row about to go.
    orphaned = [link["fact"] for link in plan.relinked if link["now"] is None]
    for link in plan.relinked:
        Fact.objects.filter(pk=link["fact"]).update(superseded_by_id=link["now"])
    # An older fact whose every successor goes is no longer superseded, but it is not believed
    # again behind a person's back: it comes back challenged (out of recall, in the review
    # queue) for someone to revalidate or deprecate.
    Fact.objects.filter(pk__in=orphaned).update(superseded_at=None, supersede_reason="")
    for older in Fact.objects.filter(pk__in=orphaned, status=FactStatus.ACTIVE).order_by("pk"):
        challenge_fact(fact=older, by=by, reason=ChallengeReason.ERASURE, detail="the fact that replaced it was erased")
    Fact.objects.filter(pk__in=ids).update(superseded_by=None, origin_candidate=None)
    Conflict.objects.filter(pk__in=plan.deleted["memory.conflict"]).delete()
    BankItem.objects.filter(pk__in=plan.deleted["memory.bankitem"]).delete()
    Fact.objects.filter(origin_candidate_id__in=plan.deleted["memory.candidate"]).update(origin_candidate=None)
    Candidate.objects.filter(pk__in=plan.deleted["memory.candidate"]).delete()
    HotMemory.objects.filter(pk__in=plan.deleted["memory.hotmemory"]).delete()
    FactMention.objects.filter(pk__in=plan.deleted["memory.factmention"]).delete()
    for policy in Policy.objects.filter(pk__in=plan.unlinked["memory.policy"]).order_by("pk"):
        policy.derived_from.remove(*ids)
    # Episode titles are the task or query of a dispatch or search that met the facts.
    Episode.objects.filter(pk__in=plan.scrubbed["memory.episode"]).update(title=ERASED)
    for extension, part in plan.parts:
        extension.apply(part, variants)
    Fact.objects.filter(pk__in=ids).delete()  # mentions, episode links, M2M rows go with them
    targets = _audit_targets(plan.deleted, ids)
    for event in AuditEvent.objects.filter(pk__in=plan.scrubbed["memory.auditevent"]).order_by("pk"):
        is_target = AuditEvent.objects.filter(pk=event.pk).filter(targets).exists()
        event.detail = _ids_only(event.detail) if is_target else scrub_json(event.detail, variants)
        event.save(update_fields=["detail"])
    for item in BankItem.objects.filter(pk__in=plan.scrubbed.get("memory.bankitem", [])).order_by("pk"):
        item.content = scrub_text(item.content, variants)
        item.tags = scrub_json(item.tags, variants)
        item.save(update_fields=["content", "tags"])
    for job in Job.objects.filter(pk__in=plan.scrubbed["memory.job"]).order_by("pk"):
        job.report = scrub_json(job.report, variants)
        job.arguments = scrub_json(job.arguments, variants)
        job.save(update_fields=["report", "arguments"])
    erased = {"memory.fact": ids, **{k: v for k, v in plan.deleted.items() if v}}
    return record_event(
        actor=by,
        verb="subject.erased",
        workspace_id=plan.workspace.pk,
        detail={
            "reason": reason,
            "selection": plan.selection.describe(tombstone=True),
            "erased": erased,
            "scrubbed": {k: v for k, v in plan.scrubbed.items() if v},
            "unlinked": {k: v for k, v in plan.unlinked.items() if v},
            "relinked": plan.relinked,
            "sha256": digest,
            "counts": plan.counts(),
        },
    )


# --- After the erasure: nothing left in the relation files (issue 39) ---------------------------
# A deleted or updated row stays on disk as a dead tuple until VACUUM, and VACUUM only marks its
# space free: its bytes stay in the page until another row happens to overwrite them (measured:
# after DELETE, VACUUM and CHECKPOINT the erased text was still in the heap file and in its
# indexes). Only a rewrite of the table leaves it out, so the tables an erasure touched are
# rewritten with VACUUM FULL (new files; the old ones are removed at the checkpoint requested
# after). VACUUM FULL holds each table's ACCESS EXCLUSIVE lock while it runs — memory_fact with
# its HNSW graphs longest — which is why it runs after the erasure's commit, in the background
# (README, Erasure: how long, and what is left in WAL, backups and earlier exports).
# A table's rewrite waits at most this long for its lock, then tries again after LOCK_PAUSE, at
# most LOCK_ATTEMPTS times: while an ACCESS EXCLUSIVE request waits, PostgreSQL queues every later
# reader of the table behind it, so one long wait would stall searches as long as it lasted.
COMPACT_LOCK_TIMEOUT = "3s"
LOCK_ATTEMPTS = 5
LOCK_PAUSE_SECONDS = 5.0
# VACUUM FULL copies a deleted row into the new file while any snapshot taken before the delete
# may still read it (an open transaction, an autovacuum ANALYZE): the compaction first waits, at
# most this long, for every snapshot older than the erasure to end.
COMPACT_WAIT_SECONDS = 60.0
# A rewrite that still had to keep deleted rows (VACUUM VERBOSE counts more row versions kept
# than the table has rows: a snapshot no check saw) is run again, at most this many times.
COMPACT_ATTEMPTS = 5
_KEPT = re.compile(r"found \d+ removable, (\d+) nonremovable row versions")


def _rewrite(cursor: Any, table: str) -> bool:
    """VACUUM (FULL, ANALYZE) `table` until it keeps no row version beyond its live rows (at most
    COMPACT_ATTEMPTS times, two seconds apart); whether it got there."""
    import time

    notices: list[str] = []
    raw = connection.connection
    handler = lambda diagnostic: notices.append(diagnostic.message_primary or "")  # noqa: E731
    raw.add_notice_handler(handler)
    try:
        for attempt in range(COMPACT_ATTEMPTS):
            notices.clear()
            cursor.execute(f'VACUUM (FULL, ANALYZE, VERBOSE) "{table}"')
            kept = sum(int(m.group(1)) for n in notices if (m := _KEPT.search(n)))
            cursor.execute(f'SELECT count(*) FROM "{table}"')  # noqa: S608 -- a table name Django knows
            if kept <= cursor.fetchone()[0]:
                return True
            if attempt + 1 < COMPACT_ATTEMPTS:
                time.sleep(2.0)
        return False
    finally:
        raw.remove_notice_handler(handler)


def compaction_tables(plan: ErasurePlan) -> list[str]:
    """The tables whose rows the erasure deleted, scrubbed or unlinked (their many-to-many
    tables too), memory_fact first."""
    from django.apps import apps

    labels = ["memory.fact", *plan.deleted, *plan.scrubbed, *plan.unlinked]
    for _, part in plan.parts:
        labels += [*part.deleted, *part.scrubbed]
    tables: list[str] = []
    for label in dict.fromkeys(labels):
        model = apps.get_model(label)
        tables.append(model._meta.db_table)
        tables += [f.remote_field.through._meta.db_table for f in model._meta.local_many_to_many]
    return list(dict.fromkeys(tables))


def _rewrite_when_locked(cursor: Any, table: str) -> str | None:
    """_rewrite `table`, trying again LOCK_PAUSE_SECONDS later while its lock is not granted within
    COMPACT_LOCK_TIMEOUT (at most LOCK_ATTEMPTS times); why it failed, or None."""
    import time

    from django.db import DatabaseError, OperationalError

    for attempt in range(1, LOCK_ATTEMPTS + 1):
        try:
            if _rewrite(cursor, table):
                return None
            return f"deleted rows still visible to a snapshot after {COMPACT_ATTEMPTS} rewrites"
        except OperationalError as error:  # lock_timeout: another session holds the table
            if attempt == LOCK_ATTEMPTS:
                return f"{str(error).splitlines()[0]} ({attempt} attempts)"
            time.sleep(LOCK_PAUSE_SECONDS)
        except DatabaseError as error:
            return str(error).splitlines()[0]
    return None


def _older_snapshots(xid: int) -> int:
    """How many other sessions hold a snapshot taken before transaction `xid`, or run a transaction
    begun before it — of any database: sessions of other databases were seen to hold the deleted
    rows back too (a rewrite kept them with none of this database's sessions older)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
            " AND (age(backend_xmin) >= age(%s::text::xid) OR age(backend_xid) >= age(%s::text::xid))",
            [str(xid % 2**32)] * 2,
        )
        return int(cursor.fetchone()[0])


def compact(tables: list[str], *, event_id: int | None = None, xid: int | None = None) -> dict[str, Any]:
    """Rewrite `tables` (VACUUM FULL, ANALYZE) and request a checkpoint; outside any transaction.
    With `xid` (the erasure's transaction), first wait up to COMPACT_WAIT_SECONDS for the
    snapshots older than it to end. Records `subject.erasure_compacted` (tables, seconds, each
    failure, older snapshots still open, the checkpoint) and returns its detail. A table whose
    lock is not granted within COMPACT_LOCK_TIMEOUT, or a checkpoint the database role may not
    request, is reported, not raised."""
    import time

    from django.db import DatabaseError

    from memory.models import AuditEvent

    if connection.in_atomic_block:  # VACUUM cannot run in a transaction (a test running on_commit in its own)
        return {"tables": tables, "skipped": "inside a transaction"}
    known = set(connection.introspection.table_names())
    began = time.monotonic()
    failed: dict[str, str] = {}
    older = _older_snapshots(xid) if xid is not None else 0
    while older and time.monotonic() - began < COMPACT_WAIT_SECONDS:
        time.sleep(0.2)
        older = _older_snapshots(xid) if xid is not None else 0
    with connection.cursor() as cursor:
        cursor.execute(f"SET lock_timeout = '{COMPACT_LOCK_TIMEOUT}'")
        for table in tables:
            if table not in known:  # only names Django knows reach the SQL below
                continue
            if (failure := _rewrite_when_locked(cursor, table)) is not None:
                failed[table] = failure
        cursor.execute("RESET lock_timeout")
        try:
            cursor.execute("CHECKPOINT")
            checkpoint = "requested"
        except DatabaseError as error:
            checkpoint = f"not requested: {str(error).splitlines()[0]}"
    detail = {
        "tables": [t for t in tables if t in known],
        "failed": failed,
        "checkpoint": checkpoint,
        "older_snapshots": older,
        "seconds": round(time.monotonic() - began, 3),
    }
    workspace_id = None
    if event_id is not None:
        workspace_id = AuditEvent.objects.filter(pk=event_id).values_list("workspace_id", flat=True).first()
    record_event(
        actor=Actor.system("erasure"),
        verb="subject.erasure_compacted",
        workspace_id=workspace_id,
        detail={**detail, "erasure_event": event_id},
    )
    return detail
