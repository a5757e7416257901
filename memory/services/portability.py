"""Export and import of one workspace as versioned JSON Lines (issue 21).

The file is a header line, then one JSON object per row: `{"type": "fact", "ref": 12, ...}`,
where `ref` is the row's primary key in the exporting instance and every reference to another
row is that row's `ref`. An import gives every row a new primary key and rewrites the
references, so a file can be loaded beside other workspaces. What never travels: agents' key
hashes (an imported agent's key must be issued again), people (named by username: an import
links to an existing user of that name, else leaves the reference empty and keeps the label),
memberships and per-object permissions, jobs, exposures and webhooks.

Each type is a `Section`: its model, how a row reaches its workspace, and what each of its
foreign keys points at. The fields are read from the model, so a column added later travels
without touching this file; a foreign key nobody mapped fails loudly. The review app adds its
own sections (`register_section`), since memory imports nothing above it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import IO, Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import DatabaseError, connection, models, transaction
from django.utils import timezone

from memory.actors import Actor
from memory.audit import record_event
from memory.errors import EngramError
from memory.models import (
    EMBEDDING_DIM,
    END_FINISHED,
    AccessGrant,
    Agent,
    AuditEvent,
    BankItem,
    Candidate,
    Conflict,
    Episode,
    EpisodeFact,
    Fact,
    FactMention,
    HotMemory,
    Intervention,
    MemoryDomain,
    MemoryRun,
    Observation,
    Policy,
    PromotionDecision,
    Replay,
    Repo,
    Role,
    RunStatus,
    WorkingMemory,
    Workspace,
    generate_key,
    hash_key,
)

FORMAT = "engram.workspace"
VERSION = 1
Progress = Callable[[int], object]


class PortabilityError(EngramError):
    """A file that cannot be imported (or a workspace that cannot be exported); nothing was written."""

    code = "invalid_workspace_file"

    def __init__(self, detail: str, *, line: int | None = None) -> None:
        super().__init__(f"line {line}: {detail}" if line else detail)
        self.line = line


@dataclass(frozen=True)
class Section:
    """One exported type. `scope` is the lookup from the model to its workspace's pk; `refs` maps
    every foreign key and many-to-many field (other than the workspace and people) to the type
    it points at; `exclude` names columns that never travel."""

    kind: str
    model: type[models.Model]
    scope: str
    refs: Mapping[str, str] = field(default_factory=dict)
    exclude: tuple[str, ...] = ()
    # Ids kept inside JSON columns (a review's resolution names its stored facts): `rewrite(row,
    # new_id)` replaces them on import; new_id(type, ref) raises KeyError for a ref not in the file.
    # It also brings a row of a file written before a column existed up to date.
    rewrite: Callable[[dict[str, Any], Callable[[str, Any], int]], None] | None = None
    # Prose the services write with a row's id in it ("lost a conflict on veracity to fact 12"):
    # column → the type named; "<type> <ref>" is rewritten to the new id once every row exists.
    prose: Mapping[str, str] = field(default_factory=dict)

    @cached_property
    def columns(self) -> list[models.Field]:
        """Plain columns: not the pk, not generated, not a relation, not excluded."""
        return [
            f
            for f in self.model._meta.concrete_fields
            if not f.primary_key
            and not f.is_relation
            and not isinstance(f, models.GeneratedField)
            and f.name not in self.exclude
        ]

    @cached_property
    def relations(self) -> list[tuple[models.ForeignKey, str]]:
        """Foreign keys → 'workspace', 'user' or the section type they point at."""
        out = []
        for f in self.model._meta.concrete_fields:
            if not f.is_relation or f.name in self.exclude:
                continue
            if f.related_model is Workspace:
                out.append((f, "workspace"))
            elif f.related_model is get_user_model():
                out.append((f, "user"))
            elif f.name in self.refs:
                out.append((f, self.refs[f.name]))
            else:
                raise ImproperlyConfigured(f"portability: {self.kind}.{f.name} points at nothing exported")
        return out  # type: ignore[return-value]

    @cached_property
    def many(self) -> list[tuple[models.ManyToManyField, str]]:
        out = []
        for f in self.model._meta.many_to_many:
            through = f.remote_field.through  # type: ignore[union-attr]
            if through is None or not through._meta.auto_created:
                continue  # an explicit through model is a section of its own (episode_fact)
            if f.name not in self.refs:
                raise ImproperlyConfigured(f"portability: {self.kind}.{f.name} points at nothing exported")
            out.append((f, self.refs[f.name]))
        return out  # type: ignore[return-value]

    def rows(self, workspace_id: int) -> models.QuerySet:
        qs = self.model._default_manager.filter(**{self.scope: workspace_id}).order_by("pk")
        return qs.prefetch_related(*(f.name for f, _ in self.many)) if self.many else qs


def _run_end(row: dict[str, Any], new_id: Callable[[str, Any], int]) -> None:
    """A file from before runs recorded why they ended and their last activity: its finished runs
    were finished by their agent, and a run's last known sign of life is its end, else its start."""
    if row.get("status") == RunStatus.FINISHED and not row.get("end_reason"):
        row["end_reason"] = END_FINISHED
    if "last_activity_at" not in row and (row.get("finished_at") or row.get("created_at")):
        row["last_activity_at"] = row.get("finished_at") or row.get("created_at")


