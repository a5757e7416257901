"""Settings fail at start with a message that says what to do."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_settings(**env: str) -> subprocess.CompletedProcess:
    """Import the settings as a deployment does: config.settings (the package's Celery app loads
    DJANGO_SETTINGS_MODULE first, which under pytest names the test settings), from `env` alone."""
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "CELERY_BROKER_URL"}
    }
    environment.update(DJANGO_SETTINGS_MODULE="config.settings", **env)
    return subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_mode_refuses_to_start_without_secret_key_and_allowed_hosts():
    result = _load_settings(DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY and ALLOWED_HOSTS" in result.stderr


def test_without_debug_set_the_site_is_in_production_mode():
    """Only the development commands (`make run`, the benches, the test settings) set DEBUG=1."""
    result = _load_settings()
    assert result.returncode != 0
    assert "Production mode (DEBUG=0) needs SECRET_KEY and ALLOWED_HOSTS" in result.stderr
    code = "import config.settings as s; print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.LOG_FORMAT)"
    environment = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "DATABASE_URL", "CELERY_BROKER_URL"}}
    environment.update(
        DJANGO_SETTINGS_MODULE="config.settings", SECRET_KEY="k" * 60, ALLOWED_HOSTS="engram.example.com"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["False", "True", "json"], done.stderr


def test_production_mode_names_the_one_missing_setting():
    result = _load_settings(DEBUG="0", SECRET_KEY="x" * 60)
    assert result.returncode != 0
    assert "needs ALLOWED_HOSTS" in result.stderr


def test_bad_boolean_fails_with_a_clear_message():
    result = _load_settings(DEBUG="maybe")
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def test_database_url_must_be_postgresql():
    result = _load_settings(DEBUG="1", DATABASE_URL="mysql://u:p@localhost/db")
    assert result.returncode != 0
    assert "DATABASE_URL must point at PostgreSQL" in result.stderr


def test_broker_url_must_be_redis():
    result = _load_settings(DEBUG="1", CELERY_BROKER_URL="amqp://localhost")
    assert result.returncode != 0
    assert "CELERY_BROKER_URL must be a redis:// URL" in result.stderr


def test_database_url_replaces_the_embedded_database():
    code = "import config.settings as s; print(s.DATABASES['default']['HOST'], s.EMBEDDED_DATABASE)"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["DATABASE_URL"] = "postgres://u:p@db.internal:5433/engram"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["db.internal", "False"]


def test_without_a_broker_tasks_run_inline_and_with_one_they_do_not():
    code = "import config.settings as s; print(s.CELERY_TASK_ALWAYS_EAGER)"
    env = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    assert (
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True).stdout.strip()
        == "True"
    )
    env["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/0"
    env["DATABASE_URL"] = "postgres://u:p@localhost/x"
    assert (
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True).stdout.strip()
        == "False"
    )
