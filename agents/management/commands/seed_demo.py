"""A small, realistic demo workspace: repos, roles, domains, facts with history and a conflict,
policies, two agents and a verifier agent. Idempotent: does nothing when the demo workspace exists."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.utils import timezone

from agents.services import create_agent, set_trust_flags
from memory import access
from memory.actors import Actor
from memory.audit import record_event
from memory.models import (
    VERACITY_WEIGHT,
    Conflict,
    Fact,
    MemoryDomain,
    Policy,
    Workspace,
    WorkspaceMembership,
)
from memory.services.embedding import embed_missing
from memory.services.promotion import parse_candidate_document, record_replay, submit_candidate
from memory.services.tenancy import create_domain, get_or_create_repo, get_or_create_role, get_or_create_workspace
from review.demo import submit_demo_review

DEMO_SLUG = "demo"
DEMO_KEY_FILE = "demo-agent-key"

# (domain label, topic, memory_type, veracity, days ago, content)
FACTS: list[tuple[str, str, str, str, int, str]] = [
    (
        "architecture",
        "database",
        "decision",
        "human_stated",
        200,
        "The primary datastore is PostgreSQL 16; pgvector holds embeddings next to the rows they describe.",
    ),
    (
        "architecture",
        "message-queue",
        "decision",
        "human_stated",
        120,
        "Background jobs run on Celery with Redis as the broker; results are not stored.",
    ),
    (
        "architecture",
        "auth",
        "decision",
        "agent_inferred",
        60,
        "Service-to-service calls authenticate with short-lived JWTs signed by the auth service.",
    ),
    (
        "conventions",
        "python-style",
        "convention",
        "human_stated",
        300,
        "Python code is formatted with ruff format and must pass mypy in strict mode on new modules.",
    ),
    (
        "conventions",
        "commits",
        "convention",
        "human_stated",
        250,
        "Commit messages use the imperative mood and reference the issue number, e.g. 'Fix rounding in invoices (#412)'.",
    ),
    (
        "conventions",
        "migrations",
        "convention",
        "agent_inferred",
        40,
        "Database migrations must be backwards compatible for one release: add columns nullable, backfill, then enforce.",
    ),
    (
        "profile",
        "maria",
        "profile",
        "human_stated",
        400,
        "Maria Chen leads the billing team and prefers reviews in small pull requests under 400 lines.",
    ),
    (
        "profile",
        "deploy-window",
        "profile",
        "human_stated",
        90,
        "Production deploys happen Tuesday to Thursday between 10:00 and 16:00 UTC; no Friday deploys.",
    ),
    (
        "knowledge",
        "rate-limits",
        "observation",
        "tool_generated",
        5,
        "The payments provider sandbox rate-limits at 25 requests per second per API key and answers HTTP 429 beyond.",
    ),
    (
        "knowledge",
        "currency",
        "convention",
        "human_stated",
        500,
        "Money amounts are stored as integer minor units (cents) with an ISO 4217 currency code, never as floats.",
    ),
    (
        "knowledge",
        "flaky-tests",
        "procedure",
        "agent_inferred",
        12,
        "test_webhook_retry is flaky under load; rerun once before investigating, and check the Redis container first.",
    ),
    (
        "repo:web-app/context",
        "build",
        "procedure",
        "agent_inferred",
        20,
        "The web-app builds with `npm ci && npm run build`; Node 20 is required, Node 22 breaks the SVG loader.",
    ),
    (
        "repo:web-app/context",
        "tests",
        "procedure",
        "human_stated",
        30,
        "Run the web-app end-to-end tests with `npm run e2e -- --headed=false`; they need the API on port 8000.",
    ),
    (
        "repo:web-app/context",
        "feature-flags",
        "decision",
        "agent_inferred",
        8,
        "Feature flags are read from LaunchDarkly at startup and cached for 60 seconds.",
    ),
    (
        "repo:billing/context",
        "invoices",
        "decision",
        "human_stated",
        150,
        "Invoices are immutable once issued; corrections are made with credit notes, never by editing the invoice.",
    ),
    (
        "repo:billing/context",
        "tax",
        "procedure",
        "agent_inferred",
        25,
        "VAT rates come from the tax-rates table refreshed nightly by the `sync_tax_rates` job; do not hard-code them.",
    ),
    (
        "incidents",
        "2026-10-outage",
        "event",
        "human_stated",
        35,
        "On 2026-10-24 the invoice queue stalled for 3 hours because a Redis maxmemory policy evicted Celery keys.",
    ),
    (
        "incidents",
        "redis-config",
        "decision",
        "human_stated",
        34,
        "Redis for Celery must run with maxmemory-policy noeviction after the October queue outage.",
    ),
]

POLICIES = [
    ("conventions", "Never edit an issued invoice; create a credit note instead.", None),
    ("architecture", "Do not add a new datastore without an architecture decision record.", "planner"),
    ("conventions", "Run the full test suite before proposing a merge.", "coder"),
]


# Promotion candidates (SPEC §7): (domain label, topic, document, replays as (probe, passed, details)).
CANDIDATES: list[tuple[str, str, dict[str, Any], list[tuple[str, bool, str]]]] = [
    (
        "repo:web-app/context",
        "api-contract",
        {
            "schema": "awtl.memory_candidate.v2",
            "candidate_id": "memcand-demo-contract",
            "failure_class": "agent_failure",
            "failure_type": "contract_mismatch",
            "source_action_ids": ["action-12", "action-14"],
            "root_cause_summary": "The public response shape changed without updating the contract evidence.",
            "proposed_memory": "When a public API response schema changes, update the contract artifact and the "
            "verifier evidence in the same change.",
            "scope": {"applies_to": ["public_api", "contract_change"], "does_not_apply_to": ["internal_refactor"]},
            "evidence_refs": ["judge:contract-verifier", "artifact:contract-output"],
            "verification_probe_candidate": "public-contract-regression",
            "requires_human_review": True,
        },
        [("public-contract-regression", True, "The regression probe fails without the rule and passes with it.")],
    ),
    (
        "knowledge",
        "e2e",
        {
            "schema": "awtl.memory_candidate.v2",
            "candidate_id": "memcand-demo-e2e-browser",
            "failure_class": "environment_blocker",
            "failure_type": "missing_browser_binary",
            "source_action_ids": ["action-31"],
            "root_cause_summary": "The e2e run failed because the browser binary was missing on the runner.",
            "proposed_memory": "e2e tests fail often in this project; skip them at closeout.",
            "scope": {"applies_to": ["closeout"], "does_not_apply_to": ["release"]},
            "evidence_refs": ["log:e2e-run-31"],
        },
        [],
    ),
    (
        "conventions",
        "migrations",
        {
            "schema": "awtl.memory_candidate.v2",
            "candidate_id": "memcand-demo-migrations",
            "failure_class": "agent_failure",
            "failure_type": "irreversible_migration",
            "source_action_ids": ["action-7"],
            "root_cause_summary": "A NOT NULL column was added in one step and the deploy of the old code failed.",
            "proposed_memory": "Add new columns nullable first; enforce NOT NULL one release later.",
            "scope": {"applies_to": ["schema_change"]},
            "evidence_refs": ["ci:deploy-482"],
            "verification_probe_candidate": "migration-backwards-compat",
        },
        [],
    ),
]


def seed_candidates(domains: dict[str, MemoryDomain], by: Actor, verifier: Actor) -> None:
    """One awaiting human review (scope, anti-scope, a passing replay by the verifier agent), one
    environment_blocker (blocked for good), one held for lack of an anti-scope — all through the
    gate's services. The replays come from the verifier: the submitter's own would not count."""
    for label, topic, document, replays in CANDIDATES:
        candidate, _ = submit_candidate(
            domain=domains[label], topic=topic, document=parse_candidate_document(document), by=by
        )
        for probe, passed, details in replays:
            record_replay(candidate=candidate, by=verifier, probe=probe, passed=passed, details=details)


def seed_remember_review(agent: Any) -> None:
    """A pending remember review (SPEC §8) from coder-1, so the review page has one to show."""
    submit_demo_review(agent)  # the review app owns its demo content


class Command(BaseCommand):
    help = "Load the demo workspace (idempotent) and print how to log in."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quiet", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        if Workspace.objects.filter(slug=DEMO_SLUG).exists():
            if not opts["quiet"]:
                self.stdout.write("The demo workspace already exists; nothing to do.")
            return
        key = self._seed()
        settings.ENGRAM_HOME.mkdir(parents=True, exist_ok=True)
        key_file = settings.ENGRAM_HOME / DEMO_KEY_FILE
        key_file.write_text(key + "\n")
        key_file.chmod(0o600)
        self.stdout.write(f"Embedding {Fact.objects.needing_embedding().count()} demo facts…")
        embed_missing()
        self.stdout.write(self.style.SUCCESS("Demo workspace 'demo' loaded."))
        self.stdout.write(f"Demo agent key (coder-1): {key}  (also saved in {key_file})")

    @transaction.atomic
    def _seed(self) -> str:
        by = Actor.system("seed_demo")
        now = timezone.now()
        ws = get_or_create_workspace(slug=DEMO_SLUG, name="Acme Robotics (demo)", by=by)
        coder = get_or_create_role(workspace=ws, name="coder", by=by)
        planner = get_or_create_role(workspace=ws, name="planner", by=by)
        roles = {"coder": coder, "planner": planner}
        repos = {slug: get_or_create_repo(workspace=ws, slug=slug, by=by) for slug in ("web-app", "billing")}
        domains: dict[str, MemoryDomain] = {}
        for name in ("architecture", "conventions", "profile", "knowledge", "incidents"):
            domains[name] = create_domain(workspace=ws, name=name, by=by)
        for slug, repo in repos.items():
            domains[f"repo:{slug}/context"] = create_domain(workspace=ws, name="context", repo=repo, by=by)

        facts: dict[str, Fact] = {}
        for label, topic, memory_type, veracity, days, content in FACTS:
            when = now - timedelta(days=days)
            facts[topic] = Fact.objects.create(
                workspace=ws,
                domain=domains[label],
                topic=topic,
                content=content,
                memory_type=memory_type,
                veracity=veracity,
                confidence=VERACITY_WEIGHT[veracity],
                observed_at=when,
                created_at=when,
                last_mentioned_at=when,
                status_changed_at=when,
                origin="seed",
                source="seed_demo",
                last_validated_at=when if veracity == "human_stated" else None,
                validated_by="human" if veracity == "human_stated" else "",
            )

        # History: the message queue decision replaced an older one.
        old_queue = Fact.objects.create(
            workspace=ws,
            domain=domains["architecture"],
            topic="message-queue",
            memory_type="decision",
            veracity="agent_inferred",
            confidence=0.7,
            content="Background jobs run on RQ with a single worker.",
            created_at=now - timedelta(days=400),
            observed_at=now - timedelta(days=400),
            last_mentioned_at=now - timedelta(days=400),
            origin="seed",
            source="seed_demo",
            superseded_by=facts["message-queue"],
            superseded_at=now - timedelta(days=120),
            supersede_reason="Moved to Celery + Redis for retries and scheduling.",
        )
        # A conflict: an agent claimed Node 22; the human-stated build note won.
        loser = Fact.objects.create(
            workspace=ws,
            domain=domains["repo:web-app/context"],
            topic="build",
            memory_type="procedure",
            veracity="tool_generated",
            confidence=0.5,
            content="The web-app builds with Node 22 and `yarn build`.",
            created_at=now - timedelta(days=10),
            observed_at=now - timedelta(days=10),
            last_mentioned_at=now - timedelta(days=10),
            origin="seed",
            source="seed_demo",
            superseded_by=facts["build"],
            superseded_at=now - timedelta(days=10),
            supersede_reason="conflict: lost on veracity",
        )
        Conflict.objects.create(
            workspace=ws,
            domain=domains["repo:web-app/context"],
            topic="build",
            existing=facts["build"],
            proposed=loser,
            winner=facts["build"],
            loser=loser,
            rule=Conflict.Rule.VERACITY,
            similarity=0.82,
            detected_at=now - timedelta(days=10),
        )
        # A possible conflict: a new lead, or a second one? The wording cannot tell, so both facts
        # stay live and the review queue asks a person.
        lead, new_lead = (
            Fact.objects.create(
                workspace=ws,
                domain=domains["knowledge"],
                topic="platform-team",
                memory_type="profile",
                veracity="agent_inferred",
                confidence=0.7,
                content=content,
                created_at=now - timedelta(days=days),
                observed_at=now - timedelta(days=days),
                last_mentioned_at=now - timedelta(days=days),
                status_changed_at=now - timedelta(days=days),
                origin="seed",
                source="seed_demo",
            )
            for content, days in (("Mia leads the platform team.", 60), ("Omar leads the platform team.", 2))
        )
        Conflict.objects.create(
            workspace=ws,
            domain=domains["knowledge"],
            topic="platform-team",
            existing=lead,
            proposed=new_lead,
            status=Conflict.Status.OPEN,
            resolution="",
            rule="",
            reason="unsure: `Omar` where the other has `Mia`",
            similarity=0.65,
            detected_at=now - timedelta(days=2),
        )
        for label, rule, role_name in POLICIES:
            Policy.objects.create(
                workspace=ws, domain=domains[label], rule=rule, required_role=roles[role_name] if role_name else None
            )
        agent, key = create_agent(workspace=ws, name="coder-1", role=coder, by=by)
        create_agent(workspace=ws, name="planner-1", role=planner, by=by)
        verifier, _ = create_agent(workspace=ws, name="verifier-1", role=coder, by=by)
        verifier = set_trust_flags(agent=verifier, by=by, is_verifier=True)
        seed_remember_review(agent)
        seed_candidates(domains, Actor.of_agent(agent), Actor.of_agent(verifier))
        record_event(
            actor=by,
            verb="demo.seeded",
            workspace_id=ws.pk,
            target=ws,
            detail={"facts": len(FACTS) + 2, "superseded": old_queue.pk, "agent": agent.name},
        )
        # People: the demo admin (created by engram_up) is made a workspace admin there.
        for user in access.superusers():
            WorkspaceMembership.objects.get_or_create(user=user, workspace=ws, defaults={"is_admin": True})
        return key
