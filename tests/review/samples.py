"""A remember sub-agent's output as a runtime would post it, with the nominated files' texts."""

import json

ARCH_NOTE = "Ingest runs as a Celery worker; the API never parses uploads itself."
PROFILE_NOTE = "The user wants pull requests under 400 lines and imperative commit messages."
KNOWLEDGE_NOTE = "Issued invoices are never edited; corrections are made with credit notes."

OUTPUT = (
    "I looked through the workspace after this turn and nominated three files.\n\n```json\n"
    + json.dumps(
        {
            "recommendations": [
                {
                    "path": "./docs/architecture.md",
                    "recommended_layer": "project/context",
                    "rationale": "Module boundaries of this repo; future tasks here need them.",
                    "suggested_memory_content": ARCH_NOTE,
                },
                {
                    "path": "CONTRIBUTING.md",
                    "recommended_layer": "user/profile",
                    "rationale": "The user's review preferences.",
                    "suggested_memory_content": PROFILE_NOTE,
                },
                {
                    "path": "billing/rules.py",
                    "recommended_layer": "domain/knowledge",
                    "rationale": "The invoicing rule, true beyond this repo.",
                    "suggested_memory_content": KNOWLEDGE_NOTE,
                },
            ]
        },
        indent=2,
    )
    + "\n```\n\nThe architecture doc matters most."
)

FILES = {
    "docs/architecture.md": "# Architecture\n\nIngest runs as a Celery worker.\n",
    "CONTRIBUTING.md": "# Contributing\n\nSmall PRs please.\n",
    "billing/rules.py": "# Invoices are immutable once issued.\nIMMUTABLE = True\n",
}