_CORE: list[Section] = [
    Section("workspace", Workspace, "pk", exclude=("slug",)),
    Section("role", Role, "workspace"),
    Section("repo", Repo, "workspace"),
    Section("domain", MemoryDomain, "workspace", {"repo": "repo"}),
    Section("grant", AccessGrant, "role__workspace", {"role": "role", "domain": "domain"}),
    Section("agent", Agent, "workspace", {"role": "role"}, exclude=("key_hash", "key_hint")),
    Section("working_memory", WorkingMemory, "agent__workspace", {"agent": "agent"}),
    Section("observation", Observation, "workspace", {"agent": "agent"}),
    Section("episode", Episode, "workspace", {"agent": "agent"}),
    Section(
        "candidate",
        Candidate,
        "workspace",
        {"domain": "domain", "submitted_by_agent": "agent", "fact": "fact"},
    ),
    Section(
        "fact",
        Fact,
        "workspace",
        {
            "domain": "domain",
            "superseded_by": "fact",
            "origin_candidate": "candidate",
            "created_by_agent": "agent",
            "source_observations": "observation",
        },
        exclude=("embedding", "content_embedding", "embedded_at"),
        prose={"supersede_reason": "fact"},
    ),
    Section(
        "fact_mention",
        FactMention,
        "fact__workspace",
        {"fact": "fact", "agent": "agent", "episode": "episode", "merged_fact": "fact"},
    ),
    Section("episode_fact", EpisodeFact, "episode__workspace", {"episode": "episode", "fact": "fact"}),
    Section(
        "conflict",
        Conflict,
        "workspace",
        {
            "domain": "domain",
            "existing": "fact",
            "proposed": "fact",
            "winner": "fact",
            "loser": "fact",
            "question": "conflict",
        },
    ),
    Section(
        "policy",
        Policy,
        "workspace",
        {
            "domain": "domain",
            "required_role": "role",
            "superseded_by": "policy",
            "created_by_agent": "agent",
            "derived_from": "fact",
        },
    ),
    Section("replay", Replay, "candidate__workspace", {"candidate": "candidate", "recorded_by_agent": "agent"}),
    Section(
        "promotion_decision",
        PromotionDecision,
        "candidate__workspace",
        {"candidate": "candidate", "decided_by_agent": "agent", "fact": "fact"},
        prose={"reason": "fact"},
    ),
    Section(
        "hot_memory",
        HotMemory,
        "workspace",
        {"agent": "agent", "domain": "domain", "consolidated_fact": "fact"},
    ),
    Section("memory_run", MemoryRun, "workspace", {"agent": "agent", "episode": "episode"}, rewrite=_run_end),
    Section("bank_item", BankItem, "run__workspace", {"run": "memory_run", "candidate": "candidate"}),
    Section("intervention", Intervention, "run__workspace", {"run": "memory_run"}),
]
# Last: its target ids are remapped through every other section.
_AUDIT = Section("audit_event", AuditEvent, "workspace", {"actor_agent": "agent", "domain": "domain"})
_EXTRA: list[Section] = []


