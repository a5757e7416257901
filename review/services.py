"""Remember reviews (SPEC §8): submission, the reviewer's edits, approval, rejection, consumption.

States: pending → approved | rejected → consumed, and nothing else. An agent's session has at
most one live review (not yet consumed): a second submission answers that one and writes nothing
(`join_or_submit_review`; the database holds the rule too). Each write locks the review row,
re-checks its state, and records its audit event in the same transaction. Approval
stores each selected item through memory's write path (propose_fact: re-mention and conflict
rules apply); the vectors are computed before the transaction, never inside it.

Choices this module makes where SPEC §8 leaves room:
- `human_edited` means the reviewer changed the note (not only its layer or rationale); it also
  makes the fact's veracity `human_stated`, else `agent_inferred`.
- memory_type: `profile` for user/profile, `convention` for project/context and
  domain/knowledge (a file kept for reuse is "how things are done here"; decays slowly).
- The topic is what the note is about, not where it came from (the path stays as `source_file`,
  its provenance): the topic of a live fact of the target domain kept earlier from the same file,
  else of the live fact the note is closest to (cosine ≥ ENGRAM_CONTRADICTION_THRESHOLD), so a
  note repeating what memory already says meets it (re-mention or conflict) instead of standing
  beside it; else one derived from the note's first heading or clause (`topic_from_text`).
- A layer mapped per repo (project/context → `repo:<slug>/context`) falls back to the
  workspace-wide domain of that name when the review names no repo. A missing domain is
  created (with the default grants of SPEC §2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from pgvector.django import CosineDistance

from memory.actors import Actor, require_actor
from memory.audit import record_event
from memory.embeddings import Meaning, embed_texts, fact_text
from memory.errors import InsufficientPermission, InvalidInput, StateConflict
from memory.metrics import observe_review_latency
from memory.models import Agent, Fact, MemoryDomain, MemoryType, Repo, ValidatedBy, Veracity, Workspace
from memory.services.conflicts import lock_topics
from memory.services.facts import (
    FactInput,
    create_episode,
    embed_live_without_vectors,
    propose_fact_locked,
    read_before_locking,
)
from memory.services.locking import Replan, write_planned
from memory.services.tenancy import create_domain
from review.access import reviews_for, undecidable_layers
from review.errors import ReviewAlreadyConsumed, ReviewAlreadyResolved, ReviewNotFound, ReviewStillPending
from review.models import (
    DEFAULT_LAYER_MAPPING,
    LayerMapping,
    RememberLayer,
    RememberReview,
    ReviewItem,
    ReviewStatus,
)
from review.parsing import MAX_RATIONALE_CHARS, clean_text, parse_remember_output

SOURCE = "remember_agent_human_approved"
ORIGIN = "remember_review"
FILE_BODY_CHARS = 15_000
SESSION_ID_MAX = 200
REVIEWER_NOTE_MAX = 2_000
TOPIC_MAX = 200
ONE_LIVE_CONSTRAINT = "remember_review_one_live_per_session"

LAYER_MEMORY_TYPE = {
    RememberLayer.USER_PROFILE.value: MemoryType.PROFILE.value,
    RememberLayer.PROJECT_CONTEXT.value: MemoryType.CONVENTION.value,
    RememberLayer.DOMAIN_KNOWLEDGE.value: MemoryType.CONVENTION.value,
}


def note_max_chars() -> int:
    return int(settings.ENGRAM_FACT_MAX_CHARS)


# --- Access ------------------------------------------------------------------------------------
def check_access(review: RememberReview, by: Actor) -> None:
    """An agent acts on its own reviews only (they carry its session's files), people within
    their memberships (superusers anywhere). Anything else is reported as not found, like the
    pages and the API do (`RememberReview.objects.for_agent` / `access.restrict`)."""
    by = require_actor(by)
    if by.agent is not None:
        if by.agent.workspace_id != review.workspace_id or by.agent.pk != review.agent_id:
            raise ReviewNotFound(review.pk)
        return
    if by.is_system:
        return
    # The one rule for people (access.restrict via review.access.reviews_for; superusers see all).
    if not reviews_for(by.user, RememberReview.objects.filter(pk=review.pk)).exists():
        raise ReviewNotFound(review.pk)


def check_layers(review: RememberReview, by: Actor, layers: set[str]) -> None:
    """Refuse a person who may not decide the domain items of these layers land in (issue 16):
    such items wait for a reviewer of that domain or a workspace admin."""
    by = require_actor(by)
    if not by.is_user:
        return
    user = by.user
    refused = undecidable_layers(user, review, layers)
    if refused:
        labels = sorted(
            target_label(workspace_id=review.workspace_id, layer=layer, repo=review.repo) for layer in refused
        )
        raise InsufficientPermission(
            f"You may not decide items stored in {', '.join(labels)}: a reviewer of those domains or a "
            "workspace admin decides this review.",
            code="domain_not_yours",
        )


def _lock(review: RememberReview) -> RememberReview:
    return RememberReview.objects.select_for_update(of=("self",)).select_related("repo", "workspace").get(pk=review.pk)


def _lock_pending(review: RememberReview) -> RememberReview:
    locked = _lock(review)
    if not locked.is_pending:
        raise ReviewAlreadyResolved(locked.pk, locked.status)
    return locked


# --- Layer → domain ---------------------------------------------------------------------------
def ensure_layer_mappings(*, workspace: Workspace, by: Actor) -> list[LayerMapping]:
    """Give the workspace a mapping row per layer (the SPEC §8 defaults) where it has none, so
    admins see what applies and can remap it. Existing rows are left alone."""
    have = set(LayerMapping.objects.filter(workspace=workspace).values_list("layer", flat=True))
    missing = [
        LayerMapping(workspace=workspace, layer=layer, domain_name=name, per_repo=per_repo)
        for layer, (name, per_repo) in DEFAULT_LAYER_MAPPING.items()
        if layer not in have
    ]
    if missing:
        LayerMapping.objects.bulk_create(missing, ignore_conflicts=True)
        record_event(
            actor=by,
            verb="layer_mapping.defaults_created",
            workspace_id=workspace.pk,
            target=workspace,
            detail={m.layer: str(m) for m in missing},
        )
    return list(LayerMapping.objects.filter(workspace=workspace))


@transaction.atomic
def set_layer_mapping(*, workspace: Workspace, layer: str, domain_name: str, per_repo: bool, by: Actor) -> LayerMapping:
    """Map a layer to a domain name for the workspace (audited with the previous target)."""
    if layer not in RememberLayer.values:
        raise InvalidInput("Unknown layer.", code="invalid_layer", fields={"layer": [", ".join(RememberLayer.values)]})
    if not domain_name or len(domain_name) > 64:
        raise InvalidInput("A domain name is required.", fields={"domain_name": ["1–64 characters (a slug)."]})
    mapping = LayerMapping.objects.select_for_update().filter(workspace=workspace, layer=layer).first()
    before = str(mapping) if mapping else f"{layer} → default"
    if mapping is None:
        mapping = LayerMapping.objects.create(
            workspace=workspace, layer=layer, domain_name=domain_name, per_repo=per_repo
        )
    else:
        mapping.domain_name, mapping.per_repo, mapping.updated_at = domain_name, per_repo, timezone.now()
        mapping.save(update_fields=["domain_name", "per_repo", "updated_at"])
    record_event(
        actor=by,
        verb="layer_mapping.changed",
        workspace_id=workspace.pk,
        target=mapping,
        detail={"from": before, "to": str(mapping)},
    )
    return mapping


def mapping_target(*, workspace_id: int, layer: str, repo: Repo | None) -> tuple[str, Repo | None]:
    """(domain name, repo or None) that `layer` maps to: the workspace's row, else the default."""
    row = LayerMapping.objects.filter(workspace_id=workspace_id, layer=layer).first()
    name, per_repo = (row.domain_name, row.per_repo) if row else DEFAULT_LAYER_MAPPING[layer]
    return name, (repo if per_repo else None)


def target_label(*, workspace_id: int, layer: str, repo: Repo | None) -> str:
    """The domain label an item of `layer` would be stored in, e.g. `repo:web/context`."""
    name, scoped = mapping_target(workspace_id=workspace_id, layer=layer, repo=repo)
    return f"repo:{scoped.slug}/{name}" if scoped is not None else name


def _domain_for(review: RememberReview, layer: str, by: Actor, *, create: bool) -> MemoryDomain | None:
    name, repo = mapping_target(workspace_id=review.workspace_id, layer=layer, repo=review.repo)
    if not create:
        return MemoryDomain.objects.filter(workspace_id=review.workspace_id, repo=repo, name=name).first()
    return create_domain(workspace=review.workspace, repo=repo, name=name, by=by)


# --- Submission ------------------------------------------------------------------------------
SUBMIT_ATTEMPTS = 3


@dataclass(frozen=True)
class Submission:
    """What a submission led to: the session's live review, and whether this submission created it."""

    review: RememberReview
    created: bool


def live_review(agent: Agent, session_id: str) -> RememberReview | None:
    """The agent's review of `session_id` not yet consumed (pending, approved or rejected), if any:
    there is at most one (constraint `remember_review_one_live_per_session`)."""
    return RememberReview.objects.for_agent(agent).live().filter(session_id=session_id).first()


def submit_review(
    *, agent: Agent, session_id: str, output: str, files: Mapping[str, str] | None = None, repo: str | None = None
) -> RememberReview:
    """The session's live review: a new pending one, or the one already live (join_or_submit_review)."""
    return join_or_submit_review(agent=agent, session_id=session_id, output=output, files=files, repo=repo).review


def join_or_submit_review(
    *, agent: Agent, session_id: str, output: str, files: Mapping[str, str] | None = None, repo: str | None = None
) -> Submission:
    """A pending review of what the remember sub-agent nominated (parsing per SPEC §8) — unless the
    agent's session already has a live review: that one is answered (created False), unchanged, and
    nothing is written. Of concurrent submissions one creates the review; the others answer it.

    Raises InvalidInput: `session_id` empty or over 200 characters, `unknown_repo` for a repo the
    workspace does not have, and, when no review is live, `no_review_items` when neither a JSON
    block nor any file path yields an item. Writes nothing then."""
    session_id = clean_text(session_id or "").strip()
    if not session_id or len(session_id) > SESSION_ID_MAX:
        raise InvalidInput("A session id is required.", fields={"session_id": [f"1–{SESSION_ID_MAX} characters."]})
    repo_row = None
    if repo:
        repo_row = Repo.objects.filter(workspace_id=agent.workspace_id, slug=repo).first()
        if repo_row is None:
            raise InvalidInput(
                f"No repo {repo!r} in this workspace.", code="unknown_repo", fields={"repo": ["Unknown repo."]}
            )
    live = live_review(agent, session_id)
    if live is not None:
        return Submission(live, created=False)
    parsed = parse_remember_output(output, files)
    if not parsed.items:
        raise InvalidInput(
            "The remember output nominates no file: no JSON `recommendations` item and no file path in the text.",
            code="no_review_items",
            fields={"output": ["No recommendation and no file path found."]},
        )
    for _ in range(SUBMIT_ATTEMPTS):
        try:
            # Its own transaction, or a savepoint in the caller's: a refused insert undoes it alone.
            review = _create_review(agent=agent, session_id=session_id, output=output, repo=repo_row, parsed=parsed)
            return Submission(review, created=True)
        except IntegrityError as exc:
            if not _breaks_one_live(exc):
                raise
        # A concurrent submission wrote the session's review since we looked: answer it (unless it
        # was consumed in the meantime, then try again).
        live = live_review(agent, session_id)
        if live is not None:
            return Submission(live, created=False)
    raise RuntimeError(f"Could not submit a review for session {session_id!r} in {SUBMIT_ATTEMPTS} attempts.")


def _breaks_one_live(exc: IntegrityError) -> bool:
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == ONE_LIVE_CONSTRAINT


@transaction.atomic
def _create_review(*, agent: Agent, session_id: str, output: str, repo: Repo | None, parsed: Any) -> RememberReview:
    by = Actor.of_agent(agent)
    review = RememberReview.objects.create(
        workspace_id=agent.workspace_id,
        agent=agent,
        repo=repo,
        session_id=session_id,
        raw_output=clean_text(output),
        used_fallback=parsed.used_fallback,
    )
    ReviewItem.objects.bulk_create(
        [
            ReviewItem(
                review=review,
                order=index,
                path=item.path,
                bytes=item.bytes,
                recommended_layer=item.recommended_layer,
                rationale=item.rationale,
                suggested_memory_content=item.suggested_memory_content,
                file_text=item.file_text,
                source=item.source,
            )
            for index, item in enumerate(parsed.items)
        ]
    )
    ensure_layer_mappings(workspace=agent.workspace, by=by)
    record_event(
        actor=by,
        verb="remember_review.submitted",
        workspace_id=agent.workspace_id,
        target=review,
        detail={
            "session_id": session_id,
            "repo": repo.slug if repo else None,
            "paths": [item.path for item in parsed.items],
            "used_fallback": parsed.used_fallback,
        },
    )
    return review


# --- The reviewer's edits ----------------------------------------------------------------------
def _normalise_newlines(text: str) -> str:
    # Browsers submit textareas with CRLF; the suggestion has LF. Same text must compare equal.
    return clean_text(text).replace("\r\n", "\n").replace("\r", "\n")


@transaction.atomic
def update_item(
    *,
    item: ReviewItem,
    by: Actor,
    selected: bool | None = None,
    layer: str | None = None,
    rationale: str | None = None,
    content: str | None = None,
) -> ReviewItem:
    """Save a reviewer's choice for one item at once (a refresh loses nothing). None = unchanged.

    Raises ReviewAlreadyResolved once the review left pending, InvalidInput for a bad layer or
    a note longer than a fact may be."""
    check_access(item.review, by)
    review = _lock_pending(item.review)
    errors: dict[str, list[str]] = {}
    if layer is not None and layer not in RememberLayer.values:
        errors["layer"] = [f"One of {', '.join(RememberLayer.values)}."]
    if rationale is not None and len(rationale) > MAX_RATIONALE_CHARS:
        errors["rationale"] = [f"At most {MAX_RATIONALE_CHARS} characters."]
    if content is not None and len(content) > note_max_chars():
        errors["content"] = [f"At most {note_max_chars()} characters."]
    if errors:
        raise InvalidInput("The edit has invalid fields; see `fields`.", code="invalid_review_edit", fields=errors)
    item = ReviewItem.objects.select_for_update().get(pk=item.pk, review=review)
    old_layer = item.layer
    changed: list[str] = []
    if selected is not None and selected != item.selected:
        item.selected = selected
        changed.append("selected")
    if layer is not None:
        new_layer = "" if layer == item.recommended_layer else layer
        if new_layer != item.edited_layer:
            item.edited_layer = new_layer
            changed.append("layer")
    if rationale is not None:
        rationale = _normalise_newlines(rationale)
        if rationale != item.effective_rationale:
            item.edited_rationale = rationale
            changed.append("rationale")
    if content is not None:
        content = _normalise_newlines(content)
        if content != item.note:
            item.edited_content = content
            changed.append("content")
    if changed:
        # Only a person who may decide both the item's domain and its new one changes it.
        check_layers(review, by, {old_layer, item.layer})
        item.updated_at = timezone.now()
        item.save(update_fields=["selected", "edited_layer", "edited_rationale", "edited_content", "updated_at"])
        record_event(
            actor=by,
            verb="remember_review.item_edited",
            workspace_id=review.workspace_id,
            target=review,
            detail={"item": item.pk, "path": item.path, "changed": changed, "selected": item.selected},
            # Seen by the people of the domain the item lands in (when it exists yet).
            domain=_domain_for(review, item.layer, by, create=False),
        )
    return item


@transaction.atomic
def set_reviewer_note(*, review: RememberReview, by: Actor, note: str) -> RememberReview:
    """The reviewer's note to the agent, saved as it is typed; it goes into the resolution."""
    check_access(review, by)
    locked = _lock_pending(review)
    note = _normalise_newlines(note).strip()
    if len(note) > REVIEWER_NOTE_MAX:
        raise InvalidInput("The note is too long.", fields={"reviewer_note": [f"At most {REVIEWER_NOTE_MAX}."]})
    if note != locked.reviewer_note:
        locked.reviewer_note = note
        locked.save(update_fields=["reviewer_note"])
        record_event(actor=by, verb="remember_review.note_edited", workspace_id=locked.workspace_id, target=locked)
    return locked


# --- Resolution ------------------------------------------------------------------------------
def item_body(item: ReviewItem) -> str:
    """What approval stores: the reviewer's note (the suggestion unless edited), else the first
    15,000 characters of the file; empty means the item is skipped."""
    note = item.note.strip()
    if note:
        return note
    return item.file_text[: min(FILE_BODY_CHARS, note_max_chars())].strip()


TOPIC_WORDS = 8
_MARKUP = re.compile(r"^[\s#>*+\-`|]+|[`*]+")
_CLAUSE_END = re.compile(r"[.;:!?—](?:\s|$)|\s[-–]\s")


def topic_from_text(text: str) -> str:
    """A topic for a note that meets no live fact: its first non-empty line's first clause, without
    markdown marks, in lower case, at most TOPIC_WORDS words (`Ingest runs as a Celery worker; …`
    → `ingest runs as a celery worker`)."""
    for line in text.splitlines():
        line = _MARKUP.sub("", line).strip()
        if not any(ch.isalnum() for ch in line):
            continue
        clause = _CLAUSE_END.split(line, maxsplit=1)[0]
        words = clause.split()[:TOPIC_WORDS]
        topic = " ".join(words).strip(" ,.;:!?\"'()[]").lower()
        if topic:
            return topic[:TOPIC_MAX]
    return "remembered note"


def _topic_for(item: ReviewItem, body: str, domain: MemoryDomain | None, vector: list[float]) -> str:
    """Where the note meets memory (see the module docstring): an earlier note of the same file,
    else the closest live fact of the domain, else a topic of its own."""
    if domain is not None:
        live = Fact.objects.live().filter(domain=domain)
        same_file = (
            live.filter(source_file=item.path).order_by("-last_mentioned_at", "-pk").values_list("topic", flat=True)
        )
        if topic := same_file.first():
            return topic
        nearest = (
            live.filter(embedding__isnull=False)
            .annotate(distance=CosineDistance("embedding", vector))
            .order_by("distance", "pk")
            .values_list("topic", "distance")
            .first()
        )
        if nearest is not None and 1 - nearest[1] >= settings.ENGRAM_CONTRADICTION_THRESHOLD:
            return nearest[0]
    return topic_from_text(body)


@dataclass
class _Planned:
    item_id: int
    text: str
    vector: Meaning
    topic: str
    layer: str


def _prepare_vectors(review: RememberReview, by: Actor) -> dict[int, _Planned]:
    """Outside any transaction: choose each note's topic (by its meaning, against the live facts
    of its domain), embed what approval is about to store, and give the live facts it will be
    compared with a vector, so the locked part runs no model inference."""
    items = [i for i in review.items.order_by("order") if i.selected]
    planned = [(item, item_body(item)) for item in items]
    planned = [(item, body) for item, body in planned if body]
    meanings = embed_texts([body for _, body in planned])
    topics: list[str] = []
    for (item, body), meaning in zip(planned, meanings, strict=True):
        domain = _domain_for(review, item.layer, by, create=False)
        topic = _topic_for(item, body, domain, meaning)
        topics.append(topic)
        if domain is not None:
            embed_live_without_vectors(domain.pk, topic)
    stored = embed_texts([fact_text(topic, body) for (_, body), topic in zip(planned, topics, strict=True)])
    vectors = [Meaning(s, m) for s, m in zip(stored, meanings, strict=True)]
    read_before_locking(
        [
            ((domain.pk, topic), body, vector)
            for (item, body), topic, vector in zip(planned, topics, vectors, strict=True)
            if (domain := _domain_for(review, item.layer, by, create=False)) is not None
        ]
    )
    return {
        item.pk: _Planned(item.pk, body, vector, topic, item.layer)
        for (item, body), vector, topic in zip(planned, vectors, topics, strict=True)
    }


def resolution_note(
    *,
    approved: bool,
    stored: list[dict[str, Any]],
    not_stored: list[str],
    reviewer: str,
    reviewer_note: str,
    withheld: list[str] | None = None,
) -> str:
    """The sentence the runtime folds into its final answer. review.selectors rebuilds it for
    an agent that may not read some stored facts: those are `withheld` (paths only)."""
    if approved:
        if stored:
            listed = "; ".join(f"{s['path']} → {s['domain']} (fact {s['fact_id']})" for s in stored)
            text = (
                f"{reviewer} approved the remember review: stored {len(stored)} file(s) in long-term memory: {listed}."
            )
        elif withheld:
            text = f"{reviewer} approved the remember review."
        else:
            text = f"{reviewer} approved the remember review, but no file was stored."
        if withheld:
            text += f" Stored where this agent cannot read it: {', '.join(withheld)}."
        if not_stored:
            text += f" Not stored: {', '.join(not_stored)}."
    else:
        text = f"{reviewer} rejected the remember review: nothing was stored in long-term memory."
    if reviewer_note:
        text += f" Reviewer's note: {reviewer_note}"
    return text


def _reviewer_label(by: Actor) -> str:
    return f"Reviewer {by.user.get_username()}" if by.user is not None else "A reviewer"


@dataclass(frozen=True)
class _Approval:
    """An approval planned outside the transaction: the review as read, each selected item's text
    and vector, and the domains its layers already have (locked first: memory.services.locking)."""

    review: RememberReview
    vectors: dict[int, _Planned]
    domain_ids: list[int]


def approve_review(*, review: RememberReview, by: Actor, reviewer_note: str | None = None) -> RememberReview:
    """Store each selected item as a fact, in one transaction, and resolve the review.

    Planned, locked and re-checked as every write of facts (memory.services.locking): an edit
    landing between the embedding and the lock sends approval back to embed again; a review edited
    faster than that is refused (409 `review_changed`) rather than embedded under the lock.
    Raises ReviewAlreadyResolved (409) when someone else resolved it first — with two reviewers
    approving at once, exactly one wins; the loser changes nothing."""
    check_access(review, by)

    def plan(_hint: None) -> _Approval:
        current = RememberReview.objects.select_related("repo", "workspace").get(pk=review.pk)
        if not current.is_pending:
            raise ReviewAlreadyResolved(current.pk, current.status)
        layers = {i.layer for i in current.items.all() if i.selected}
        check_layers(current, by, layers)
        domains = [_domain_for(current, layer, by, create=False) for layer in sorted(layers)]
        return _Approval(current, _prepare_vectors(current, by), [d.pk for d in domains if d is not None])

    def write(planned: _Approval) -> RememberReview:
        return _approve_locked(review=planned.review, by=by, planned=planned.vectors, reviewer_note=reviewer_note)

    changed = StateConflict("The review kept changing while it was being approved; try again.", code="review_changed")
    return write_planned(plan, write, domains=lambda planned: planned.domain_ids, changed=changed)


def _approve_locked(
    *, review: RememberReview, by: Actor, planned: dict[int, _Planned], reviewer_note: str | None
) -> RememberReview:
    """In approve_review's transaction, under the review's lock, with every text's vector computed
    before: raises Replan (and writes nothing) when an item changed since, so no model inference
    runs here."""
    review = _lock_pending(review)
    if reviewer_note is not None:
        review.reviewer_note = _normalise_newlines(reviewer_note).strip()[:REVIEWER_NOTE_MAX]
    items = list(ReviewItem.objects.select_for_update().filter(review=review).order_by("order"))
    bodies = {item.pk: item_body(item) for item in items if item.selected}
    layers = {item.pk: item.layer for item in items}
    if any(
        body and (item_id not in planned or planned[item_id].text != body or planned[item_id].layer != layers[item_id])
        for item_id, body in bodies.items()
    ):
        raise Replan()
    now = timezone.now()
    stored: list[dict[str, Any]] = []
    skipped: list[str] = []
    episode = None
    domains: dict[int, MemoryDomain] = {}
    if any(bodies.values()):
        episode = create_episode(
            workspace_id=review.workspace_id, by=by, kind="review", title=f"Remember review #{review.pk}"
        )
        for item in items:
            if bodies.get(item.pk):
                domain = _domain_for(review, item.layer, by, create=True)
                assert domain is not None
                domains[item.pk] = domain
        # Every topic this approval writes, locked up front in one order (see lock_topics).
        lock_topics((domains[item.pk].pk, planned[item.pk].topic) for item in items if item.pk in domains)
    for item in items:
        if not item.selected:
            continue
        body = bodies[item.pk]
        if not body:
            skipped.append(item.path)
            continue
        assert episode is not None
        domain = domains[item.pk]
        edited = item.note_edited
        result = propose_fact_locked(
            domain=domain,
            data=FactInput(
                topic=planned[item.pk].topic,
                content=body,
                memory_type=LAYER_MEMORY_TYPE[item.layer],
                veracity=Veracity.HUMAN_STATED if edited else Veracity.AGENT_INFERRED,
                episode_id=episode.pk,
                session_key=review.session_id,
                extra={
                    "source": SOURCE,
                    "source_file": item.path,
                    "source_layer": item.layer,
                    "rationale": item.effective_rationale,
                    "human_edited": edited,
                    "origin": ORIGIN,
                    "validated_by": ValidatedBy.HUMAN,
                    "last_validated_at": now,
                },
            ),
            by=by,
            vector=planned[item.pk].vector,
        )
        item.stored_fact = result.fact
        item.save(update_fields=["stored_fact"])
        stored.append(
            {
                "path": item.path,
                "fact_id": result.fact.pk,
                "domain": domain.label,
                "layer": item.layer,
                "outcome": result.outcome,
                "human_edited": edited,
            }
        )
    selected_paths = [i.path for i in items if i.selected]
    deselected = [i.path for i in items if not i.selected]
    review.resolution = {
        "approved": True,
        "selected_paths": selected_paths,
        "edits": {i.path: i.edits for i in items if i.edits},
        "stored_ids": [s["fact_id"] for s in stored],
        "stored": stored,
        "skipped_paths": skipped,
        "reviewer": by.user.get_username() if by.user is not None else by.label,
        "reviewer_note": review.reviewer_note,
        "note": resolution_note(
            approved=True,
            stored=stored,
            not_stored=[f"{p} (deselected)" for p in deselected] + [f"{p} (empty)" for p in skipped],
            reviewer=_reviewer_label(by),
            reviewer_note=review.reviewer_note,
        ),
    }
    _resolve(review, ReviewStatus.APPROVED, by, now)
    record_event(
        actor=by,
        verb="remember_review.approved",
        workspace_id=review.workspace_id,
        target=review,
        detail={
            "selected_paths": selected_paths,
            "stored_ids": review.resolution["stored_ids"],
            "skipped_paths": skipped,
            "edits": review.resolution["edits"],
        },
    )
    return review


def _resolve(review: RememberReview, status: str, by: Actor, now: Any) -> None:
    observe_review_latency("remember", review.created_at, now)
    review.status = status
    review.resolved_at = now
    review.resolved_by = by.user
    review.save(update_fields=["status", "resolved_at", "resolved_by", "resolution", "reviewer_note"])


@transaction.atomic
def reject_review(*, review: RememberReview, by: Actor, reviewer_note: str | None = None) -> RememberReview:
    """Resolve the review without storing anything; the reviewer's edits stay on the items and
    go into the audit event. Raises ReviewAlreadyResolved if it already left pending."""
    check_access(review, by)
    review = _lock_pending(review)
    check_layers(review, by, {i.layer for i in review.items.all()})
    if reviewer_note is not None:
        review.reviewer_note = _normalise_newlines(reviewer_note).strip()[:REVIEWER_NOTE_MAX]
    items = list(review.items.order_by("order"))
    edits = {i.path: i.edits for i in items if i.edits}
    review.resolution = {
        "approved": False,
        "selected_paths": [],
        "edits": edits,
        "stored_ids": [],
        "stored": [],
        "skipped_paths": [],
        "reviewer": by.user.get_username() if by.user is not None else by.label,
        "reviewer_note": review.reviewer_note,
        "note": resolution_note(
            approved=False, stored=[], not_stored=[], reviewer=_reviewer_label(by), reviewer_note=review.reviewer_note
        ),
    }
    _resolve(review, ReviewStatus.REJECTED, by, timezone.now())
    record_event(
        actor=by,
        verb="remember_review.rejected",
        workspace_id=review.workspace_id,
        target=review,
        detail={
            "edits": edits,
            "deselected": [i.path for i in items if not i.selected],
            "reviewer_note": review.reviewer_note,
        },
    )
    return review


@transaction.atomic
def consume_review(*, review: RememberReview, by: Actor) -> RememberReview:
    """The runtime folded the resolution into its answer: approved|rejected → consumed.

    Raises ReviewStillPending (409) while pending, ReviewAlreadyConsumed (409) the second time."""
    check_access(review, by)
    review = _lock(review)
    if review.status == ReviewStatus.PENDING:
        raise ReviewStillPending(review.pk)
    if review.status == ReviewStatus.CONSUMED:
        raise ReviewAlreadyConsumed(review.pk)
    previous = review.status
    review.status = ReviewStatus.CONSUMED
    review.consumed_at = timezone.now()
    review.save(update_fields=["status", "consumed_at"])
    record_event(
        actor=by,
        verb="remember_review.consumed",
        workspace_id=review.workspace_id,
        target=review,
        detail={"from": previous},
    )
    return review
