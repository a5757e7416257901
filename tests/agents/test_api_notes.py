"""The agent's private notes and observations through the API: own eyes only, bounded input."""

import pytest

from memory.models import AuditEvent, Observation, WorkingMemory
from tests.conftest import client_for


def _counts():
    return WorkingMemory.objects.count(), Observation.objects.count(), AuditEvent.objects.count()


def test_get_notes_before_any_write_is_empty(world):
    response = client_for(world.coder).get("/api/v1/me/notes/")
    assert response.status_code == 200
    assert response.json() == {"notes": "", "updated_at": None, "observations": []}


def test_put_notes_replaces_the_scratchpad_and_is_audited(world):
    client = client_for(world.coder)
    before = AuditEvent.objects.count()
    response = client.put("/api/v1/me/notes/", {"notes": "  todo:\n- fix CI  "}, format="json")
    assert response.status_code == 200
    assert response.json()["notes"] == "  todo:\n- fix CI  "  # verbatim
    assert response.json()["updated_at"] is not None
    assert AuditEvent.objects.count() == before + 1
    assert client.get("/api/v1/me/notes/").json()["notes"] == "  todo:\n- fix CI  "


def test_notes_and_observations_are_private_to_the_agent(world):
    coder = client_for(world.coder)
    coder.put("/api/v1/me/notes/", {"notes": "coder only"}, format="json")
    coder.post("/api/v1/me/observations/", {"text": "coder saw a flaky test"}, format="json")
    for other in (world.coder2, world.planner, world.foreign_agent):  # coder2 has the same role
        body = client_for(other).get("/api/v1/me/notes/").json()
        assert body == {"notes": "", "updated_at": None, "observations": []}
    client_for(world.coder2).put("/api/v1/me/notes/", {"notes": "coder2 only"}, format="json")
    assert coder.get("/api/v1/me/notes/").json()["notes"] == "coder only"


def test_record_observation_is_201_with_its_id_and_shows_in_the_notes_view(world):
    client = client_for(world.coder)
    before = AuditEvent.objects.count()
    response = client.post("/api/v1/me/observations/", {"text": "CI took 14 minutes."}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "text", "created_at"}
    assert Observation.objects.get(pk=body["id"]).agent == world.coder
    assert AuditEvent.objects.count() == before + 1
    observations = client.get("/api/v1/me/notes/").json()["observations"]
    assert [o["id"] for o in observations] == [body["id"]]


def test_an_observation_can_be_cited_as_a_fact_source_only_by_its_agent(world):
    obs_id = client_for(world.coder).post("/api/v1/me/observations/", {"text": "seen"}, format="json").json()["id"]
    payload = {
        "domain": "architecture",
        "topic": "ci",
        "content": "CI runs on every push.",
        "memory_type": "convention",
        "source_observation_ids": [obs_id],
    }
    response = client_for(world.coder2).post("/api/v1/facts/", payload, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "unknown_observation"


@pytest.mark.parametrize(
    "body",
    [{}, {"notes": None}, {"notes": ["a"]}, {"notes": {"a": 1}}, {"notes": "x" * 20_001}],
)
def test_put_notes_bad_input_is_400_and_writes_nothing(world, body):
    before = _counts()
    response = client_for(world.coder).put("/api/v1/me/notes/", body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert "notes" in response.json()["fields"]
    assert _counts() == before


@pytest.mark.parametrize(
    "body",
    [{}, {"text": ""}, {"text": "   "}, {"text": None}, {"text": ["a"]}, {"text": "x" * 4_001}],
)
def test_record_observation_bad_input_is_400_and_writes_nothing(world, body):
    before = _counts()
    response = client_for(world.coder).post("/api/v1/me/observations/", body, format="json")
    assert response.status_code == 400
    assert "text" in response.json()["fields"]
    assert _counts() == before


def test_notes_endpoints_need_a_key(world):
    assert client_for(None).get("/api/v1/me/notes/").status_code == 401
    assert client_for(None).put("/api/v1/me/notes/", {"notes": "x"}, format="json").status_code == 401
    assert client_for(None).post("/api/v1/me/observations/", {"text": "x"}, format="json").status_code == 401
