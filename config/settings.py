"""Engram settings: one file, driven by the environment, failing loudly on bad values.

Environment:
  DEBUG               1/0 (default 0). With 0 the site is in production mode and
                      requires SECRET_KEY and ALLOWED_HOSTS; the development commands (make run,
                      make bench, make eval, …) and the test settings (config/settings_test.py) set 1.
  SECRET_KEY          required in production mode.
  ALLOWED_HOSTS       comma-separated; required in production mode.
  DATABASE_URL        postgres://... with the vector extension; without it Engram runs
                      an embedded PostgreSQL (pgserver) under $ENGRAM_HOME.
  DATABASE_REPLICA_URLS  postgres://...,postgres://... streaming read replicas of that database
                      (README "Read replicas"); ENGRAM_REPLICA_PIN_SECONDS, _MAX_LAG_SECONDS and
                      _CHECK_SECONDS tune them.
  ENGRAM_HOME         data directory of the embedded mode (default .engram/ in the project).
  CELERY_BROKER_URL   redis://...; without it background tasks run inline.
  ENGRAM_EMBED_BACKEND onnx (default) or torch; see memory/embeddings.py.
  ENGRAM_METRICS_TOKEN bearer token that may read /metrics (config/metrics.py); ENGRAM_METRICS_LOCAL
                      1/0: whether unforwarded loopback requests may read it without (default: DEBUG).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use 1/0, true/false, yes/no or on/off.")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number.") from None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ImproperlyConfigured(f"{name}={value} is out of range [{minimum}, {maximum}].")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0, maximum: float = 1.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number.") from None
    if not minimum <= value <= maximum:
        raise ImproperlyConfigured(f"{name}={value} is out of range [{minimum}, {maximum}].")
    return value


DEBUG = env_bool("DEBUG", False)

SECRET_KEY = env_str("SECRET_KEY")
ALLOWED_HOSTS = [h.strip() for h in env_str("ALLOWED_HOSTS").split(",") if h.strip()]
if not DEBUG:
    missing = [name for name, value in (("SECRET_KEY", SECRET_KEY), ("ALLOWED_HOSTS", ALLOWED_HOSTS)) if not value]
    if missing:
        raise ImproperlyConfigured(
            f"Production mode (DEBUG=0) needs {' and '.join(missing)}. "
            "Set SECRET_KEY to a long random string and ALLOWED_HOSTS to the site's host names "
            "(comma-separated), or run with DEBUG=1 for local use."
        )
    if len(SECRET_KEY) < 50:
        raise ImproperlyConfigured("SECRET_KEY must be at least 50 characters in production mode.")
else:
    SECRET_KEY = SECRET_KEY or "engram-insecure-development-key-do-not-use-in-production-0123456789"
    ALLOWED_HOSTS = ALLOWED_HOSTS or ["127.0.0.1", "localhost", "testserver", "[::1]"]

ENGRAM_HOME = Path(env_str("ENGRAM_HOME") or BASE_DIR / ".engram").resolve()

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "guardian",
    "memory",
    "agents",
    "review",
]

MIDDLEWARE = [
    # Request latency per view for /metrics: django-prometheus's pair, first and last.
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.middleware.BodySizeLimitMiddleware",
    "config.middleware.MalformedRequestMiddleware",
    "config.middleware.DatabaseUnavailableMiddleware",
    # Read replicas: which requests read from one, read-your-writes pins, a second attempt on the
    # primary when a replica fails mid-request. Around the session and the view; inert without replicas.
    "config.replicas.ReplicaMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.middleware.AccessMemoMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.metrics.MetricsAfterMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
# DEBUG's 500 page (and error e-mails) that can always be encoded (config.debug, issue 33).
DEFAULT_EXCEPTION_REPORTER = "config.debug.SafeExceptionReporter"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]


# --- Database -----------------------------------------------------------------------------
# Persistent connections suit servers whose threads live long — gunicorn's workers and their
# thread pools keep one connection per thread. `runserver` (`make run`) starts a new thread for
# every request, and a connection kept past its request would outlive its thread until
# PostgreSQL refuses new clients; there each request closes its own.
CONN_MAX_AGE = env_int("ENGRAM_CONN_MAX_AGE", 0 if sys.argv[1:2] == ["runserver"] else 60, minimum=0)


def _database_from_url(url: str, variable: str = "DATABASE_URL") -> dict[str, Any]:
    import dj_database_url

    try:
        config = dict(dj_database_url.parse(url, conn_max_age=CONN_MAX_AGE, conn_health_checks=True))
    except Exception as exc:
        raise ImproperlyConfigured(
            f"{variable} could not be parsed ({exc}). Expected postgres://user:pass@host:5432/db."
        ) from None
    if config.get("ENGINE") != "django.db.backends.postgresql":
        raise ImproperlyConfigured(
            f"{variable} must point at PostgreSQL (postgres:// or postgresql://) with the vector extension."
        )
    return config


DATABASE_URL = env_str("DATABASE_URL")
EMBEDDED_DATABASE = not DATABASE_URL
if DATABASE_URL:
    DATABASES = {"default": _database_from_url(DATABASE_URL)}
else:
    from config.embedded import ensure_embedded_postgres

    _embedded = ensure_embedded_postgres(ENGRAM_HOME, env_str("ENGRAM_DB_NAME") or "engram")
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": env_str("ENGRAM_DB_NAME") or "engram",
            "USER": "postgres",
            "PASSWORD": "",
            "HOST": _embedded.socket_dir,
            "PORT": str(_embedded.port),
            "CONN_MAX_AGE": CONN_MAX_AGE,
            "CONN_HEALTH_CHECKS": True,
        }
    }
DATABASES["default"].setdefault("OPTIONS", {})
DATABASES["default"]["OPTIONS"].setdefault("connect_timeout", 5)
DATABASES["default"]["TEST"] = {"NAME": env_str("ENGRAM_TEST_DB_NAME") or "test_engram"}

# Read replicas (README "Read replicas"): streaming standbys of the primary, one URL each,
# comma-separated, become the aliases replica_1, replica_2, … memory.routing sends recall and
# page reads to a healthy one (config.replicas decides which requests), every write and
# everything else to `default`. Tests mirror them onto `default`: the suite runs unchanged.
DATABASE_REPLICA_URLS = [url.strip() for url in env_str("DATABASE_REPLICA_URLS").split(",") if url.strip()]
for _number, _url in enumerate(DATABASE_REPLICA_URLS, start=1):
    _replica = _database_from_url(_url, "DATABASE_REPLICA_URLS")
    _replica.setdefault("OPTIONS", {})
    # A replica that does not answer is skipped: never let a connection attempt hold a request long.
    _replica["OPTIONS"].setdefault("connect_timeout", 2)
    _replica["TEST"] = {"MIRROR": "default"}
    DATABASES[f"replica_{_number}"] = _replica
ENGRAM_DATABASE_REPLICAS = [f"replica_{n}" for n in range(1, len(DATABASE_REPLICA_URLS) + 1)]
DATABASE_ROUTERS = ["memory.routing.ReplicaRouter"]
# A replica whose replay lag is above this is skipped until it catches up.
ENGRAM_REPLICA_MAX_LAG_SECONDS = env_int("ENGRAM_REPLICA_MAX_LAG_SECONDS", 5, minimum=0, maximum=86_400)
# How often each process checks each replica (reachable, lag), in a background thread.
ENGRAM_REPLICA_CHECK_SECONDS = env_int("ENGRAM_REPLICA_CHECK_SECONDS", 2, minimum=1, maximum=300)
# After a caller writes, its reads go to the primary for this long (read-your-writes). A replica
# serving reads has replayed everything older than MAX_LAG + CHECK seconds, so a pin at least
# that long means a caller always reads its own writes; 0 turns pinning off.
ENGRAM_REPLICA_PIN_SECONDS = env_int("ENGRAM_REPLICA_PIN_SECONDS", 10, minimum=0, maximum=3_600)
if 0 < ENGRAM_REPLICA_PIN_SECONDS < ENGRAM_REPLICA_MAX_LAG_SECONDS + ENGRAM_REPLICA_CHECK_SECONDS:
    raise ImproperlyConfigured(
        f"ENGRAM_REPLICA_PIN_SECONDS={ENGRAM_REPLICA_PIN_SECONDS} is shorter than a replica may lag "
        f"(ENGRAM_REPLICA_MAX_LAG_SECONDS + ENGRAM_REPLICA_CHECK_SECONDS = "
        f"{ENGRAM_REPLICA_MAX_LAG_SECONDS + ENGRAM_REPLICA_CHECK_SECONDS}): a caller could miss its own "
        "writes. Raise it, lower the lag bound, or set it to 0 to turn pinning off."
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
AUTH_PASSWORD_VALIDATORS = (
    []
    if DEBUG
    else [
        {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
        {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    ]
)
# The site's own sign-in (review:login), open to members who are not staff; /admin/login/ stays for staff.
LOGIN_URL = "review:login"
LOGIN_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every start when it is missing

# --- Security (production mode) ------------------------------------------------------------
ENGRAM_MAX_BODY_BYTES = env_int("ENGRAM_MAX_BODY_BYTES", 2_000_000, minimum=10_000)
DATA_UPLOAD_MAX_MEMORY_SIZE = ENGRAM_MAX_BODY_BYTES
if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    CSRF_TRUSTED_ORIGINS = [f"https://{h}" for h in ALLOWED_HOSTS if h != "*"]
X_FRAME_OPTIONS = "DENY"

# --- API ---------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["agents.auth.AgentKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["agents.auth.IsAgent"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["agents.api.renderers.SafeJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["agents.api.parsers.SafeJSONParser"],
    "EXCEPTION_HANDLER": "agents.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_PAGINATION_CLASS": "agents.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": ["agents.api.throttling.AgentRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"agent": env_str("ENGRAM_THROTTLE_RATE") or "6000/min"},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Engram agent API",
    "DESCRIPTION": "Governed long-term memory for AI agents. Authenticate with `Authorization: Bearer <agent key>`.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "FactStatusEnum": "memory.models.FactStatus",
        "TaskStatusEnum": ["done", "queued", "running"],
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "agents.api.schema_hooks.add_error_responses",
    ],
    # Swagger UI served from our own static files: the site works without internet access.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Background work ----------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A task whose worker died unacknowledged is delivered again after this many seconds.
# Workers look for such tasks every 5 s (a cheap sorted-set range on Redis).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=1),
    "unacked_restore_interval": 5,
    "unacked_restore_throttle": 1,
}
if CELERY_BROKER_URL and not CELERY_BROKER_URL.startswith(("redis://", "rediss://", "memory://")):
    raise ImproperlyConfigured("CELERY_BROKER_URL must be a redis:// URL (or leave it unset to run tasks inline).")
# The daily jobs (memory.scheduler.DAILY_JOBS) run under `celery beat` in production; without a
# broker a web process started with ENGRAM_SCHEDULER=1 (`make run` does) runs them in-process.
ENGRAM_SCHEDULER = env_bool("ENGRAM_SCHEDULER", False)

# Throttling counters must be shared by all web processes in production: Redis when there is one.
CACHE_URL = env_str("CACHE_URL") or CELERY_BROKER_URL
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL.startswith(("redis://", "rediss://"))
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
if DATABASE_REPLICA_URLS and not DEBUG and not CACHE_URL.startswith(("redis://", "rediss://")):
    # Read-your-writes pins live in the cache: each process's own memory would forget them on the next.
    raise ImproperlyConfigured(
        "DATABASE_REPLICA_URLS needs a shared cache in production mode: set CACHE_URL to redis://…."
    )

# --- Engram ------------------------------------------------------------------------------
# Threads per process for the embedding model: one keeps latency stable under contention.
ENGRAM_EMBED_THREADS = env_int("ENGRAM_EMBED_THREADS", 1, minimum=1, maximum=64)
ENGRAM_EMBED_BATCH = env_int("ENGRAM_EMBED_BATCH", 64, minimum=1, maximum=1024)
# Bulk embedding (ingest, reindex) runs on its own session and may use every core.
ENGRAM_BULK_EMBED_THREADS = env_int("ENGRAM_BULK_EMBED_THREADS", min(os.cpu_count() or 1, 4), minimum=1, maximum=64)
# onnx (default): the package's weights exported once to ONNX and run by onnxruntime; torch:
# sentence-transformers. Same vectors (tested); onnx is about twice as fast per query.
ENGRAM_EMBED_BACKEND = env_str("ENGRAM_EMBED_BACKEND") or "onnx"
# The write classifier's second reading (memory/pair_model.py): on by default since round 5 — on
# the held-out pairs of authors O and P it swallowed no contradiction (rules alone: 2.4 %) and sent
# 25.0 % of pairs to a person (rules alone: 27.8 %); ~14 ms per pair it is asked about. Off: the
# rules decide alone (README, "What a write means").
ENGRAM_PAIR_MODEL = env_bool("ENGRAM_PAIR_MODEL", True)
if ENGRAM_EMBED_BACKEND not in {"onnx", "torch"}:
    raise ImproperlyConfigured("ENGRAM_EMBED_BACKEND must be onnx or torch.")
ENGRAM_FACT_MAX_CHARS = env_int("ENGRAM_FACT_MAX_CHARS", 16_000, minimum=1_000)
# How far in the future a caller's timestamp (a fact's observed_at, an episode's started_at) may
# lie: clocks of agents' hosts drift a little; a date beyond now + this is refused (400).
ENGRAM_CLOCK_SKEW_SECONDS = env_int("ENGRAM_CLOCK_SKEW_SECONDS", 300, minimum=0, maximum=86_400)
# Conflict detection (SPEC §3), justified by tests/data/labelled_pairs.py: at or above
# DUPLICATE (and agreeing on numbers and names) a proposal restates a live fact; between
# CONTRADICTION and DUPLICATE it contradicts it; below, the two are independent.
ENGRAM_DUPLICATE_THRESHOLD = env_float("ENGRAM_DUPLICATE_THRESHOLD", 0.82)
ENGRAM_CONTRADICTION_THRESHOLD = env_float("ENGRAM_CONTRADICTION_THRESHOLD", 0.54)
# How recall counters are written: "background" batches them off the request path (about once a
# second); "sync" writes them before the call returns (the test settings).
ENGRAM_RECALL_MODE = env_str("ENGRAM_RECALL_MODE") or "background"
if ENGRAM_RECALL_MODE not in {"sync", "background"}:
    raise ImproperlyConfigured("ENGRAM_RECALL_MODE must be sync or background.")
# The exposure trail (issue 21: which agent was served which fact or policy, when) is kept this many
# days, then pruned by the daily job `prune-exposures`; 0 keeps it forever.
ENGRAM_EXPOSURE_RETENTION_DAYS = env_int("ENGRAM_EXPOSURE_RETENTION_DAYS", 90, minimum=0, maximum=36_500)
# A memory-agent run (SPEC §9) with no activity (a bank write or a logged decision of its agent)
# for this many hours is closed as abandoned by the daily job `close-abandoned-runs` (issue 39): a
# runtime cut off mid-way leaves no run `running` for good. 0 never closes one.
ENGRAM_RUN_ABANDON_HOURS = env_int("ENGRAM_RUN_ABANDON_HOURS", 24, minimum=0, maximum=8_760)
# Recall ranking: decay (fully, per memory type: memory/decay.py; a type's floor is a DecayProfile
# setting, none by default) x confidence scales a candidate; facts of the caller's repo are
# multiplied by REPO_BOOST.
ENGRAM_REPO_BOOST = env_float("ENGRAM_REPO_BOOST", 1.5, minimum=1.0, maximum=10.0)
# Re-mention reinforcement: c <- c + (1 - c) * r * w (SPEC §3).
ENGRAM_REINFORCEMENT_RATE = env_float("ENGRAM_REINFORCEMENT_RATE", 0.3)
# Long-polls (GET reviews/{id}/?wait=N) one web process holds at once; beyond, a poll answers at
# once with Retry-After (review/waiting.py). config/gunicorn_conf.py sets half of its threads, so
# the other half always serves pages; 0 never holds a request (for sync, one-request workers).
ENGRAM_MAX_WAITERS = env_int("ENGRAM_MAX_WAITERS", 4, minimum=0, maximum=1_000)
# Bounded pushes: the longest rule one policy may have (every active policy goes into every
# dispatch); the workspace's `policy_budget_chars` bounds all of them together.
ENGRAM_POLICY_MAX_CHARS = env_int("ENGRAM_POLICY_MAX_CHARS", 500, minimum=50, maximum=2_000)
# Bounded reads: the largest `limit` (default PAGE_SIZE) and `offset` a list endpoint accepts;
# beyond them the answer is 400 `invalid_input` on that field (agents.api.pagination).
ENGRAM_API_MAX_PAGE_SIZE = env_int("ENGRAM_API_MAX_PAGE_SIZE", 200, minimum=1, maximum=1_000)
ENGRAM_API_MAX_OFFSET = env_int("ENGRAM_API_MAX_OFFSET", 1_000_000, minimum=0, maximum=100_000_000)
# Batch writes (POST facts/batch/): the most items one request may carry; more is 400
# `batch_too_large` and nothing is written. The body limit (ENGRAM_MAX_BODY_BYTES) applies too.
ENGRAM_BATCH_MAX_ITEMS = env_int("ENGRAM_BATCH_MAX_ITEMS", 100, minimum=1, maximum=1_000)
# Bounded jobs: a consolidate/harmonize job not finished this many seconds after it was queued or
# started is presumed dead (a crashed worker or web process) and no longer blocks a new one. At
# least the broker's visibility timeout, after which a lost task is redelivered.
ENGRAM_JOB_TIMEOUT_SECONDS = env_int(
    "ENGRAM_JOB_TIMEOUT_SECONDS", CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"], minimum=10
)
# Webhooks (memory.webhooks): attempts per delivery before it is marked failed, and each POST's
# timeout. Private, loopback and link-local addresses are refused (SSRF) unless allowed here
# (local development and tests).
ENGRAM_WEBHOOK_MAX_ATTEMPTS = env_int("ENGRAM_WEBHOOK_MAX_ATTEMPTS", 6, minimum=1, maximum=20)
ENGRAM_WEBHOOK_TIMEOUT_SECONDS = env_int("ENGRAM_WEBHOOK_TIMEOUT_SECONDS", 5, minimum=1, maximum=60)
ENGRAM_WEBHOOKS_ALLOW_PRIVATE = env_bool("ENGRAM_WEBHOOKS_ALLOW_PRIVATE", False)
# Without a broker the first attempts run from a thread of their own, so a slow receiver never
# holds the request that wrote; on, they run in the writing thread once it commits (the test
# settings: a test sees the delivery when the write returns). With a broker they are queued.
ENGRAM_WEBHOOKS_INLINE = env_bool("ENGRAM_WEBHOOKS_INLINE", False)

# /metrics (config/metrics.py): Prometheus reads it with `Authorization: Bearer <token>`; an
# unforwarded request from 127.0.0.1/::1 needs none while ENGRAM_METRICS_LOCAL is on (default in
# DEBUG mode only: behind a proxy on the same host every request comes from 127.0.0.1).
ENGRAM_METRICS_TOKEN = env_str("ENGRAM_METRICS_TOKEN")
if ENGRAM_METRICS_TOKEN and len(ENGRAM_METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("ENGRAM_METRICS_TOKEN must be at least 16 characters (a random string).")
ENGRAM_METRICS_LOCAL = env_bool("ENGRAM_METRICS_LOCAL", DEBUG)
# django-prometheus's latency buckets, from 5 ms (a search is tens of ms) to a long-poll's minute.
PROMETHEUS_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, float("inf"))

LOG_FORMAT = env_str("LOG_FORMAT") or ("plain" if DEBUG else "json")
if LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured("LOG_FORMAT must be plain or json.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "config.logs.JsonFormatter"},
    },
    "filters": {"without_queries": {"()": "config.logs.RedactQueryStrings"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["without_queries"]}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL") or "INFO"},
    "loggers": {
        "pgserver": {"level": "WARNING"},
        "sentence_transformers": {"level": "WARNING"},
        # The development server's request lines, through the console handler (query strings redacted).
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