def register_section(section: Section) -> None:
    """Add a type of an app above memory (the review app's remember reviews); it is exported after
    every core type and before the audit trail, so it may point at any core row."""
    if all(s.kind != section.kind for s in _EXTRA):
        _EXTRA.append(section)


def sections() -> list[Section]:
    return [*_CORE, *_EXTRA, _AUDIT]


def _by_model_name() -> dict[str, str]:
    return {s.model._meta.model_name or "": s.kind for s in sections()}


# --- Export -------------------------------------------------------------------------------
def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return value


class _Exporter:
    def __init__(self, workspace: Workspace, with_vectors: bool) -> None:
        self.workspace = workspace
        self.with_vectors = with_vectors
        self.known: dict[str, set[int]] = {
            s.kind: set(s.model._default_manager.filter(**{s.scope: workspace.pk}).values_list("pk", flat=True))
            for s in sections()
        }
        self.usernames: dict[int, str] = {}
        self.target_types = _by_model_name()

    def username(self, user_id: int | None) -> str | None:
        if user_id is None:
            return None
        if user_id not in self.usernames:
            user = get_user_model()._default_manager.filter(pk=user_id).first()
            self.usernames[user_id] = user.get_username() if user else ""
        return self.usernames[user_id] or None

    def ref(self, section: Section, f: models.ForeignKey, target: str, value: int | None, pk: int) -> int | None:
        if value is None or value in self.known[target]:
            return value
        if f.null:  # a reference out of the workspace (never made by the services) does not travel
            return None
        raise PortabilityError(f"{section.kind} {pk}: {f.name} points outside workspace {self.workspace.slug}")

    def row(self, section: Section, obj: models.Model) -> dict[str, Any]:
        out: dict[str, Any] = {"type": section.kind, "ref": obj.pk}
        for f in section.columns:
            out[f.name] = _encode(f.value_from_object(obj))
        for f, target in section.relations:
            value = getattr(obj, f.attname)
            if target == "workspace":
                continue
            out[f.name] = self.username(value) if target == "user" else self.ref(section, f, target, value, obj.pk)
        for m2m, target in section.many:
            out[m2m.name] = sorted(o.pk for o in getattr(obj, m2m.name).all() if o.pk in self.known[target])
        if section.kind == "fact" and self.with_vectors:
            vector = obj.embedding  # type: ignore[attr-defined]
            out["embedding"] = None if vector is None else [float(x) for x in vector]
            content = obj.content_embedding  # type: ignore[attr-defined]
            out["content_embedding"] = None if content is None else [float(x) for x in content]
            out["embedded_at"] = _encode(obj.embedded_at)  # type: ignore[attr-defined]
        if section.kind == "audit_event":
            out["target_id"] = self.audit_target(obj)  # type: ignore[arg-type]
        return out

    def audit_target(self, event: AuditEvent) -> int | None:
        target = "workspace" if event.target_type == "workspace" else self.target_types.get(event.target_type)
        if target is None or event.target_id not in self.known.get(target, ()):
            return None
        return event.target_id

    def lines(self, progress: Progress | None) -> Iterator[str]:
        counts = {t: len(ids) for t, ids in self.known.items()}
        header = {
            "format": FORMAT,
            "version": VERSION,
            "exported_at": timezone.now().isoformat(),
            "workspace": self.workspace.slug,
            "with_vectors": self.with_vectors,
            "counts": counts,
        }
        yield json.dumps(header, ensure_ascii=False)
        for section in sections():
            for obj in section.rows(self.workspace.pk).iterator(chunk_size=500):
                yield json.dumps(self.row(section, obj), ensure_ascii=False)
                if progress:
                    progress(1)


