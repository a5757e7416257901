"""Why a fact was challenged (issue 20): the API's `challenge` on GET /api/v1/facts/{id}/ and the
fact page's block, both from the fact's latest `fact.challenged` audit event."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.actors import Actor
from memory.models import DecayProfile, Fact
from memory.selectors import latest_challenges
from memory.services.lifecycle import challenge_fact, detect_stale, revalidate_fact
from tests.factories import FactFactory


@pytest.fixture(autouse=True)
def default_decay_profiles(db):
    importlib.import_module("memory.migrations.0002_default_decay_profiles").forwards(apps, None)


def _stale_promoted(world, **kw) -> Fact:
    long_ago = timezone.now() - timedelta(days=DecayProfile.objects.get(memory_type="decision").stale_after_days + 9)
    return FactFactory(
        domain=world.architecture,
        memory_type="decision",
        origin="promotion",
        created_at=long_ago,
        last_mentioned_at=long_ago,
        **kw,
    )


def test_the_api_says_why_a_stale_fact_was_challenged(world, api):
    fact = _stale_promoted(world)
    detect_stale()
    body = api.get(f"/api/v1/facts/{fact.pk}/").json()
    assert body["status"] == "challenged"
    challenge = body["challenge"]
    assert set(challenge) == {"reason", "detail", "at", "by"}
    assert challenge["reason"] == "stale"
    assert challenge["by"] == "system:detect_stale"
    window = DecayProfile.objects.get(memory_type="decision").stale_after_days
    assert challenge["detail"].startswith(f"not validated or mentioned for {window} days (never validated")
    assert challenge["at"].startswith(str(timezone.now().year))


def test_the_api_challenge_is_the_latest_one_and_null_once_revalidated(world, api):
    fact = FactFactory(domain=world.architecture)
    assert api.get(f"/api/v1/facts/{fact.pk}/").json()["challenge"] is None
    challenge_fact(fact=fact, by=Actor.of_user(world.admin_user), reason="review", detail="first look")
    revalidate_fact(fact=fact, by=Actor.of_user(world.admin_user), validated_by="human")
    assert api.get(f"/api/v1/facts/{fact.pk}/").json()["challenge"] is None  # active again
    challenge_fact(fact=fact, by=Actor.of_agent(world.coder), reason="failed_replay", detail="replay #7 of 'probe'")
    challenge = api.get(f"/api/v1/facts/{fact.pk}/").json()["challenge"]
    assert challenge["reason"] == "failed_replay"
    assert challenge["detail"] == "replay #7 of 'probe'"
    assert challenge["by"] == "agent:coder-a"


def test_latest_challenges_reads_many_facts_in_one_query(world):
    facts = [FactFactory(domain=world.architecture) for _ in range(4)]
    for i, fact in enumerate(facts[:3]):
        challenge_fact(fact=fact, by=Actor.system("test"), reason="review", detail=f"look {i}")
    facts = list(Fact.objects.filter(pk__in=[f.pk for f in facts]).order_by("pk"))
    with CaptureQueriesContext(connection) as queries:
        found = latest_challenges(facts)
    assert len(queries) == 1
    assert {pk: e.detail["detail"] for pk, e in found.items()} == {f.pk: f"look {i}" for i, f in enumerate(facts[:3])}


def test_the_fact_page_shows_why_it_was_challenged(world):
    fact = _stale_promoted(world)
    plain = FactFactory(domain=world.architecture)
    detect_stale()
    client = Client()
    client.force_login(world.admin_user)
    html = client.get(f"/memory/acme/facts/{fact.pk}/").content.decode()
    block = html[html.index('data-testid="challenge"') :]
    block = " ".join(block[: block.index("</div>")].split())
    assert "Why it was challenged</strong>: stale — not validated or mentioned for" in block
    assert "by system:detect_stale" in block
    assert 'data-testid="challenge"' not in client.get(f"/memory/acme/facts/{plain.pk}/").content.decode()
