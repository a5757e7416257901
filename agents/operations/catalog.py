"""Every agent operation, declared once (agents.operations.declaration): its MCP tool, its
endpoint's served schema and the errors it can answer are generated from these declarations.

`OPERATIONS` is keyed by the tool name, which is the schema's operation id. The descriptions are
written for the agent reading the tool list and for the developer reading the schema alike.
The error lists name each operation's own codes; the codes every operation shares (the key, the
body, the rate limit, the database) are added by `Operation.all_errors`.
"""

from __future__ import annotations

from agents.operations import serializers as s
from agents.operations import serializers_as_of as sa
from agents.operations import serializers_candidates as sc
from agents.operations import serializers_decisions as sd
from agents.operations import serializers_erasures as se
from agents.operations import serializers_reviews as rs
from agents.operations import serializers_runs as sr
from agents.operations.declaration import Operation

# Codes shared by several operations, by status.
DOMAIN = {400: ("invalid_domain", "unknown_domain")}
BUSY = {409: ("domain_busy",)}
WRITE_GRANT = {403: ("insufficient_memory_permission",)}
RUN = {404: ("run_not_found",), 409: ("run_finished",)}
CANDIDATE = {404: ("candidate_not_found",)}

_ALL = [
    # --- identity and recall -------------------------------------------------------------------
    Operation(
        name="whoami",
        run="me",
        method="GET",
        route="api-me",
        answers={200: s.MeSerializer},
        description="The agent this key acts as (GET me/): its id, name, role and workspace.",
    ),
    Operation(
        name="get_preamble",
        run="get_preamble",
        method="POST",
        route="api-preamble",
        inputs=s.PreambleIn,
        answers={200: s.PreambleOut},
        kind="write",  # it opens a dispatch episode and counts recalls
        description="The dispatch preamble (SPEC §5): every active policy, your private notes, up to 5 "
        "keyword-matched facts for the task (tasks of 20+ characters), and a closing line. Call it when a task "
        "starts. as_of (ISO 8601 with a timezone): the policies and facts Engram held at that moment; valid_at: "
        "only facts true at that moment.",
    ),
    Operation(
        name="search_memory",
        run="search",
        method="POST",
        route="api-search",
        inputs=s.SearchIn,
        answers={200: s.SearchOut},
        errors=DOMAIN,
        description="Search long-term memory (SPEC §6). hybrid (default) fuses lexical, semantic, recency and "
        "graph voices; keyword is full-text only; semantic fuses full-text and vectors. `domain` like "
        "`architecture` or `repo:<slug>/architecture`; `repo` ranks that repo's facts first. limit 1–50. "
        "`session_key`: only facts written under that session key (exact match). `as_of` (ISO 8601 with a "
        "timezone): what Engram believed at that moment; `valid_at`: only facts true at that moment.",
    ),
    Operation(
        name="list_facts",
        run="list_facts",
        method="GET",
        route="api-facts",
        inputs=s.FactListQuery,
        answers={200: s.paginated(s.FactOut, "PaginatedFacts")},
        errors={400: ("unknown_domain",)},
        paged=True,
        description="The facts you may see (GET facts/; never another workspace's, never a `none` domain's), "
        "filtered by domain (`architecture` or `repo:<slug>/architecture`), repo, topic, status; `current` "
        "(default true) leaves out superseded versions; `session_key`: only facts written under that session key "
        "(exact match). One page: limit 1–200 (default 50), offset ≥ 0; `next`/`previous` are the API's links to "
        "the neighbouring pages, null at either end.",
    ),
    Operation(
        name="get_fact",
        run="get_fact",
        method="GET",
        route="api-fact",
        path=(("fact_id", int),),
        inputs=sa.FactDetailQuery,
        answers={200: s.FactDetailOut},
        errors={404: ("fact_not_found",)},
        description="One fact (GET facts/{id}/) with its whole supersession chain (`history`), its conflicts "
        "(possible ones included) and what was said each time it was stated again (`mentions`, newest first, at "
        "most 50 of `mentions_total`). fact_not_found when you may not see it. as_of (ISO 8601 with a timezone): "
        "all of it as it was at that moment.",
    ),
    # --- writing facts -------------------------------------------------------------------------
    Operation(
        name="propose_fact",
        run="propose_fact",
        method="POST",
        route="api-facts",
        inputs=s.FactProposeIn,
        answers={201: s.ProposalOut},
        errors={
            400: ("invalid_domain", "unknown_domain", "unknown_episode", "unknown_observation"),
            403: ("veracity_not_allowed",),
            **BUSY,
        },
        kind="write",
        description="Propose a fact, written through re-mention and conflict detection (SPEC §3). Stating a known "
        "fact again re-mentions it (your words are kept as a mention); a contradiction of a live fact of the "
        "domain (the nearest in meaning, whatever their topic) is resolved (higher veracity, then the later "
        "statement — an update — wins) and recorded; when the wording cannot tell, or a contradiction under "
        'another topic does not announce an update ("now", "switched to"), both facts stay live and a person '
        "decides. veracity: agent_inferred (default), tool_generated or imported; human_stated only for an agent "
        "a workspace admin marked as relaying people's words (else veracity_not_allowed). observed_at: when it "
        "was true (default now; never in the future). episode_id: an episode you opened (your preamble, search "
        "or memory run; else unknown_episode). session_key: a session key (≤ 200 characters) to find this "
        "session's facts again. Answers the fact, the outcome (created, re_mentioned, conflict_won, conflict_lost "
        "or possible_conflict, with conflict_id) and the reason.",
    ),
    Operation(
        name="propose_facts",
        run="propose_facts_batch",
        method="POST",
        route="api-facts-batch",
        inputs=s.FactBatchIn,
        answers={200: s.FactBatchOut},
        errors={400: ("batch_empty", "batch_too_large"), **BUSY},
        kind="write",
        description="Propose up to ENGRAM_BATCH_MAX_ITEMS (100) facts at once, each an object with propose_fact's "
        "arguments. They are written in order exactly as propose_fact would write them one after another — a "
        "later item restating an earlier one re-mentions it, one contradicting it is a conflict — and commit "
        "together, a refused item undone alone. Answers one result per item, in order: status 201 with the fact "
        "and outcome, or the item's error status and `error` (nothing written for that item); plus `created` and "
        "`failed` counts. An empty or too long list is refused whole (batch_empty, batch_too_large). Over HTTP it "
        "counts as one request per item against the rate limit.",
    ),
    Operation(
        name="supersede_fact",
        run="supersede_fact",
        method="POST",
        route="api-fact-supersede",
        path=(("fact_id", int),),
        inputs=s.FactSupersedeIn,
        answers={201: s.FactOut},
        errors={
            404: ("fact_not_found",),
            403: ("fact_protected",),
            409: ("fact_not_live", "domain_busy"),
        },
        kind="write",
        description="Replace a live fact with a new version and a reason (the old one stays in its history). The "
        "new text is read against the domain's other live facts as a proposal is. fact_not_live if it was "
        "already replaced.",
    ),
    Operation(
        name="create_episode",
        run="create_episode",
        method="POST",
        route="api-episodes",
        inputs=s.EpisodeIn,
        answers={201: s.EpisodeOut},
        kind="write",
        description="Start an episode (dispatch, session, meeting, run, import…); facts proposed with its "
        "`episode_id` are linked to it (the knowledge graph). started_at: ISO 8601, default now, never in the "
        "future.",
    ),
    Operation(
        name="record_meeting_decisions",
        run="record_meeting_decisions",
        method="POST",
        route="api-decisions",
        inputs=sd.MeetingDecisionsIn,
        answers={201: sd.MeetingDecisionsOut},
        errors={403: ("insufficient_memory_permission", "veracity_not_allowed"), **BUSY},
        kind="write",
        description="Record what a meeting decided, in people's own words: each item of `decisions` becomes a "
        "human_stated `decision` fact in the workspace's `decisions` domain (created on first use; re-mention and "
        "conflict rules apply), all linked to one `meeting` episode with `title`, started at `date` (YYYY-MM-DD, "
        "not in the future). At most 50 decisions; all or none are written; a refused decision is named in "
        "`fields` as `decisions.<n>`, counted from 1 as lines are (each result's `index` counts from 0). Only an agent a workspace admin marked as relaying people's "
        "words may call it (else veracity_not_allowed); it needs write on `decisions` (else "
        "insufficient_memory_permission).",
    ),
    # --- policies, conflicts, notes --------------------------------------------------------------
    Operation(
        name="list_policies",
        run="list_policies",
        method="GET",
        route="api-policies",
        inputs=s.PolicyListQuery,
        answers={200: s.paginated(s.PolicyOut, "PaginatedPolicies")},
        paged=True,
        description="The policies you may see (GET policies/), newest first; active true: the live active ones, "
        "false: the others. One page: limit 1–200 (default 50), offset ≥ 0, with the API's `next`/`previous` "
        "links.",
    ),
    Operation(
        name="propose_policy",
        run="propose_policy",
        method="POST",
        route="api-policies",
        inputs=s.PolicyProposeIn,
        answers={201: s.PolicyOut},
        errors={
            400: ("invalid_domain", "unknown_domain", "unknown_fact", "unknown_role"),
            **WRITE_GRANT,
            409: ("policy_budget_exceeded",),
        },
        kind="write",
        description="Propose a normative rule (it goes into every dispatch). Needs `write` on the domain (else "
        "insufficient_memory_permission); a rule past ENGRAM_POLICY_MAX_CHARS is invalid_input; "
        "policy_budget_exceeded when the active policies would cost more than the workspace's budget (the body's "
        "`budget`: chars, chars_after, budget).",
    ),
    Operation(
        name="supersede_policy",
        run="supersede_policy",
        method="POST",
        route="api-policy-supersede",
        path=(("policy_id", int),),
        inputs=s.PolicySupersedeIn,
        answers={201: s.PolicyOut},
        errors={404: ("policy_not_found",), **WRITE_GRANT, 409: ("policy_not_live", "policy_budget_exceeded")},
        kind="write",
        description="Replace a live policy with a new version (the old one stays in its history). Needs `write` "
        "on its domain (else insufficient_memory_permission); policy_not_live if it was already replaced, "
        "policy_budget_exceeded past the workspace's policy budget.",
    ),
    Operation(
        name="list_memory_conflicts",
        run="list_conflicts",
        method="GET",
        route="api-conflicts",
        inputs=s.ConflictListQuery,
        answers={200: s.paginated(s.ConflictOut, "PaginatedConflicts")},
        errors={400: ("unknown_domain",)},
        paged=True,
        description="Recorded conflicts between facts, outside your `none` domains, newest first: the pair "
        "(existing, proposed), winner, loser, the rule that decided, when. status open: possible conflicts a "
        "person has yet to decide (no winner, both facts live); dismissed: a person said both are true; closed: "
        "left open, but a fact of the pair is no longer live (closed_reason says why). One page: limit 1–200 "
        "(ENGRAM_API_MAX_PAGE_SIZE), offset ≥ 0; out of range is refused (invalid_input).",
    ),
    Operation(
        name="get_my_notes",
        run="get_notes",
        method="GET",
        route="api-my-notes",
        answers={200: s.NotesOut},
        description="Your private scratchpad and your latest observations; no other agent can read them.",
    ),
    Operation(
        name="update_my_notes",
        run="update_notes",
        method="PUT",
        route="api-my-notes",
        inputs=s.NotesIn,
        answers={200: s.NotesOut},
        kind="replace",
        description="Replace your whole private scratchpad (kept verbatim across runs, injected into your dispatches).",
    ),
    Operation(
        name="record_observation",
        run="record_observation",
        method="POST",
        route="api-my-observations",
        inputs=s.ObservationIn,
        answers={201: s.ObservationOut},
        kind="write",
        description="Note something you saw; its id can be cited as a fact's source (source_observation_ids).",
    ),
    # --- hot tier and jobs -----------------------------------------------------------------------
    Operation(
        name="remember",
        run="remember",
        method="POST",
        route="api-remember",
        inputs=s.RememberIn,
        answers={201: s.HotEntryOut},
        errors=DOMAIN,
        kind="write",
        description="Keep a session-scoped entry in the hot tier until consolidate_memory.",
    ),
    Operation(
        name="consolidate_memory",
        run="consolidate",
        method="POST",
        route="api-consolidate",
        inputs=s.ConsolidateIn,
        answers={200: s.ConsolidateOut, 202: s.ConsolidateOut},
        errors=BUSY,
        kind="write",
        description="Promote hot-tier entries to facts (normal write rules) and merge near-duplicates. One job at "
        "a time per agent and session: while one is queued or running you join it (202, status queued|running, "
        "joined true) instead of starting a second; otherwise its report (200, status done), or 202 queued when a "
        "worker runs it.",
    ),
    Operation(
        name="harmonize_memory",
        run="harmonize",
        method="POST",
        route="api-harmonize",
        inputs=s.HarmonizeIn,
        answers={200: s.HarmonizeOut, 202: s.HarmonizeOut},
        errors={**DOMAIN, **BUSY},
        kind="write",
        description="Resolve contradicting facts written by different agents (in one domain, or all you may see). "
        "One job at a time per workspace: while one is queued or running you join it (202, status queued|running, "
        "joined true) instead of starting a second; otherwise the summary of conflicts found and resolved (200, "
        "status done), or 202 queued when a worker runs it.",
    ),
]
_ALL += [
    # --- remember reviews (SPEC §8) ---------------------------------------------------------------
    Operation(
        name="submit_remember_review",
        run="submit_review",
        method="POST",
        route="api-reviews",
        inputs=rs.ReviewSubmitIn,
        answers={201: rs.ReviewOut, 200: rs.ReviewOut},
        errors={400: ("no_review_items", "unknown_repo")},
        kind="write",
        links=True,
        description="Hand the remember sub-agent's output (a fenced JSON block of recommendations) and the "
        "nominated files' texts (at most 50) to a person. Answers 201 with the pending review, its parsed items and "
        "its review_url; no_review_items when it nominates no file. One review is live per session until you "
        "consume it: while your review of this session_id is pending, approved or rejected, submitting again "
        "writes nothing and answers 200 with that review as it stands (same id).",
    ),
    Operation(
        name="list_remember_reviews",
        run="list_reviews",
        method="GET",
        route="api-reviews",
        inputs=rs.ReviewListQuery,
        answers={200: s.paginated(rs.ReviewOut, "PaginatedRememberReviews")},
        paged=True,
        links=True,
        description="Your remember reviews of one session (`session`: the session_id they were submitted under, "
        "1–200 characters), newest first, each as get_remember_review answers it; `status` (pending, approved, "
        "rejected, consumed) narrows them. At most one is live (not consumed): a restarted runtime finds here the "
        "review it was waiting on. Another agent's reviews are never listed. One page: limit 1–200 (default 50), "
        "offset ≥ 0, with the API's `next`/`previous`.",
    ),
    Operation(
        name="get_remember_review",
        run="get_review",
        method="GET",
        route="api-review",
        path=(("review_id", int),),
        inputs=rs.ReviewWaitQuery,
        answers={200: rs.ReviewOut},
        errors={404: ("review_not_found",)},
        links=True,
        description="Your review's status (pending, approved, rejected, consumed) and, once a person decided, its "
        "resolution {approved, selected_paths, edits, stored_ids, note}. wait: seconds (0–30) to hold while it is "
        "pending — the call returns as soon as it is decided; call again to keep waiting. When the server already "
        "holds too many waits (ENGRAM_MAX_WAITERS) it answers at once with a Retry-After header (over MCP, "
        '`_meta.headers["Retry-After"]`): the seconds to let pass before asking again.',
    ),
    Operation(
        name="consume_remember_review",
        run="consume_review",
        method="POST",
        route="api-review-consume",
        path=(("review_id", int),),
        answers={200: rs.ReviewOut},
        errors={404: ("review_not_found",), 409: ("review_pending", "review_already_consumed")},
        kind="write",
        links=True,
        description="Mark a decided review as folded into your final answer (approved|rejected → consumed). "
        "review_pending while a person has not decided, review_already_consumed the second time.",
    ),
    # --- promotion candidates (SPEC §7) -----------------------------------------------------------
    Operation(
        name="list_candidates",
        run="list_candidates",
        method="GET",
        route="api-candidates",
        inputs=sc.CandidateListQuery,
        answers={200: s.paginated(sc.CandidateOut, "PaginatedCandidates")},
        errors={400: ("unknown_domain",)},
        paged=True,
        description="Promotion candidates you may see, newest first, each with its gates, replays and decisions. "
        "One page: limit 1–200 (default 50), offset ≥ 0, with the API's `next`/`previous`.",
    ),
    Operation(
        name="submit_candidate",
        run="submit_candidate",
        method="POST",
        route="api-candidates",
        inputs=sc.CandidateIn,
        answers={201: sc.CandidateOut, 200: sc.CandidateOut},
        errors={400: ("invalid_domain", "unknown_domain", "unknown_schema_version"), 409: ("candidate_id_taken",)},
        kind="write",
        description="Submit a lesson as an awtl.memory_candidate.v2 document (SPEC §7) for the promotion gate — "
        "never straight to memory. proposed_memory: the rule that would become a fact in domain/topic; scope: "
        "{applies_to, does_not_apply_to} (without both it is held). Answers 201 with the candidate and its gates; "
        "the same candidate_id again answers 200 with the stored candidate unchanged; candidate_id_taken when the "
        "id belongs to a candidate you may not see.",
    ),
    Operation(
        name="get_candidate",
        run="get_candidate",
        method="GET",
        route="api-candidate",
        path=(("candidate_pk", int),),
        answers={200: sc.CandidateOut},
        errors=CANDIDATE,
        description="One candidate — candidate_pk is the numeric `id` submit_candidate answered, not the "
        "document's candidate_id — with its gates now, its replays, and every decision with the scorecard it was "
        "made on. candidate_not_found when you may not see it.",
    ),
    Operation(
        name="record_replay",
        run="record_replay",
        method="POST",
        route="api-candidate-replays",
        path=(("candidate_pk", int),),
        inputs=sc.ReplayIn,
        answers={201: sc.ReplayCreatedOut},
        errors=CANDIDATE,
        kind="write",
        description="Record a replay of the candidate's verification probe; its gates are recomputed. On a "
        "promoted candidate a failed replay challenges its fact (it leaves recall) and a passing one revalidates "
        "it.",
    ),
    Operation(
        name="promote_candidate",
        run="promote_candidate",
        method="POST",
        route="api-candidate-promote",
        path=(("candidate_pk", int),),
        inputs=sc.PromoteIn,
        answers={200: sc.PromoteOut, 201: sc.PromoteOut},
        errors={**CANDIDATE, 409: ("candidate_decided", "candidate_changed")},
        kind="write",
        description="Decide a candidate. Without write a dry run: 200 with the decision it would make, nothing "
        "written. With write: 201 with the recorded decision and its gate scorecard, and the fact only when every "
        "gate passed (else `refused`, the candidate stays open). auto: only on a passing replay by someone other "
        "than the submitter, and no human review required. 409 once decided.",
    ),
    Operation(
        name="deny_candidate",
        run="deny_candidate",
        method="POST",
        route="api-candidate-deny",
        path=(("candidate_pk", int),),
        inputs=sc.DenyIn,
        answers={201: sc.PromoteOut},
        errors={**CANDIDATE, 409: ("candidate_decided",)},
        kind="write",
        description="Deny a candidate for good, recorded with its gates at that moment; 409 once decided.",
    ),
    # --- memory-agent runs (SPEC §9) --------------------------------------------------------------
    Operation(
        name="create_memory_run",
        run="create_run",
        method="POST",
        route="api-runs",
        inputs=sr.RunIn,
        answers={201: sr.RunOut},
        kind="write",
        description="Open a run for a long task: an empty memory bank and a `run` episode.",
    ),
    Operation(
        name="memory_get_bank",
        run="get_bank",
        method="GET",
        route="api-run-bank",
        path=(("run_id", int),),
        answers={200: sr.BankOut},
        errors={404: ("run_not_found",)},
        description="The run's memory bank: status (progress, for the memory agent only), knowledge[], "
        "procedural[]. A run belongs to the agent that opened it (run_not_found for any other).",
    ),
    Operation(
        name="memory_update_status",
        run="update_status",
        method="POST",
        route="api-run-bank-status",
        path=(("run_id", int),),
        inputs=sr.StatusIn,
        answers={200: sr.StatusOut},
        errors=RUN,
        kind="replace",
        description="Replace the run's progress note (seen only by the memory agent); run_finished once the run "
        "is finished.",
    ),
    Operation(
        name="memory_save_knowledge",
        run="save_knowledge",
        method="POST",
        route="api-run-bank-knowledge",
        path=(("run_id", int),),
        inputs=sr.KnowledgeIn,
        answers={201: sr.SavedItemOut, 200: sr.SavedItemOut},
        errors={**RUN, 409: ("run_finished", "bank_full")},
        kind="replace",
        description="Save a stable fact of the task (requirement, path, constraint) under `id`: 201 when new, 200 "
        "when the same id replaced it. Tags `applies_to:X` / `not_for:Y` give an offered candidate its scope.",
    ),
    Operation(
        name="memory_save_procedural",
        run="save_procedural",
        method="POST",
        route="api-run-bank-procedural",
        path=(("run_id", int),),
        inputs=sr.ProceduralIn,
        answers={201: sr.SavedItemOut, 200: sr.SavedItemOut},
        errors={**RUN, 409: ("run_finished", "bank_full")},
        kind="replace",
        description="Save an attempt and its outcome (a command that failed or worked, a diagnosis) under `id`: "
        "201 when new, 200 when the same id replaced it.",
    ),
    Operation(
        name="memory_delete",
        run="delete_item",
        method="DELETE",
        route="api-run-bank-item",
        path=(("run_id", int), ("id", str)),
        inputs=sr.DeleteQuery,
        answers={200: sr.DeletedOut},
        errors={404: ("run_not_found", "bank_item_not_found"), 409: ("run_finished",)},
        kind="replace",
        description="Delete the knowledge and/or procedural item with this id (`kind` narrows it); "
        "bank_item_not_found when there is none. The status note is updated, not deleted.",
    ),
    Operation(
        name="memory_log_decision",
        run="intervene",
        method="POST",
        route="api-run-interventions",
        path=(("run_id", int),),
        inputs=sr.InterventionIn,
        answers={201: sr.InterventionOut},
        errors=RUN,
        kind="write",
        description="Log the memory agent's decision before `step`: one specific reminder for the action agent, "
        "or none (null: selective silence, logged too). `window`: the steps reviewed (≤ 8).",
    ),
    Operation(
        name="finish_memory_run",
        run="finish_run",
        method="POST",
        route="api-run-finish",
        path=(("run_id", int),),
        inputs=sr.FinishIn,
        answers={200: sr.FinishOut},
        errors={**RUN, 400: ("unknown_domain",)},
        kind="write",
        description="Finish the run. offer_candidates: the knowledge and procedural items (or `items`) become "
        "promotion candidates (origin memory_agent, human review required) that a person must approve — never "
        "facts. scope: {applies_to, does_not_apply_to} added to every candidate offered (without both a "
        "candidate is held). run_finished the second time.",
    ),
    # --- people's erasure API (issue 21): not agent tools ------------------------------------------
    Operation(
        name="admin_erasure_preview",
        method="POST",
        route="api-admin-erasure-preview",
        inputs=se.ErasureIn,
        answers={200: se.ErasurePreviewOut},
        errors={400: ("invalid_selection", "nothing_to_erase"), 403: ("erasure_forbidden",), 404: ("not_found",)},
        tool=False,
        agent=False,
        description="What erasing the selection would remove: counts per kind and the facts' texts. Writes "
        "nothing. Only a signed-in workspace admin (Django session, CSRF) may call it; an agent key is answered "
        "erasure_forbidden.",
    ),
    Operation(
        name="admin_erasure",
        method="POST",
        route="api-admin-erasures",
        inputs=se.ErasureIn,
        answers={201: se.ErasureOut},
        errors={
            400: ("invalid_selection", "nothing_to_erase", "reason_required"),
            403: ("erasure_forbidden",),
            404: ("not_found",),
            409: ("selection_changed",),
        },
        tool=False,
        agent=False,
        kind="write",
        description="Erase the selection and everything derived from it; answers the tombstone (no content). With "
        "the preview's `fact_ids`, refused (selection_changed) if the selection now matches other facts.",
    ),
]

OPERATIONS: dict[str, Operation] = {operation.name: operation for operation in _ALL}
TOOLS: dict[str, Operation] = {name: operation for name, operation in OPERATIONS.items() if operation.tool}


def at(route: str, method: str) -> Operation:
    """The operation served at URL name `route` for `method`."""
    for operation in _ALL:
        if operation.route == route and operation.method == method.upper():
            return operation
    raise KeyError((route, method))
