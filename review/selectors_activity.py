"""The dashboard's recent activity and the top bar's links, in words a person reads.

An audit event names its actor and target by internal labels (`agent:coder-a`, `fact.created`,
`#15`); these selectors turn them into names and links — a link only to what the person may
open (memory.access), so the list never leaks a hidden fact's text."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef
from django.urls import reverse
from django.utils.text import Truncator

from memory import access
from memory.models import AuditEvent, Candidate, Conflict, Fact, Policy, Workspace
from review.access import reviews_for
from review.models import RememberReview

# verb → what the actor did, read before the target ("coder-a stored fact #15: …").
VERB_PHRASES: dict[str, str] = {
    "fact.created": "stored",
    "fact.re_mentioned": "stated again",
    "fact.superseded": "replaced",
    "fact.archived": "archived",
    "fact.challenged": "challenged",
    "fact.revalidated": "revalidated",
    "fact.deprecated": "deprecated",
    "fact.merged": "merged into",
    "fact.conflict": "recorded a conflict on",
    "fact.status_changed": "changed the status of",
    "candidate.submitted": "proposed",
    "candidate.revised": "revised",
    "candidate.replayed": "replayed",
    "candidate.approved": "approved",
    "candidate.denied": "denied",
    "candidate.promoted": "promoted",
    "candidate.promotion_refused": "was refused promotion of",
    "conflict.opened": "asked a person about",
    "conflict.decided": "decided",
    "conflict.reviewed": "reviewed",
    "remember_review.submitted": "asked for",
    "remember_review.item_edited": "edited an item of",
    "remember_review.note_edited": "wrote a note on",
    "remember_review.approved": "approved",
    "remember_review.rejected": "rejected",
    "remember_review.consumed": "read the answer to",
    "policy.proposed": "proposed",
    "policy.activated": "activated",
    "policy.deactivated": "deactivated",
    "policy.superseded": "replaced",
    "grant.changed": "changed an access grant",
    "domain.created": "created",
    "episode.created": "started",
    "observation.recorded": "recorded",
    "hot.remembered": "kept something in hot memory",
    "memory.consolidated": "consolidated memory",
    "memory.harmonized": "harmonized memory",
    "notes.updated": "updated its notes",
    "run.started": "started",
    "run.finished": "finished",
    "run.abandoned": "closed as abandoned",
    "run.intervened": "intervened in",
    "layer_mapping.changed": "remapped a remember layer",
    "layer_mapping.defaults_created": "set up the remember layers",
    "workspace.policy_budget_changed": "changed the policy budget",
}


# target_type → how a person calls it; other targets (grant rows, layer mappings…) are named by
# the phrase alone.
TARGET_NOUNS: dict[str, str] = {
    "fact": "fact",
    "candidate": "candidate",
    "conflict": "conflict",
    "rememberreview": "remember review",
    "policy": "policy",
    "episode": "episode",
    "run": "run",
    "memorydomain": "domain",
    "observation": "observation",
    "agent": "agent",
}


@dataclass
class ActivityEntry:
    event: AuditEvent
    actor: str  # a person's or agent's name
    actor_kind: str  # "person", "agent" or "system"
    phrase: str
    target_label: str  # "fact #15", "" when the event has no target
    target_title: str  # the fact's text, the candidate's rule… (only what the person may see)
    target_url: str  # "" when the person may not open it


def _phrase(verb: str) -> str:
    return VERB_PHRASES.get(verb) or verb.replace(".", " ").replace("_", " ")


def _actor(event: AuditEvent) -> tuple[str, str]:
    if event.actor_agent is not None:
        return event.actor_agent.name, "agent"
    if event.actor_user is not None:
        return event.actor_user.get_full_name() or event.actor_user.get_username(), "person"
    label = event.actor_label
    kind, _, name = label.partition(":")
    if kind == "agent":
        return name, "agent"
    if kind == "user":
        return name, "person"
    return f"Engram ({name or 'system'})", "system"


def _short(text: str, chars: int = 90) -> str:
    return Truncator(" ".join(text.split())).chars(chars)


def conflict_url(pk: int, *, decided_with_winner: bool) -> str:
    """The page that shows a conflict in any state: one with a winner (decided by a rule or by a
    person who chose a side) on the conflict page, any other (open, same, both true) as the
    possible conflict it was asked as (review.selectors_items.item_entry)."""
    kind = "conflict" if decided_with_winner else "possible"
    return reverse("review:queue-detail", args=[kind, pk])


def recent_activity(user: Any, workspaces: list[Workspace], limit: int = 15) -> list[ActivityEntry]:
    """The latest events of `workspaces` that `user` may see (access.restrict: those of their
    domains and the workspace-level ones), each with its actor's name and its target's title and
    link where `user` may open the target (facts, candidates, conflicts, remember reviews, policies)."""
    events = list(
        access.restrict(AuditEvent.objects.filter(workspace__in=workspaces), user, "view").select_related(
            "workspace", "actor_agent", "actor_user"
        )[:limit]
    )
    wanted: dict[str, set[int]] = defaultdict(set)
    for e in events:
        if e.target_id is not None:
            wanted[e.target_type].add(e.target_id)
    titles: dict[tuple[str, int], tuple[str, str]] = {}  # (type, id) → (title, url)
    if wanted.get("fact"):
        for pk, slug, content in access.restrict(Fact.objects.filter(pk__in=wanted["fact"]), user).values_list(
            "pk", "workspace__slug", "content"
        ):
            titles[("fact", pk)] = (_short(content), reverse("review:fact", args=[slug, pk]))
    if wanted.get("candidate"):
        for pk, text in access.restrict(Candidate.objects.filter(pk__in=wanted["candidate"]), user).values_list(
            "pk", "proposed_memory"
        ):
            titles[("candidate", pk)] = (_short(text), reverse("review:queue-detail", args=["candidate", pk]))
    if wanted.get("conflict"):
        for pk, winner_id in access.restrict(Conflict.objects.filter(pk__in=wanted["conflict"]), user).values_list(
            "pk", "winner_id"
        ):
            titles[("conflict", pk)] = ("", conflict_url(pk, decided_with_winner=winner_id is not None))
    if wanted.get("rememberreview"):
        for pk, agent in reviews_for(user, RememberReview.objects.filter(pk__in=wanted["rememberreview"])).values_list(
            "pk", "agent__name"
        ):
            title = f"from agent {agent}" if agent else ""
            titles[("rememberreview", pk)] = (title, reverse("review:remember-review", args=[pk]))
    if wanted.get("policy"):
        for pk, slug, rule in access.restrict(Policy.objects.filter(pk__in=wanted["policy"]), user).values_list(
            "pk", "workspace__slug", "rule"
        ):
            titles[("policy", pk)] = (_short(rule), reverse("review:policies", args=[slug]))
    entries = []
    for e in events:
        actor, kind = _actor(e)
        noun = TARGET_NOUNS.get(e.target_type)
        label = f"{noun} #{e.target_id}" if noun and e.target_id else ""
        title, url = titles.get((e.target_type, e.target_id or 0), ("", ""))
        if e.verb == "grant.changed" and e.detail:
            title = f"{e.detail.get('role')} on {e.detail.get('domain')}: {e.detail.get('from')} → {e.detail.get('to')}"
            label, url = "", reverse("review:grants", args=[e.workspace.slug]) if e.workspace else ""
        entries.append(ActivityEntry(e, actor, kind, _phrase(e.verb), label, title, url))
    return entries


@dataclass
class NavWorkspace:
    slug: str
    name: str
    memory: bool  # may open the memory browser with something in it (some domain to view)
    admin: bool


def nav_workspaces(user: Any) -> list[NavWorkspace]:
    """The workspaces the top bar links to, one query: the memory browser where the person may see
    some domain, the grants matrix for every member (read-only unless they administer it)."""
    if not getattr(user, "is_authenticated", False):
        return []
    rows = (
        access.workspaces(user, "view")
        .annotate(
            has_memory=Exists(access.domains(user, "view").filter(workspace=OuterRef("pk"))),
            administers=Exists(access.workspaces(user, "administer").filter(pk=OuterRef("pk"))),
        )
        .order_by("name")
        .values_list("slug", "name", "has_memory", "administers")[:20]
    )
    return [NavWorkspace(slug, name, memory, admin) for slug, name, memory, admin in rows]
