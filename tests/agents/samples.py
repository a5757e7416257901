"""A promotion candidate document (awtl.memory_candidate.v2) as an agent submits it, shared by the
API, trust and declared-error tests; each patches what it needs (its candidate_id, domain…)."""

from __future__ import annotations

from typing import Any

RULE = "When a public API response schema changes, update the contract artifact and the verifier evidence together."
PROBE = "public-contract-regression"


def candidate_document(**patch: Any) -> dict[str, Any]:
    """The document, in the repo's `context` domain unless `patch` says otherwise."""
    document: dict[str, Any] = {
        "schema": "awtl.memory_candidate.v2",
        "candidate_id": "memcand-demo-a",
        "failure_class": "agent_failure",
        "failure_type": "contract_mismatch",
        "source_action_ids": ["action-12"],
        "root_cause_summary": "Public response shape changed without updating contract evidence.",
        "proposed_memory": RULE,
        "scope": {"applies_to": ["public_api", "contract_change"], "does_not_apply_to": ["internal_refactor"]},
        "evidence_refs": ["judge:contract-verifier", "artifact:contract-output"],
        "verification_probe_candidate": PROBE,
        "promotion_status": "candidate",
        "requires_human_review": False,
        "domain": "context",
        "repo": "web",
        "topic": "contracts",
    }
    return {**document, **patch}
