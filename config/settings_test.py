"""The test suite's settings (pytest-django's DJANGO_SETTINGS_MODULE in pyproject.toml, and mypy's):
the product's settings in development mode, plus the choices the tests make, each said here.
Production code never asks whether it runs under tests; it reads these.

The servers and workers a test starts inherit the environment, DJANGO_SETTINGS_MODULE included:
those that stand for a deployment set DJANGO_SETTINGS_MODULE=config.settings themselves."""

import os

# Development mode, as `make run`: the built-in SECRET_KEY, local ALLOWED_HOSTS (the test client's
# `testserver` among them), no HTTPS redirect. In the environment, so that the processes the
# tests start are in development mode too; a test of production mode sets DEBUG=0 for its own.
os.environ.setdefault("DEBUG", "1")

from config.settings import *  # noqa: F403
from config.settings import REST_FRAMEWORK, env_str

# Tests create many users; PBKDF2's deliberate slowness (~0.3 s a password here) buys nothing there.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# One agent key makes hundreds of calls a second here; the tests of throttling lower the rate.
REST_FRAMEWORK = {
    **REST_FRAMEWORK,
    "DEFAULT_THROTTLE_RATES": {"agent": env_str("ENGRAM_THROTTLE_RATE") or "100000/min"},
}
# Recall counters and episodes written before the call returns: a test reads them right after.
ENGRAM_RECALL_MODE = env_str("ENGRAM_RECALL_MODE") or "sync"
# Webhook attempts made when the write commits, in its thread: a test sees the delivery (or the
# failed attempt) as soon as the write returns.
ENGRAM_WEBHOOKS_INLINE = True
# No daily-job thread, whatever the shell exports: tests call memory.scheduler.tick themselves.
ENGRAM_SCHEDULER = False