def export_workspace(
    *, workspace: Workspace, out: IO[str], by: Actor, with_vectors: bool = False, progress: Progress | None = None
) -> dict[str, int]:
    """Write `workspace` to `out` as JSON Lines, from one consistent snapshot; returns the count per
    type. Records a `workspace.exported` audit event afterwards (the file leaves the database)."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost:
            # The first statement of the transaction: every section is read from the same snapshot.
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        exporter = _Exporter(workspace, with_vectors)
        for line in exporter.lines(progress):
            out.write(line + "\n")
    counts = {t: len(ids) for t, ids in exporter.known.items()}
    with transaction.atomic():
        record_event(
            actor=by,
            verb="workspace.exported",
            workspace_id=workspace.pk,
            target=workspace,
            detail={"version": VERSION, "with_vectors": with_vectors, "counts": counts},
        )
    return counts


def count_rows(workspace: Workspace) -> int:
    """How many rows an export of `workspace` writes (for a progress bar)."""
    return sum(s.model._default_manager.filter(**{s.scope: workspace.pk}).count() for s in sections())


# --- Import -------------------------------------------------------------------------------
@dataclass
class ImportResult:
    workspace: Workspace
    counts: dict[str, int]
    ids: dict[str, dict[int, int]]
    agents: list[str]
    facts_without_vectors: list[int]


@dataclass
class _Row:
    line: int
    section: Section
    ref: int
    data: dict[str, Any]


def _header(text: str) -> dict[str, Any]:
    try:
        header = json.loads(text)
    except ValueError:
        raise PortabilityError("not an Engram workspace file (the header is not JSON)", line=1) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise PortabilityError(f"not an Engram workspace file (format is not {FORMAT!r})", line=1)
    if header.get("version") != VERSION:
        raise PortabilityError(
            f"format version {header.get('version')!r} is not supported: this Engram reads version {VERSION}",
            line=1,
        )
    if not isinstance(header.get("workspace"), str) or not isinstance(header.get("counts"), dict):
        raise PortabilityError("the header lacks `workspace` or `counts`", line=1)
    return header


def _vector(value: Any, line: int) -> list[float] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != EMBEDDING_DIM
        or not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value)
    ):
        raise PortabilityError(f"embedding must be null or {EMBEDDING_DIM} finite numbers", line=line)
    return [float(x) for x in value]


def _parse(lines: Iterable[str]) -> tuple[dict[str, Any], list[_Row]]:
    """Read and check every line before anything is written."""
    by_type = {s.kind: s for s in sections()}
    iterator = iter(lines)
    first = next(iterator, "")
    header = _header(first)
    rows: list[_Row] = []
    seen: set[tuple[str, int]] = set()
    for number, text in enumerate(iterator, start=2):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PortabilityError(f"not valid JSON ({exc.msg})", line=number) from None
        except (ValueError, RecursionError):
            raise PortabilityError("not valid JSON", line=number) from None
        if not isinstance(data, dict):
            raise PortabilityError("a row must be a JSON object", line=number)
        kind, ref = data.pop("type", None), data.pop("ref", None)
        section = by_type.get(kind) if isinstance(kind, str) else None
        if section is None:
            raise PortabilityError(f"unknown type {kind!r}", line=number)
        if not isinstance(ref, int) or isinstance(ref, bool):
            raise PortabilityError("`ref` must be an integer", line=number)
        if (kind, ref) in seen:
            raise PortabilityError(f"{kind} {ref} appears twice", line=number)
        seen.add((kind, ref))
        rows.append(_Row(number, section, ref, data))
    workspaces = [r for r in rows if r.section.kind == "workspace"]
    if len(workspaces) != 1:
        raise PortabilityError(f"the file must hold exactly one workspace row, not {len(workspaces)}")
    found = {s.kind: 0 for s in sections()}
    for row in rows:
        found[row.section.kind] += 1
    expected = header["counts"]
    differ = [t for t in sorted(set(expected) | set(found)) if expected.get(t, 0) != found.get(t, 0)]
    if differ:  # a truncated or edited file: refuse it rather than load part of a workspace
        raise PortabilityError(
            "the rows do not match the header's counts for "
            + ", ".join(f"{t} ({expected.get(t, 0)} announced, {found.get(t, 0)} found)" for t in differ)
        )
    _check_references(rows, seen)
    return header, rows


def _check_references(rows: list[_Row], seen: set[tuple[str, int]]) -> None:
    for row in rows:
        for f, target in row.section.relations:
            value = row.data.get(f.name)
            if target == "user" and value is not None and not isinstance(value, str):
                raise PortabilityError(f"{f.name} must be a username or null", line=row.line)
            if target in ("workspace", "user") or value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or (target, value) not in seen:
                raise PortabilityError(
                    f"{f.name} points at {target} {value!r}, which is not in the file", line=row.line
                )
        for m2m, target in row.section.many:
            values = row.data.get(m2m.name, [])
            if not isinstance(values, list) or any(
                not isinstance(v, int) or isinstance(v, bool) or (target, v) not in seen for v in values
            ):
                raise PortabilityError(f"{m2m.name} points at a {target} not in the file", line=row.line)


class _Importer:
    def __init__(self, rows: list[_Row], slug: str, by: Actor, progress: Progress | None) -> None:
        self.rows = rows
        self.slug = slug
        self.by = by
        self.progress = progress
        self.workspace = Workspace()  # the row inserted first; every other row points at it
        self.ids: dict[str, dict[int, int]] = {s.kind: {} for s in sections()}
        self.order = {s.kind: i for i, s in enumerate(sections())}
        self.users = self._users()
        self.deferred: list[tuple[_Row, models.Model]] = []
        self.to_embed: list[int] = []
        self.target_types = _by_model_name()

    def _users(self) -> dict[str, Any]:
        names = {
            value
            for row in self.rows
            for f, target in row.section.relations
            if target == "user" and isinstance(value := row.data.get(f.name), str)
        }
        names = {n for n in names if "\x00" not in n}  # PostgreSQL refuses NUL; no user has one
        model = get_user_model()
        field_name = model.USERNAME_FIELD
        return {getattr(u, field_name): u for u in model._default_manager.filter(**{f"{field_name}__in": names})}

    def build(self, row: _Row) -> tuple[models.Model, list[tuple[models.ForeignKey, str, int]]]:
        """An unsaved instance with its columns and the references already imported; returns the
        references to rows not imported yet (its own type or later types), set after every insert."""
        section, data = row.section, dict(row.data)
        known = (
            {f.name for f in section.columns}
            | {f.name for f, _ in section.relations}
            | {m.name for m, _ in section.many}
        )
        if section.kind == "fact":
            known |= {"embedding", "content_embedding", "embedded_at"}
        if section.kind == "audit_event":
            known.add("target_id")
        unknown = set(data) - known - {"workspace"}
        if unknown:
            raise PortabilityError(f"unknown field(s) for {section.kind}: {', '.join(sorted(unknown))}", line=row.line)
        for f in section.columns:
            if f.name not in data and not f.has_default() and not f.null:
                raise PortabilityError(f"{section.kind} lacks {f.name}", line=row.line)
        if section.rewrite is not None:
            try:
                section.rewrite(data, self.new_id)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise PortabilityError(
                    f"{section.kind}: an id inside a JSON field is not in the file ({exc})", line=row.line
                ) from None
        kwargs: dict[str, Any] = {}
        later: list[tuple[models.ForeignKey, str, int]] = []
        for f, target in section.relations:
            value = data.get(f.name)
            if target == "workspace":
                kwargs[f.attname] = self.workspace.pk
            elif target == "user":
                kwargs[f.attname] = self.users[value].pk if isinstance(value, str) and value in self.users else None
            elif value is None:
                kwargs[f.attname] = None
            elif self.order[target] >= self.order[section.kind]:
                later.append((f, target, value))
                kwargs[f.attname] = None
            else:
                kwargs[f.attname] = self.ids[target][value]
        if section.kind == "workspace":
            kwargs["slug"] = self.slug
        obj = section.model(**kwargs)
        for f in section.columns:
            if f.name in data:
                try:
                    setattr(obj, f.attname, f.to_python(data[f.name]))
                except ValidationError as exc:
                    raise PortabilityError(f"{section.kind} {f.name}: {_messages(exc)}", line=row.line) from None
                except (TypeError, ValueError, OverflowError):
                    raise PortabilityError(f"{section.kind} {f.name}: not a valid value", line=row.line) from None
        for f, target, _value in later:
            if not f.null:
                raise ImproperlyConfigured(f"portability: {section.kind}.{f.name} must come after {target}")
        if section.kind == "fact":
            self.fact_vector(obj, row)  # type: ignore[arg-type]
        if section.kind == "agent":
            self.without_key(obj)  # type: ignore[arg-type]
        if section.kind == "audit_event":
            obj.target_id = self.audit_target(obj, data.get("target_id"), row)  # type: ignore[attr-defined,arg-type]
        try:
            obj.clean_fields(
                exclude=[f.name for f, _ in section.relations] + ["embedding", "content_embedding", "embedded_at"]
            )
        except ValidationError as exc:
            raise PortabilityError(f"{section.kind}: {_messages(exc)}", line=row.line) from None
        except (TypeError, ValueError, OverflowError):
            raise PortabilityError(f"{section.kind}: a value of the wrong kind", line=row.line) from None
        return obj, later

    def new_id(self, kind: str, ref: Any) -> int:
        if not isinstance(ref, int) or isinstance(ref, bool):
            raise TypeError(f"{kind} ref {ref!r} is not an integer")
        return self.ids[kind][ref]

    def fact_vector(self, fact: Fact, row: _Row) -> None:
        vector = _vector(row.data.get("embedding"), row.line)
        fact.embedding = vector
        # files written before content vectors existed have none: the write path reads `embedding`
        fact.content_embedding = _vector(row.data.get("content_embedding"), row.line) if vector is not None else None
        if vector is not None:
            try:
                fact.embedded_at = Fact._meta.get_field("embedded_at").to_python(row.data.get("embedded_at"))
            except ValidationError as exc:
                raise PortabilityError(f"fact embedded_at: {_messages(exc)}", line=row.line) from None
            except (TypeError, ValueError, OverflowError):
                raise PortabilityError("fact embedded_at: not a valid value", line=row.line) from None
            fact.embedded_at = fact.embedded_at or timezone.now()

    @staticmethod
    def without_key(agent: Agent) -> None:
        # A key nobody knows, revoked: the agent exists, but only a newly issued key authenticates it.
        agent.key_hash, agent.key_hint = hash_key(generate_key()), ""
        agent.revoked_at = agent.revoked_at or timezone.now()

    def audit_target(self, event: AuditEvent, value: Any, row: _Row) -> int | None:
        if value is None:
            return None
        target = "workspace" if event.target_type == "workspace" else self.target_types.get(event.target_type)
        if target is None or not isinstance(value, int) or value not in self.ids.get(target, {}):
            raise PortabilityError(f"target_id points at {event.target_type} {value!r}, not in the file", line=row.line)
        return self.ids[target][value]

    def run(self) -> Workspace:
        """Insert every row, a type at a time in dependency order, then the references that point
        forward (supersession chains, a candidate's promoted fact) and the many-to-many links."""
        rows_by_type: dict[str, list[_Row]] = {s.kind: [] for s in sections()}
        for row in self.rows:
            rows_by_type[row.section.kind].append(row)
        for section in sections():
            for row in rows_by_type[section.kind]:
                self.insert(row)
        self.set_later_references()
        self.set_many()
        self.rewrite_prose()
        return self.workspace

    def insert(self, row: _Row) -> None:
        obj, later = self.build(row)
        try:  # no savepoint per row: any failure aborts the whole import anyway
            obj.save(force_insert=True)
        except DatabaseError as exc:
            raise PortabilityError(
                f"{row.section.kind} {row.ref} cannot be stored: {_first_line(exc)}", line=row.line
            ) from None
        if row.section.kind == "workspace":
            self.workspace = obj  # type: ignore[assignment]
        self.ids[row.section.kind][row.ref] = obj.pk
        if later:
            self.deferred.append((row, obj))
        if row.section.kind == "fact" and obj.embedding is None:  # type: ignore[attr-defined]
            self.to_embed.append(obj.pk)
        if self.progress:
            self.progress(1)

    def set_later_references(self) -> None:
        for row, obj in self.deferred:
            changed = []
            for f, target in row.section.relations:
                value = row.data.get(f.name)
                if target in ("workspace", "user") or value is None:
                    continue
                if self.order[target] >= self.order[row.section.kind]:
                    setattr(obj, f.attname, self.ids[target][value])
                    changed.append(f.name)
            try:
                obj.save(update_fields=changed)
            except DatabaseError as exc:
                raise PortabilityError(
                    f"{row.section.kind} {row.ref} cannot be stored: {_first_line(exc)}", line=row.line
                ) from None

    def set_many(self) -> None:
        for row in self.rows:
            for m2m, target in row.section.many:
                values = row.data.get(m2m.name) or []
                if values:
                    obj = row.section.model(pk=self.ids[row.section.kind][row.ref])
                    getattr(obj, m2m.name).set([self.ids[target][v] for v in values])

    def rewrite_prose(self) -> None:
        for row in self.rows:
            changed: dict[str, str] = {}
            for column, kind in row.section.prose.items():
                text = row.data.get(column)
                if not isinstance(text, str) or kind not in text:
                    continue
                new = _renumber(text, kind, self.ids[kind])
                if new != text:
                    changed[column] = new
            if changed:
                row.section.model._default_manager.filter(pk=self.ids[row.section.kind][row.ref]).update(**changed)


def _renumber(text: str, kind: str, ids: Mapping[int, int]) -> str:
    """`fact 12` → `fact <new id of 12>`; a number that is no ref of the file stays as it was."""

    def new(match: re.Match[str]) -> str:
        return f"{kind} {ids.get(int(match.group(1)), match.group(1))}"

    return re.sub(rf"\b{re.escape(kind)} (\d+)\b", new, text)


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{name}: {' '.join(str(m) for m in msgs)}" for name, msgs in exc.message_dict.items())
    return " ".join(exc.messages)


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def import_workspace(
    *, lines: Iterable[str], by: Actor, slug: str | None = None, progress: Progress | None = None
) -> ImportResult:
    """Load a workspace file as a new workspace (`slug`, else the exported one), all or nothing.

    The file's shape (JSON, types, references, counts) is checked before the first write, each
    row's values as it is written; a bad line raises PortabilityError naming it and the
    transaction rolls back, so nothing is written.
    Refuses a slug that exists. Facts without a vector in the file are listed in the result, to be
    embedded after the commit (`embed_missing(ids=...)`): no model inference in the transaction."""
    header, rows = _parse(lines)
    slug = slug or header["workspace"]
    try:
        Workspace._meta.get_field("slug").run_validators(slug)
        Workspace._meta.get_field("slug").clean(slug, None)
    except ValidationError as exc:
        raise PortabilityError(f"workspace slug {slug!r}: {_messages(exc)}") from None
    with transaction.atomic():
        # Two imports of one new slug at once: the unique index refuses the second one's insert.
        if Workspace.objects.filter(slug=slug).exists():
            raise PortabilityError(f"workspace {slug!r} already exists; import it under another slug (--as)")
        importer = _Importer(rows, slug, by, progress)
        workspace = importer.run()
        counts = {t: len(ids) for t, ids in importer.ids.items()}
        record_event(
            actor=by,
            verb="workspace.imported",
            workspace_id=workspace.pk,
            target=workspace,
            detail={
                "source_workspace": header["workspace"],
                "exported_at": header.get("exported_at"),
                "version": VERSION,
                "counts": counts,
            },
        )
    agents = sorted(Agent.objects.filter(workspace=workspace).values_list("name", flat=True))
    return ImportResult(workspace, counts, importer.ids, agents, importer.to_embed)
