"""EngramClient: the agent API for Python runtimes, one typed method per call.

    from engram_client import EngramClient, EngramError

    engram = EngramClient("http://127.0.0.1:8000", key=os.environ["ENGRAM_AGENT_KEY"])
    preamble = engram.preamble("Fix the flaky checkout test in the web repo", repo="web")
    hits = engram.search("how do we seed the test database?")["results"]
    try:
        engram.propose_policy(domain="architecture", rule="Never deploy on Fridays.")
    except EngramError as exc:
        print(exc.status, exc.code)   # 403 insufficient_memory_permission

Standard library only. Answers are the API's JSON as plain dicts (TypedDicts document the main
shapes). A non-2xx answer raises EngramError carrying the API's stable `code`, `detail` and
`fields`; retries and backoff are the Transport's. Remember reviews are `engram.reviews`
(engram_client.review.ReviewClient), over the same transport.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict, cast

from engram_client.review import ReviewClient
from engram_client.transport import Transport, http_root

__all__ = ["EngramClient"]

SearchMode = Literal["keyword", "semantic", "hybrid"]


# --- Answer shapes (documentation for type checkers; at runtime these are plain dicts) ----------
class Me(TypedDict):
    id: int
    name: str
    role: str
    workspace: str
    workspace_name: str


class RecalledFact(TypedDict, total=False):
    id: int
    domain: str
    topic: str
    content: str
    scope: str


class Preamble(TypedDict):
    text: str
    policies: list[str]
    working_memory: str
    facts: list[RecalledFact]
    episode_id: int


class Voices(TypedDict):
    lexical: int | None
    semantic: int | None
    recency: int | None
    graph: int | None


class SearchHit(TypedDict, total=False):
    id: int
    domain: str
    topic: str
    content: str
    scope: str
    confidence: float
    memory_type: str
    score: float
    voices: Voices


class SearchResult(TypedDict, total=False):
    mode: str
    intent: str
    results: list[SearchHit]
    episode_id: int | None


class Page(TypedDict):
    count: int
    next: str | None
    previous: str | None
    results: list[dict[str, Any]]


class Proposal(TypedDict, total=False):
    fact: dict[str, Any]
    # possible_conflict: it may contradict `compared_with`; both stay live and a person decides.
    outcome: Literal["created", "re_mentioned", "conflict_won", "conflict_lost", "possible_conflict"]
    conflict_id: int | None
    similarity: float | None
    compared_with: int | None
    reason: str


class BatchItemResult(TypedDict, total=False):
    index: int
    status: int  # 201 written (with Proposal's keys), else the item's error status (with `error`)
    fact: dict[str, Any]
    outcome: Literal["created", "re_mentioned", "conflict_won", "conflict_lost", "possible_conflict"]
    conflict_id: int | None
    similarity: float | None
    compared_with: int | None
    reason: str
    error: dict[str, Any]  # {"code", "detail", "fields"}: nothing was written for this item


class BatchProposal(TypedDict):
    results: list[BatchItemResult]
    created: int
    failed: int


class Run(TypedDict, total=False):
    id: int
    task: str
    status: Literal["running", "finished"]
    episode_id: int | None
    created_at: str
    finished_at: str | None
    end_reason: str  # "finished", "abandoned: no activity for N hours", "" while running
    last_activity_at: str
    run_url: str
    candidates: list[dict[str, Any]]


class KnowledgeItem(TypedDict, total=False):
    id: str
    content: str
    tags: list[str]
    candidate_id: int | None
    updated_at: str


class ProceduralItem(TypedDict, total=False):
    id: str
    content: str
    outcome: str
    candidate_id: int | None
    updated_at: str


class Bank(TypedDict, total=False):
    run: int
    run_status: str
    run_end_reason: str
    status: str
    status_updated_at: str | None
    knowledge: list[KnowledgeItem]
    procedural: list[ProceduralItem]


class Intervention(TypedDict, total=False):
    id: int
    run: int
    step: int
    reminder: str | None
    intervened: bool
    rationale: str
    window: list[dict[str, Any]]
    created_at: str


def _clean(body: Mapping[str, Any]) -> dict[str, Any]:
    """Drop arguments left at None: the API then applies its documented default."""
    return {k: v for k, v in body.items() if v is not None}


class EngramClient:
    """One agent's connection to Engram.

    `base_url` is the site root (`http://127.0.0.1:8000`) or the API root (`…/api/v1`); `key`
    the agent key; `timeout` bounds each HTTP call (long-polls add their wait); `retries` is
    how many times a 429/503 (or a lost connection on an idempotent call) is retried, waiting
    `backoff · 2^attempt` seconds (at most `max_backoff`), or longer when `Retry-After` says so.
    `reviews` is the remember-review helper (submit, get, wait, consume, remember_with_review).
    """

    def __init__(
        self,
        base_url: str,
        key: str,
        timeout: float = 10.0,
        retries: int = 3,
        *,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        root = http_root(base_url)
        if not root.endswith("/api/v1"):
            root += "/api/v1"
        self.transport = Transport(
            root, key, timeout=timeout, retries=retries, backoff=backoff, max_backoff=max_backoff, sleep=sleep
        )
        self.api = self.transport.base
        self.reviews = ReviewClient(self.transport)

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        query: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One API call with retries; the decoded JSON answer (an empty dict for an empty body)."""
        return self.transport.request(method, path, body, query=query, timeout=timeout)

    # --- identity and recall --------------------------------------------------------------------
    def me(self) -> Me:
        """GET me/: this agent's name, role and workspace."""
        return cast(Me, self.request("GET", "me/"))

    def preamble(self, task: str, repo: str | None = None) -> Preamble:
        """POST preamble/: the dispatch preamble (policies, notes, up to 5 keyword facts)."""
        return cast(Preamble, self.request("POST", "preamble/", _clean({"task": task, "repo": repo})))

    def search(
        self,
        query: str,
        mode: SearchMode = "hybrid",
        repo: str | None = None,
        domain: str | None = None,
        limit: int = 10,
    ) -> SearchResult:
        """POST search/ (search_memory): keyword, semantic or hybrid (default)."""
        body = _clean({"query": query, "mode": mode, "repo": repo, "domain": domain, "limit": limit})
        return cast(SearchResult, self.request("POST", "search/", body))

    def list_facts(
        self,
        domain: str | None = None,
        topic: str | None = None,
        status: str | None = None,
        repo: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Page:
        """GET facts/: one page of visible facts."""
        query = {"domain": domain, "topic": topic, "status": status, "repo": repo, "limit": limit, "offset": offset}
        return cast(Page, self.request("GET", "facts/", query=query))

    def get_fact(self, fact_id: int) -> dict[str, Any]:
        """GET facts/{id}/: the fact with its history, its conflicts (possible ones included) and
        `mentions` (what was said each time it was stated again, newest first) with `mentions_total`."""
        return self.request("GET", f"facts/{int(fact_id)}/")

    # --- writes ---------------------------------------------------------------------------------
    def propose_fact(
        self,
        domain: str,
        topic: str,
        content: str,
        memory_type: str,
        repo: str | None = None,
        veracity: str | None = None,
        observed_at: str | None = None,
        valid_until: str | None = None,
        source_observation_ids: list[int] | None = None,
        episode_id: int | None = None,
    ) -> Proposal:
        """POST facts/ (propose_fact): the fact and the outcome — created, re_mentioned, conflict_won,
        conflict_lost or possible_conflict (both facts stay live, a person decides; `conflict_id`) — with
        the classifier's `reason`. The body is the server's, unfiltered.

        veracity: agent_inferred (the server's default), tool_generated or imported — what an agent
        states (others answer 403 veracity_not_allowed). observed_at: ISO 8601, not in the future.
        episode_id: an episode this agent opened (create_episode, a preamble, a search, its run)."""
        body = {
            "domain": domain,
            "repo": repo,
            "topic": topic,
            "content": content,
            "memory_type": memory_type,
            "veracity": veracity,
            "observed_at": observed_at,
            "valid_until": valid_until,
            "source_observation_ids": source_observation_ids,
            "episode_id": episode_id,
        }
        return cast(Proposal, self.request("POST", "facts/", _clean(body)))

    def propose_facts(self, items: Sequence[Mapping[str, Any]]) -> BatchProposal:
        """POST facts/batch/ (propose_facts): up to 100 facts (the server's ENGRAM_BATCH_MAX_ITEMS), each
        a mapping of propose_fact's arguments, written in order exactly as propose_fact would write
        them one after another. Answers one result per item in order — `status` 201 with the fact
        and outcome, or the item's error status with `error` (nothing written for that item) — and
        `created` / `failed` counts. An empty or too long list raises EngramError (batch_empty,
        batch_too_large) and writes nothing."""
        body = {"items": [_clean(item) for item in items]}
        return cast(BatchProposal, self.request("POST", "facts/batch/", body))

    def supersede_fact(self, fact_id: int, content: str, reason: str | None = None) -> dict[str, Any]:
        """POST facts/{id}/supersede/: the new fact (409 fact_not_live if already replaced)."""
        return self.request("POST", f"facts/{int(fact_id)}/supersede/", _clean({"content": content, "reason": reason}))

    def list_policies(self, active: bool | None = None, limit: int | None = None, offset: int | None = None) -> Page:
        """GET policies/: one page of visible policies."""
        return cast(Page, self.request("GET", "policies/", query={"active": active, "limit": limit, "offset": offset}))

    def propose_policy(
        self,
        domain: str,
        rule: str,
        repo: str | None = None,
        required_role: str | None = None,
        derived_from: list[int] | None = None,
    ) -> dict[str, Any]:
        """POST policies/ (propose_policy); 403 insufficient_memory_permission without `write`."""
        body: dict[str, Any] = {"domain": domain, "repo": repo, "rule": rule, "required_role": required_role}
        body["derived_from"] = derived_from
        return self.request("POST", "policies/", _clean(body))

    def supersede_policy(self, policy_id: int, rule: str, reason: str | None = None) -> dict[str, Any]:
        """POST policies/{id}/supersede/."""
        return self.request("POST", f"policies/{int(policy_id)}/supersede/", _clean({"rule": rule, "reason": reason}))

    def list_conflicts(
        self,
        domain: str | None = None,
        topic: str | None = None,
        repo: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        status: str | None = None,
    ) -> Page:
        """GET conflicts/ (list_memory_conflicts); status open lists the possible conflicts waiting for a person."""
        query = {"domain": domain, "topic": topic, "repo": repo, "limit": limit, "offset": offset, "status": status}
        return cast(Page, self.request("GET", "conflicts/", query=query))

    def get_notes(self) -> dict[str, Any]:
        """GET me/notes/: the private scratchpad and the latest observations."""
        return self.request("GET", "me/notes/")

    def update_notes(self, notes: str) -> dict[str, Any]:
        """PUT me/notes/ (update_my_notes): replace the whole scratchpad."""
        return self.request("PUT", "me/notes/", {"notes": notes})

    def record_observation(self, text: str) -> dict[str, Any]:
        """POST me/observations/ (record_observation): 201 with its id."""
        return self.request("POST", "me/observations/", {"text": text})

    def remember(
        self,
        session_id: str,
        content: str,
        domain: str | None = None,
        topic: str | None = None,
        repo: str | None = None,
    ) -> dict[str, Any]:
        """POST remember/: a session-scoped hot-tier entry."""
        body = {"session_id": session_id, "content": content, "domain": domain, "topic": topic, "repo": repo}
        return self.request("POST", "remember/", _clean(body))

    def consolidate(self, session_id: str | None = None) -> dict[str, Any]:
        """POST consolidate/ (consolidate_memory): promoted, re_mentioned, conflicts, possible_conflicts,
        merged. While this agent's
        consolidation of the session is queued or running: its `task_id` and `joined` true, no report."""
        return self.request("POST", "consolidate/", _clean({"session_id": session_id}))

    def harmonize(self, domain: str | None = None, repo: str | None = None) -> dict[str, Any]:
        """POST harmonize/ (harmonize_memory): conflicts found and resolved, possible conflicts opened.
        While the workspace's
        harmonisation is queued or running: its `task_id` and `joined` true, no report."""
        return self.request("POST", "harmonize/", _clean({"domain": domain, "repo": repo}))

    def create_episode(self, kind: str, title: str | None = None, started_at: str | None = None) -> dict[str, Any]:
        """POST episodes/: facts proposed with its id are linked to it."""
        return self.request("POST", "episodes/", _clean({"kind": kind, "title": title, "started_at": started_at}))

    # --- promotion candidates -------------------------------------------------------------------
    def submit_candidate(
        self, document: Mapping[str, Any], domain: str, topic: str, repo: str | None = None
    ) -> dict[str, Any]:
        """POST candidates/: an `awtl.memory_candidate.v2` document plus where its fact would go."""
        body = {**document, "domain": domain, "topic": topic, "repo": repo}
        return self.request("POST", "candidates/", _clean(body))

    def record_replay(self, candidate_id: int, probe: str, passed: bool, details: str | None = None) -> dict[str, Any]:
        """POST candidates/{id}/replays/: the replay row; gates recomputed."""
        body = _clean({"probe": probe, "passed": passed, "details": details})
        return self.request("POST", f"candidates/{int(candidate_id)}/replays/", body)

    def promote(self, candidate_id: int, write: bool = False, auto: bool = False) -> dict[str, Any]:
        """POST candidates/{id}/promote/: a dry run unless `write`; the decision and its scorecard."""
        return self.request("POST", f"candidates/{int(candidate_id)}/promote/", {"write": write, "auto": auto})

    # --- memory agent runs (SPEC §9) ------------------------------------------------------------
    def create_run(self, task: str) -> Run:
        """POST runs/: a run with an empty memory bank."""
        return cast(Run, self.request("POST", "runs/", {"task": task}))

    def get_bank(self, run_id: int) -> Bank:
        """GET runs/{id}/bank/: status, knowledge[], procedural[]."""
        return cast(Bank, self.request("GET", f"runs/{int(run_id)}/bank/"))

    def update_status(self, run_id: int, content: str) -> dict[str, Any]:
        """POST runs/{id}/bank/status/ (memory_update_status)."""
        return self.request("POST", f"runs/{int(run_id)}/bank/status/", {"content": content})

    def save_knowledge(self, run_id: int, item_id: str, content: str, tags: list[str] | None = None) -> dict[str, Any]:
        """POST runs/{id}/bank/knowledge/ (memory_save_knowledge): created or replaced."""
        body = {"id": item_id, "content": content, "tags": list(tags or [])}
        return self.request("POST", f"runs/{int(run_id)}/bank/knowledge/", body)

    def save_procedural(self, run_id: int, item_id: str, content: str, outcome: str) -> dict[str, Any]:
        """POST runs/{id}/bank/procedural/ (memory_save_procedural): created or replaced."""
        body = {"id": item_id, "content": content, "outcome": outcome}
        return self.request("POST", f"runs/{int(run_id)}/bank/procedural/", body)

    def delete_item(self, run_id: int, item_id: str, kind: str | None = None) -> dict[str, Any]:
        """DELETE runs/{id}/bank/items/{item_id}/ (memory_delete); `kind` narrows it."""
        path = f"runs/{int(run_id)}/bank/items/{urllib.parse.quote(item_id, safe='')}/"
        return self.request("DELETE", path, query={"kind": kind})

    def intervene(
        self,
        run_id: int,
        step: int,
        reminder: str | None,
        rationale: str | None = None,
        window: list[dict[str, Any]] | None = None,
    ) -> Intervention:
        """POST runs/{id}/interventions/: log a decision; `reminder=None` is selective silence."""
        body: dict[str, Any] = {"step": step, "reminder": reminder}
        if rationale:
            body["rationale"] = rationale
        if window:
            body["window"] = window
        return cast(Intervention, self.request("POST", f"runs/{int(run_id)}/interventions/", body))

    def finish_run(
        self,
        run_id: int,
        offer_candidates: bool = False,
        *,
        items: list[str] | None = None,
        domain: str | None = None,
        repo: str | None = None,
        topic: str | None = None,
        failure_class: str | None = None,
        scope: Mapping[str, list[str]] | None = None,
    ) -> Run:
        """POST runs/{id}/finish/: the finished run and the candidates created (never facts)."""
        body = {
            "offer_candidates": offer_candidates,
            "items": items,
            "domain": domain,
            "repo": repo,
            "topic": topic,
            "failure_class": failure_class,
            "scope": dict(scope) if scope else None,
        }
        return cast(Run, self.request("POST", f"runs/{int(run_id)}/finish/", _clean(body)))
