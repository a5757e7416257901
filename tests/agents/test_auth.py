"""Agent keys: stored hashed, shown once, revocable; every call acts as one agent in its workspace."""

import io

import pytest
from django.core.management import call_command

from agents.services import create_agent, revoke_agent, rotate_key
from memory.actors import Actor
from memory.models import Agent, AuditEvent, hash_key
from tests.conftest import client_for


def test_create_agent_stores_only_the_hash_of_the_key(world):
    agent, key = create_agent(workspace=world.workspace, name="new-agent", role=world.coder_role, by=Actor.system("t"))
    stored = Agent.objects.get(pk=agent.pk)
    assert stored.key_hash == hash_key(key)
    assert key not in {
        getattr(stored, f.attname) for f in Agent._meta.concrete_fields if isinstance(getattr(stored, f.attname), str)
    }
    assert AuditEvent.objects.filter(verb="agent.created", target_id=agent.pk).exists()


def test_me_returns_the_agent_its_role_and_workspace(world):
    response = client_for(world.planner).get("/api/v1/me/")
    assert response.status_code == 200
    assert response.json()["name"] == "planner-a"
    assert response.json()["role"] == "planner"
    assert response.json()["workspace"] == "acme"


def test_me_of_an_agent_in_another_workspace_shows_only_its_own_workspace(world):
    body = client_for(world.foreign_agent).get("/api/v1/me/").json()
    assert body["workspace"] == "globex"
    assert "acme" not in str(body)


def test_no_key_gets_401_with_the_error_format(world):
    response = client_for(None).get("/api/v1/me/")
    assert response.status_code == 401
    assert response.json() == {"code": "not_authenticated", "detail": response.json()["detail"], "fields": {}}
    assert response["WWW-Authenticate"] == "Bearer"


def test_unknown_key_and_malformed_header_get_401(world):
    client = client_for(None)
    client.credentials(HTTP_AUTHORIZATION="Bearer engram_not-a-real-key")
    assert client.get("/api/v1/me/").json()["code"] == "invalid_key"
    client.credentials(HTTP_AUTHORIZATION="Token abc")
    assert client.get("/api/v1/me/").status_code == 401


def test_revoked_key_gets_401_and_rotation_issues_a_working_key(world):
    revoke_agent(agent=world.coder, by=Actor.system("t"))
    response = client_for(world.coder).get("/api/v1/me/")
    assert response.status_code == 401
    assert response.json()["code"] == "key_revoked"
    new_key = rotate_key(agent=world.coder, by=Actor.system("t"))
    client = client_for(None)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {new_key}")
    assert client.get("/api/v1/me/").status_code == 200
    assert client_for(world.coder).get("/api/v1/me/").status_code == 401  # the old key stays dead


def test_unknown_api_path_answers_json_404(world, api):
    response = api.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_schema_and_docs_are_served_without_a_key(db, client):
    schema = client.get("/api/v1/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/me/" in schema.content
    assert b"bearer" in schema.content
    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()


@pytest.mark.django_db
def test_create_agent_command_prints_the_key_alone_on_its_last_line():
    out = io.StringIO()
    call_command(
        "create_agent", "--workspace", "newco", "--name", "bot", "--role", "coder", stdout=out, stderr=io.StringIO()
    )
    key = out.getvalue().strip().splitlines()[-1]
    agent = Agent.objects.select_related("workspace", "role").get(key_hash=hash_key(key))
    assert (agent.workspace.slug, agent.role.name, agent.name) == ("newco", "coder", "bot")
    client = client_for(None)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/v1/me/").json()["workspace"] == "newco"
