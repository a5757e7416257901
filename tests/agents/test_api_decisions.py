"""POST decisions/ (issue 20, point 7): a meeting's decisions, relayed by an agent that carries
people's words, each a human_stated `decision` fact in `decisions`, linked to one meeting episode."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.actors import Actor
from memory.models import AuditEvent, Episode, EpisodeFact, Fact, MemoryDomain
from memory.services.decisions import split_decisions
from memory.services.facts import FactInput, propose_fact
from memory.services.tenancy import create_domain, set_grant
from tests.conftest import client_for

URL = "/api/v1/decisions/"


@pytest.fixture
def relay(world):
    type(world.coder).objects.filter(pk=world.coder.pk).update(relays_human_words=True)
    world.coder.refresh_from_db()
    return client_for(world.coder)


def _body(**overrides):
    return {
        "title": "Architecture sync",
        "date": (timezone.localdate() - timedelta(days=1)).isoformat(),
        "decisions": ["We deploy on Tuesdays only.", "The billing service moves to PostgreSQL 16."],
        **overrides,
    }


def _counts():
    return Fact.objects.count(), Episode.objects.count(), MemoryDomain.objects.count(), AuditEvent.objects.count()


def test_a_relay_agent_records_each_decision_as_a_human_stated_decision_in_one_meeting(world, relay):
    answer = relay.post(URL, _body(), format="json")
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["domain"] == "decisions"
    assert [r["outcome"] for r in body["results"]] == ["created", "created"]
    assert [r["index"] for r in body["results"]] == [0, 1]
    episode = Episode.objects.get(pk=body["episode"]["id"])
    assert (episode.kind, episode.title) == ("meeting", "Architecture sync")
    assert timezone.localtime(episode.started_at).date() == timezone.localdate() - timedelta(days=1)
    facts = Fact.objects.filter(pk__in=[r["fact"]["id"] for r in body["results"]]).select_related("domain")
    assert {(f.domain.name, f.memory_type, f.veracity, f.source) for f in facts} == {
        ("decisions", "decision", "human_stated", "meeting_decisions")
    }
    assert {f.content for f in facts} == set(_body()["decisions"])
    assert set(EpisodeFact.objects.filter(episode=episode).values_list("fact_id", flat=True)) == {f.pk for f in facts}
    assert body["results"][0]["fact"]["provenance"]["source"] == "meeting_decisions"


def test_the_same_decision_again_is_a_re_mention_and_a_reversal_supersedes(world, relay):
    first = relay.post(URL, _body(topic="deploy days", decisions=["We deploy on Tuesdays only."]), format="json")
    assert first.status_code == 201, first.content
    again = relay.post(URL, _body(topic="deploy days", decisions=["We deploy on Tuesdays only."]), format="json")
    assert [r["outcome"] for r in again.json()["results"]] == ["re_mentioned"]
    assert again.json()["results"][0]["fact"]["id"] == first.json()["results"][0]["fact"]["id"]
    reversed_ = relay.post(URL, _body(topic="deploy days", decisions=["We deploy on Thursdays only."]), format="json")
    result = reversed_.json()["results"][0]
    assert result["outcome"] in {"conflict_won", "possible_conflict"}, result
    assert result["compared_with"] == first.json()["results"][0]["fact"]["id"]


def test_a_plain_agent_is_refused_403_veracity_not_allowed_and_nothing_is_written(world):
    before = _counts()
    answer = client_for(world.coder).post(URL, _body(), format="json")
    assert answer.status_code == 403
    assert answer.json()["code"] == "veracity_not_allowed"
    assert _counts() == before


def test_a_relay_agent_without_write_on_decisions_is_403(world, relay):
    domain = create_domain(workspace=world.workspace, name="decisions", by=Actor.system("t"))
    set_grant(role=world.coder_role, domain=domain, level="read", by=Actor.system("t"))
    before = _counts()
    answer = relay.post(URL, _body(), format="json")
    assert answer.status_code == 403
    assert answer.json()["code"] == "insufficient_memory_permission"
    assert _counts() == before


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"date": (timezone.localdate() + timedelta(days=2)).isoformat()}, "date"),
        ({"date": "yesterday"}, "date"),
        ({"title": ""}, "title"),
        ({"title": "t" * 301}, "title"),
        ({"decisions": []}, "decisions"),
        ({"decisions": ["ok"] * 51}, "decisions"),
        ({"decisions": "one decision"}, "decisions"),
        ({"decisions": [{"text": "x"}]}, "decisions"),
        ({"decisions": ["   "]}, "decisions"),
        ({"topic": "x" * 201}, "topic"),
    ],
)
def test_bad_input_is_400_with_the_field_and_writes_nothing(world, relay, overrides, field):
    before = _counts()
    answer = relay.post(URL, _body(**overrides), format="json")
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == "invalid_input"
    assert any(key == field or key.startswith(f"{field}.") for key in answer.json()["fields"]), answer.json()
    assert _counts() == before


def test_one_decision_over_the_fact_limit_names_its_line_and_nothing_is_written(world, relay, settings):
    settings.ENGRAM_FACT_MAX_CHARS = 100
    before = _counts()
    answer = relay.post(URL, _body(decisions=["Short one.", "x" * 101]), format="json")
    assert answer.status_code == 400
    assert "decisions.2" in answer.json()["fields"]
    assert _counts() == before


def test_another_workspaces_decisions_domain_is_never_touched(world):
    other = create_domain(workspace=world.other_workspace, name="decisions", by=Actor.system("t"))
    propose_fact(
        domain=other,
        by=Actor.system("t"),
        data=FactInput(topic="deploy days", content="Deploys on Mondays.", memory_type="decision"),
    )
    type(world.foreign_agent).objects.filter(pk=world.foreign_agent.pk).update(relays_human_words=True)
    answer = client_for(world.foreign_agent).post(URL, _body(topic="deploy days"), format="json")
    assert answer.status_code == 201
    assert {r["fact"]["id"] for r in answer.json()["results"]} <= set(
        Fact.objects.filter(workspace=world.other_workspace).values_list("pk", flat=True)
    )
    assert not MemoryDomain.objects.filter(workspace=world.workspace, name="decisions").exists()


def test_the_schema_documents_the_endpoint(world, api):
    schema = api.get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/decisions/"]["post"]
    assert operation["operationId"] == "record_meeting_decisions"
    assert {"201", "400", "403"} <= set(operation["responses"])


def test_pasted_text_splits_per_line_or_per_paragraph():
    assert split_decisions("- Ship on Tuesdays\n* Freeze on Fridays\n\n") == ["Ship on Tuesdays", "Freeze on Fridays"]
    assert split_decisions("1. Use Postgres\r\n2) Drop Mongo") == ["Use Postgres", "Drop Mongo"]
    assert split_decisions("We move billing\nto Postgres 16.\n\nWe drop Mongo\nby March.") == [
        "We move billing to Postgres 16.",
        "We drop Mongo by March.",
    ]
    assert split_decisions("  \n \n") == []
