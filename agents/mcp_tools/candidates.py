"""The promotion-candidate tools (API.md "Promotion candidates", SPEC §7).

Each tool calls its agents.operations function through `EngramTools.call`: the JSON, the pages and
the errors of the matching /api/v1/ endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from agents import operations as ops
from agents.mcp_tools.common import READ, WRITE, CandidateScope, FailureClass, MemoryType, PromotionStatus, given

if TYPE_CHECKING:
    from agents.mcp_server import EngramTools


def register(server: MCPServer, tools: EngramTools) -> None:
    """Add the promotion-candidate tools to `server`, acting through `tools`."""

    @server.tool(annotations=READ)
    def list_candidates(
        promotion_status: PromotionStatus | None = None,
        failure_class: FailureClass | None = None,
        domain: str | None = None,
        repo: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> CallToolResult:
        """Promotion candidates you may see, newest first, each with its gates, replays and
        decisions. One page: limit 1–200 (default 50), offset ≥ 0, with the API's `next`/`previous`."""
        raw = given(promotion_status=promotion_status, failure_class=failure_class, domain=domain, repo=repo)
        return tools.call(ops.list_candidates, raw, limit=limit, offset=offset, site_url=tools.site_url)

    @server.tool(annotations=WRITE)
    def submit_candidate(
        domain: str,
        topic: str,
        candidate_id: str,
        failure_class: FailureClass,
        proposed_memory: str,
        repo: str | None = None,
        scope: CandidateScope | None = None,
        failure_type: str | None = None,
        source_action_ids: list[str] | None = None,
        root_cause_summary: str | None = None,
        evidence_refs: list[str] | None = None,
        verification_probe_candidate: str | None = None,
        requires_human_review: bool | None = None,
        origin: str | None = None,
        memory_type: MemoryType | None = None,
        schema: str | None = None,
        schema_version: str | None = None,
        promotion_status: Literal["candidate"] | None = None,
    ) -> CallToolResult:
        """Submit a lesson as an awtl.memory_candidate.v2 document (SPEC §7) for the promotion gate —
        never straight to memory. proposed_memory: the rule that would become a fact in
        domain/topic; scope: {applies_to, does_not_apply_to} (without both it is held). Answers
        the candidate with its gates; the same candidate_id again answers the stored candidate
        unchanged; candidate_id_taken when the id belongs to a candidate you may not see."""
        raw = given(
            domain=domain,
            repo=repo,
            topic=topic,
            schema=schema,
            schema_version=schema_version,
            candidate_id=candidate_id,
            failure_class=failure_class,
            failure_type=failure_type,
            source_action_ids=source_action_ids,
            root_cause_summary=root_cause_summary,
            proposed_memory=proposed_memory,
            scope=scope,
            evidence_refs=evidence_refs,
            verification_probe_candidate=verification_probe_candidate,
            promotion_status=promotion_status,
            requires_human_review=requires_human_review,
            origin=origin,
            memory_type=memory_type,
        )
        return tools.call(ops.submit_candidate, raw)

    @server.tool(annotations=READ)
    def get_candidate(candidate_pk: int) -> CallToolResult:
        """One candidate — candidate_pk is the numeric `id` submit_candidate answered, not the
        document's candidate_id — with its gates now, its replays, and every decision with
        the scorecard it was made on. candidate_not_found when you may not see it."""
        return tools.call(ops.get_candidate, candidate_pk)

    @server.tool(annotations=WRITE)
    def record_replay(candidate_pk: int, probe: str, passed: bool, details: str | None = None) -> CallToolResult:
        """Record a replay of the candidate's verification probe; its gates are recomputed. On a
        promoted candidate a failed replay challenges its fact and a passing one revalidates it."""
        return tools.call(ops.record_replay, candidate_pk, given(probe=probe, passed=passed, details=details))

    @server.tool(annotations=WRITE)
    def promote_candidate(candidate_pk: int, write: bool = False, auto: bool = False) -> CallToolResult:
        """Decide a candidate. Without write a dry run: the decision it would make, nothing written.
        With write: the recorded decision and its gate scorecard, and the fact only when every
        gate passed (else `refused`, the candidate stays open). auto: only on a passing replay by
        someone other than the submitter, and no human review required. 409 once decided."""
        return tools.call(ops.promote_candidate, candidate_pk, {"write": write, "auto": auto})

    @server.tool(annotations=WRITE)
    def deny_candidate(candidate_pk: int, reason: str | None = None) -> CallToolResult:
        """Deny a candidate for good, recorded with its gates at that moment; 409 once decided."""
        return tools.call(ops.deny_candidate, candidate_pk, given(reason=reason))
