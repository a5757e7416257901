"""Demo content: a pending remember review as an agent runtime would submit it (seed_demo), and a
promotion candidate document that waits on a person (the queue's tests and bench.pages fill in
its candidate_id, domain, topic and proposed_memory)."""

from __future__ import annotations

import json

from memory.models import Agent
from review.models import RememberReview
from review.services import submit_review

DEMO_FILES = {
    "docs/adr/0007-webhooks-retry.md": (
        "# ADR 0007: Webhook retries\n\n"
        "Status: accepted\n\n"
        "Outgoing webhooks are retried with exponential backoff (1 s, 4 s, 16 s, 64 s, 256 s), then parked in\n"
        "the `webhook_dead_letter` table. Receivers must be idempotent: every delivery carries an\n"
        "`Idempotency-Key` header equal to the event id.\n"
    ),
    "web-app/src/api/client.ts": (
        "// Thin fetch wrapper used by every page.\n"
        "export async function api<T>(path: string, init?: RequestInit): Promise<T> {\n"
        "  const res = await fetch(`/api/${path}`, { credentials: 'include', ...init });\n"
        "  if (res.status === 401) { window.location.assign('/login'); }\n"
        "  if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);\n"
        "  return res.json() as Promise<T>;\n"
        "}\n"
    ),
    "notes/maria-review-style.md": (
        "Maria asked again today: keep PRs small, put the migration in its own PR, and write the\n"
        "why in the description, not only the what.\n"
    ),
    "scratch/try_retry.py": "import time\nfor i in range(5):\n    print(2 ** (2 * i))\n",
}

DEMO_OUTPUT = (
    "I inspected the workspace after this turn. Three files are worth keeping; scratch/try_retry.py\n"
    "was only an experiment.\n\n```json\n"
    + json.dumps(
        {
            "recommendations": [
                {
                    "path": "./docs/adr/0007-webhooks-retry.md",
                    "recommended_layer": "domain/knowledge",
                    "rationale": "An accepted decision about webhook delivery that every service sending webhooks follows.",
                    "suggested_memory_content": (
                        "Outgoing webhooks retry with exponential backoff (1, 4, 16, 64, 256 s), then go to "
                        "webhook_dead_letter. Receivers must be idempotent; Idempotency-Key = event id."
                    ),
                },
                {
                    "path": "web-app/src/api/client.ts",
                    "recommended_layer": "project/context",
                    "rationale": "Every page of the web-app calls the API through this wrapper; it defines the 401 behaviour.",
                    "suggested_memory_content": (
                        "web-app calls the API only through src/api/client.ts (fetch with credentials); a 401 "
                        "redirects to /login; non-2xx responses throw."
                    ),
                },
                {
                    "path": "notes/maria-review-style.md",
                    "recommended_layer": "user/profile",
                    "rationale": "Maria's stated review preferences; they apply to every PR she reviews.",
                    "suggested_memory_content": (
                        "Maria wants small PRs, migrations in a separate PR, and the why in the PR description."
                    ),
                },
            ]
        },
        indent=2,
    )
    + "\n```\n"
)


DEMO_CANDIDATE = {
    "schema": "awtl.memory_candidate.v2",
    "failure_class": "agent_failure",
    "failure_type": "wrong_command",
    "source_action_ids": ["a-1"],
    "root_cause_summary": "Ran the wrong build command.",
    "scope": {"applies_to": ["web"], "does_not_apply_to": ["mobile"]},
    "evidence_refs": ["ci:42"],
    "verification_probe_candidate": "npm-build",
    "promotion_status": "candidate",
    "requires_human_review": True,
}


def submit_demo_review(agent: Agent) -> RememberReview:
    """Submit the demo review through the same service the API uses."""
    return submit_review(agent=agent, session_id="demo-turn-1", output=DEMO_OUTPUT, files=DEMO_FILES, repo="web-app")
