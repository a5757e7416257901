"""Production shape: deploy checks, structured logs, health, oversized bodies, throttling."""

import json
import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import override_settings

from config.logs import JsonFormatter
from tests.conftest import client_for

ROOT = Path(__file__).resolve().parent.parent


def test_check_deploy_is_clean_in_production_settings():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "ALLOWED_HOSTS": "engram.example.com",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_json_logs_are_one_object_per_line_with_extra_fields():
    record = logging.LogRecord("engram.api", logging.WARNING, __file__, 1, "slow call %s", ("search",), None)
    record.agent = "coder-a"
    line = JsonFormatter().format(record)
    payload = json.loads(line)
    assert payload["level"] == "warning" and payload["msg"] == "slow call search" and payload["agent"] == "coder-a"
    assert "\n" not in line


def test_healthz_reports_database_broker_and_model(db, client):
    body = client.get("/healthz").json()
    assert body["ok"] is True
    assert body["database"]["ok"] and body["database"]["pgvector"]
    assert body["broker"] == {"ok": True, "mode": "inline"}
    assert body["embedding_model"]["name"] == "all-MiniLM-L6-v2"


@override_settings(ENGRAM_MAX_BODY_BYTES=20_000)
def test_oversized_bodies_are_refused_before_parsing(world, api):
    from memory.models import Fact

    response = api.post(
        "/api/v1/facts/",
        {"domain": "architecture", "topic": "t", "memory_type": "decision", "content": "x" * 30_000},
        format="json",
    )
    assert response.status_code == 413
    assert response.json()["code"] == "body_too_large"
    assert Fact.objects.count() == 0


def test_throttling_is_per_agent_and_says_when_to_retry(world, settings):
    from rest_framework.settings import api_settings

    from agents.api.throttling import AgentRateThrottle

    cache.clear()
    rates = {**api_settings.DEFAULT_THROTTLE_RATES, "agent": "3/min"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AgentRateThrottle, "THROTTLE_RATES", rates)
        coder = client_for(world.coder)
        assert [coder.get("/api/v1/me/").status_code for _ in range(3)] == [200, 200, 200]
        throttled = coder.get("/api/v1/me/")
        assert throttled.status_code == 429
        assert throttled.json()["code"] == "throttled"
        assert int(throttled["Retry-After"]) > 0
        assert client_for(world.coder2).get("/api/v1/me/").status_code == 200  # another agent, its own budget
    cache.clear()


def test_served_schema_documents_error_answers(db, client):
    schema = client.get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/facts/"]["post"]
    errors = {status for status in operation["responses"] if status[0] in "45"}
    # exactly what propose_fact can answer (agents.operations.catalog): no 404, no 403 but its own code
    assert errors == {"400", "401", "403", "406", "409", "411", "413", "415", "429", "503"}
    assert operation["responses"]["403"]["content"]["application/json"]["schema"]["allOf"][1] == {
        "type": "object",
        "properties": {"code": {"type": "string", "enum": ["veracity_not_allowed"]}},
    }
