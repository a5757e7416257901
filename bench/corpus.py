"""Realistic engineering facts and agent tasks for the benchmarks, generated from a seed.

Facts read like what coding agents and their people write down: decisions, conventions,
procedures, incidents, observations about services, with identifiers, numbers and names.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

SERVICES = [
    "ledger-svc",
    "payments-svc",
    "invoice-worker",
    "edge-gw",
    "keymaster",
    "notify-svc",
    "search-indexer",
    "meter-svc",
    "tax-svc",
    "pdf-renderer",
    "outbox-relay",
    "billing-api",
    "web-bff",
    "auth-proxy",
    "report-svc",
    "export-worker",
    "dunning-job",
    "fx-rates",
    "audit-log",
    "session-store",
    "feature-flags",
    "usage-rollup",
    "webhook-dispatcher",
    "catalog-svc",
    "pricing-engine",
    "identity-svc",
    "scheduler",
    "mailer",
    "cdn-purge",
    "image-resizer",
]
STORES = [
    "PostgreSQL 16",
    "Redis 7",
    "Kafka",
    "RabbitMQ",
    "ClickHouse",
    "S3",
    "Elasticsearch 8",
    "DynamoDB",
    "Snowflake",
]
TOOLS = [
    "Argo CD",
    "GitHub Actions",
    "Terraform",
    "Helm",
    "Grafana",
    "Prometheus",
    "Sentry",
    "PagerDuty",
    "Vault",
    "Playwright",
    "pytest",
    "ruff",
    "mypy",
    "golangci-lint",
    "Renovate",
    "Tilt",
    "dbt",
    "Airflow",
]
PEOPLE = [
    "Priya Raman",
    "Marcus Oyelaran",
    "Dana Kowalski",
    "Tomás Herrera",
    "Lena Fischer",
    "Aiko Tanaka",
    "Jonah Weiss",
    "Kwame Asante",
    "Sofia Marin",
    "Ravi Patel",
    "Elif Demir",
    "Noah Berg",
]
REPOS = ["web-app", "billing", "data-pipeline", "infra", "mobile"]
DOMAINS = ["architecture", "conventions", "operations", "incidents", "security", "people", "testing", "performance"]
ERRORS = ["TIMEOUT", "CONFLICT", "RATE_LIMIT", "UNAVAILABLE", "INVALID", "DUPLICATE", "NOT_FOUND", "DECLINED"]
CONFIG = ["TIMEOUT_MS", "POOL_SIZE", "RETRY_MAX", "BATCH_SIZE", "CACHE_TTL_SECONDS", "RATE_LIMIT_RPS", "WORKERS"]
ACTIONS = [
    "retries",
    "caches",
    "batches",
    "validates",
    "signs",
    "compresses",
    "deduplicates",
    "rate-limits",
    "logs",
    "encrypts",
    "paginates",
    "streams",
]
OBJECTS = [
    "webhook deliveries",
    "invoice PDFs",
    "ledger postings",
    "session tokens",
    "usage events",
    "tax quotes",
    "export files",
    "search documents",
    "email notifications",
    "card authorisations",
    "FX rates",
    "audit records",
]


@dataclass(frozen=True)
class GeneratedFact:
    domain: str
    repo: str | None
    topic: str
    content: str
    memory_type: str
    veracity: str


def _fact(rng: random.Random, i: int) -> GeneratedFact:
    service = rng.choice(SERVICES)
    other = rng.choice(SERVICES)
    store, tool, person = rng.choice(STORES), rng.choice(TOOLS), rng.choice(PEOPLE)
    error = f"ERR_{service.split('-')[0].upper()}_{rng.choice(ERRORS)}"
    config = f"{service.split('-')[0].upper()}_{rng.choice(CONFIG)}"
    number = rng.choice([2, 3, 5, 8, 10, 15, 20, 25, 30, 45, 60, 90, 120, 250, 500, 1000, 3000, 5000])
    port = rng.choice([8080, 8443, 9090, 5432, 6379, 9092, 3000, 8000])
    kind = i % 12
    if kind == 0:
        return GeneratedFact(
            "architecture",
            None,
            service,
            f"{service} stores its state in {store} and talks to {other} over gRPC on port {port}.",
            "decision",
            "human_stated",
        )
    if kind == 1:
        return GeneratedFact(
            "operations",
            None,
            config.lower(),
            f"{config} is set to {number} for {service} in production; staging uses {max(1, number // 2)}.",
            "observation",
            "tool_generated",
        )
    if kind == 2:
        return GeneratedFact(
            "incidents",
            None,
            f"inc-{i % 400}",
            f"INC-{2000 + i % 400}: {service} returned {error} for {number} minutes after a {tool} change; {other} queued retries until it recovered.",
            "event",
            "human_stated",
        )
    if kind == 3:
        return GeneratedFact(
            "conventions",
            None,
            f"{service}-style",
            f"In {service}, every handler {rng.choice(ACTIONS)} {rng.choice(OBJECTS)} before calling {other}; reviewers reject changes that skip it.",
            "convention",
            "agent_inferred",
        )
    if kind == 4:
        return GeneratedFact(
            "people",
            None,
            person.split()[0].lower(),
            f"{person} owns {service} and prefers {rng.choice(['small PRs', 'async reviews', 'design docs first', 'pairing on incidents', 'written runbooks'])}; ping them in #{service}.",
            "profile",
            "human_stated",
        )
    if kind == 5:
        repo = rng.choice(REPOS)
        return GeneratedFact(
            "context",
            repo,
            "build",
            f"To build {repo}, run `make {rng.choice(['build', 'dev', 'check', 'release'])}`; it needs {tool} and takes about {number % 20 + 1} minutes on CI.",
            "procedure",
            "agent_inferred",
        )
    if kind == 6:
        return GeneratedFact(
            "security",
            None,
            f"{service}-secrets",
            f"{service} reads its credentials from {tool if tool == 'Vault' else 'Vault'} at secret/{service}/{rng.choice(['db', 'api', 'signing'])}; keys rotate every {number % 180 + 30} days.",
            "convention",
            "human_stated",
        )
    if kind == 7:
        return GeneratedFact(
            "testing",
            None,
            f"{service}-tests",
            f"The {service} integration tests need {store} running; use {tool} and expect {error} when the fixture data is stale.",
            "procedure",
            "agent_inferred",
        )
    if kind == 8:
        return GeneratedFact(
            "performance",
            None,
            f"{service}-latency",
            f"p95 latency of {service} is {number} ms under normal load; above {number * 2} ms {other} starts timing out.",
            "observation",
            "tool_generated",
        )
    if kind == 9:
        repo = rng.choice(REPOS)
        return GeneratedFact(
            "context",
            repo,
            f"{service}-owner",
            f"In the {repo} repo, changes to {service} need a review from {person}, and {config} must stay below {number}.",
            "decision",
            "agent_inferred",
        )
    if kind == 10:
        return GeneratedFact(
            "operations",
            None,
            f"{service}-deploy",
            f"{service} deploys through {tool} with a canary of {number % 50 + 1}% for {number % 30 + 5} minutes before full rollout.",
            "procedure",
            "imported",
        )
    return GeneratedFact(
        "architecture",
        None,
        f"{service}-{other}",
        f"{service} calls {other} asynchronously through {store}; a failure there surfaces as {error} in the {service} logs.",
        "decision",
        "agent_inferred",
    )


def facts(n: int, *, seed: int = 11, start: int = 0) -> Iterator[GeneratedFact]:
    """n facts; topics carry a bucket suffix so a topic holds a handful of facts, as real ones do."""
    rng = random.Random(seed + start)
    for i in range(start, start + n):
        fact = _fact(rng, i)
        yield GeneratedFact(
            fact.domain,
            fact.repo,
            f"{fact.topic}-{(i // 12) % 2500}"[:200],
            fact.content,
            fact.memory_type,
            fact.veracity,
        )


def tasks(n: int, *, seed: int = 5) -> list[str]:
    """Dispatch tasks and questions of the kinds agents send."""
    rng = random.Random(seed)
    shapes = [
        "Fix the {error} errors that {service} returns when {other} is slow",
        "Add retries to {service} for calls to {other} and update the runbook",
        "Why does {service} time out under load?",
        "What changed recently about {config}?",
        "Who owns {service} and how do they like reviews?",
        "How do I run the integration tests of {service} locally?",
        "Migrate {service} from {store} to a managed service without downtime",
        "What caused the INC-{inc} outage?",
        "Increase {config} for {service} and check the latency impact",
        "How is {service} deployed to production?",
    ]
    out = []
    for _ in range(n):
        service, other = rng.choice(SERVICES), rng.choice(SERVICES)
        out.append(
            rng.choice(shapes).format(
                service=service,
                other=other,
                store=rng.choice(STORES),
                inc=2000 + rng.randrange(400),
                error=f"ERR_{service.split('-')[0].upper()}_{rng.choice(ERRORS)}",
                config=f"{service.split('-')[0].upper()}_{rng.choice(CONFIG)}",
            )
        )
    return out
