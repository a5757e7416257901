"""Labelled fact pairs (same topic) that justify the conflict-detection thresholds.

same: the second restates the first (a re-mention);
contradiction: about the same thing, saying something else (a conflict);
unrelated: different facts that merely share a topic label (both stay live).
"""

SAME = [
    ("Production deploys happen on Tuesdays.", "Deploys to production happen on Tuesdays."),
    ("The API uses PostgreSQL as its primary database.", "PostgreSQL is the primary database of the API."),
    ("Run the test suite with `make test` before merging.", "Before merging, run the test suite with `make test`."),
    ("The billing service is written in Go.", "The billing service is implemented in Go."),
    ("Maria prefers small pull requests.", "Maria likes pull requests to be small."),
    ("Feature flags are cached for 60 seconds.", "Feature flag values are cached for 60 seconds."),
    ("The web app requires Node 20.", "Node 20 is required to build the web app."),
    ("Invoices are immutable once issued.", "Once an invoice is issued it is immutable."),
    ("Redis runs with maxmemory-policy noeviction.", "Redis is configured with the noeviction maxmemory policy."),
    ("The staging cluster runs in eu-west-1.", "Staging runs in the eu-west-1 region."),
    (
        "Secrets are stored in Vault, never in the repository.",
        "Secrets live in Vault and are never committed to the repository.",
    ),
    ("The mobile team releases every two weeks.", "The mobile team ships a release every two weeks."),
    ("Logs are retained for 30 days.", "We keep logs for 30 days."),
    ("Customer emails are sent through Postmark.", "We send customer emails via Postmark."),
    ("The monorepo uses pnpm workspaces.", "pnpm workspaces are used in the monorepo."),
    (
        "Database migrations must be backwards compatible.",
        "Migrations of the database have to stay backwards compatible.",
    ),
    ("The on-call rotation changes every Monday at 9:00 UTC.", "On-call rotates every Monday at 9:00 UTC."),
    ("Use UTC for all timestamps stored in the database.", "All timestamps in the database are stored in UTC."),
    (
        "The search service indexes documents with Elasticsearch 8.",
        "Documents are indexed by the search service using Elasticsearch 8.",
    ),
    ("Code review needs two approvals.", "Two approvals are required in code review."),
]

CONTRADICTION = [
    ("Production deploys happen on Tuesdays.", "Production deploys happen on Fridays."),
    ("The API uses PostgreSQL as its primary database.", "The API uses MySQL as its primary database."),
    ("The billing service is written in Go.", "The billing service is written in Rust."),
    ("Feature flags are cached for 60 seconds.", "Feature flags are cached for 10 minutes."),
    ("The web app requires Node 20.", "The web app requires Node 22."),
    ("Invoices are immutable once issued.", "Invoices can be edited after they are issued."),
    ("Redis runs with maxmemory-policy noeviction.", "Redis runs with maxmemory-policy allkeys-lru."),
    ("The staging cluster runs in eu-west-1.", "The staging cluster runs in us-east-1."),
    ("Logs are retained for 30 days.", "Logs are retained for 90 days."),
    ("Customer emails are sent through Postmark.", "Customer emails are sent through SendGrid."),
    ("The monorepo uses pnpm workspaces.", "The monorepo uses yarn workspaces."),
    ("Code review needs two approvals.", "Code review needs one approval."),
    ("The mobile team releases every two weeks.", "The mobile team releases every month."),
    ("Use UTC for all timestamps stored in the database.", "Store timestamps in the database in local time."),
    (
        "The search service indexes documents with Elasticsearch 8.",
        "The search service indexes documents with OpenSearch 2.",
    ),
    (
        "The on-call rotation changes every Monday at 9:00 UTC.",
        "The on-call rotation changes every Friday at 17:00 UTC.",
    ),
    ("Maria prefers small pull requests.", "Maria prefers large pull requests that bundle related changes."),
    (
        "Secrets are stored in Vault, never in the repository.",
        "Secrets are stored in environment files committed to the repository.",
    ),
    ("The CI pipeline runs on GitHub Actions.", "The CI pipeline runs on GitLab CI."),
    ("Background jobs run on Celery.", "Background jobs run on Sidekiq."),
]

UNRELATED = [
    ("Production deploys happen on Tuesdays.", "The deploy script needs the AWS_PROFILE variable set."),
    ("The API uses PostgreSQL as its primary database.", "Database backups are encrypted with a KMS key."),
    ("The billing service is written in Go.", "The billing team meets every Thursday."),
    ("Feature flags are cached for 60 seconds.", "Flag names use kebab-case."),
    ("The web app requires Node 20.", "The web app's favicon lives in public/icons."),
    ("Invoices are immutable once issued.", "Invoice PDFs are rendered with WeasyPrint."),
    ("Redis runs with maxmemory-policy noeviction.", "The Redis dashboard is in Grafana under Infra."),
    ("The staging cluster runs in eu-west-1.", "Staging data is reset every Sunday night."),
    ("Logs are retained for 30 days.", "Log lines must not contain customer email addresses."),
    ("Customer emails are sent through Postmark.", "Email templates are written in MJML."),
    ("The monorepo uses pnpm workspaces.", "The monorepo's root README explains the folder layout."),
    ("Code review needs two approvals.", "Reviewers should answer within one working day."),
    ("The mobile team releases every two weeks.", "The iOS app supports iOS 16 and later."),
    ("Use UTC for all timestamps stored in the database.", "Primary keys are bigint identity columns."),
    ("The search service indexes documents with Elasticsearch 8.", "Search results are paginated with cursors."),
    ("The on-call rotation changes every Monday at 9:00 UTC.", "Incidents are declared in the #incidents channel."),
    ("Maria prefers small pull requests.", "Maria works from the Lisbon office."),
    ("Secrets are stored in Vault, never in the repository.", "Vault tokens expire after 8 hours."),
    ("The CI pipeline runs on GitHub Actions.", "CI caches the pip download directory."),
    ("Background jobs run on Celery.", "The nightly report job emails the finance team."),
]
