"""Management commands of API.md: create_domain, grant, seed_demo."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memory.models import AccessGrant, Conflict, Fact, MemoryDomain, Policy, Workspace
from memory.services.tenancy import effective_level


def test_create_domain_gives_write_to_every_existing_role(world):
    call_command("create_domain", "--workspace", "acme", "security", stdout=io.StringIO())
    domain = MemoryDomain.objects.get(workspace=world.workspace, name="security", repo__isnull=True)
    levels = dict(AccessGrant.objects.filter(domain=domain).values_list("role__name", "level"))
    assert levels == {"coder": "write", "planner": "write"}


def test_create_domain_with_repo_creates_the_repo_and_a_separate_store(world):
    call_command("create_domain", "--workspace", "acme", "--repo", "mobile", "architecture", stdout=io.StringIO())
    labels = {d.label for d in MemoryDomain.objects.filter(workspace=world.workspace)}
    assert {"architecture", "repo:mobile/architecture"} <= labels


def _grant(domain: str, level: str) -> None:
    args = ["--workspace", "acme", "--role", "coder", "--domain", domain, "--level", level]
    call_command("grant", *args, stdout=io.StringIO())


def test_grant_sets_one_level_and_missing_rows_mean_read(world):
    assert effective_level(role_id=world.coder_role.pk, domain_id=world.architecture.pk) == "read"
    _grant("architecture", "none")
    assert effective_level(role_id=world.coder_role.pk, domain_id=world.architecture.pk) == "none"
    _grant("repo:web/context", "write")
    assert effective_level(role_id=world.coder_role.pk, domain_id=world.repo_context.pk) == "write"


def test_grant_refuses_an_unknown_domain_with_a_message(world):
    with pytest.raises(CommandError, match="No domain 'nothing'"):
        call_command("grant", "--workspace", "acme", "--role", "coder", "--domain", "nothing", "--level", "read")


@pytest.mark.django_db
def test_seed_demo_loads_history_a_conflict_and_policies_once(settings, tmp_path):
    settings.ENGRAM_HOME = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    ws = Workspace.objects.get(slug="demo")
    assert Fact.objects.filter(workspace=ws, superseded_by__isnull=False).count() >= 2
    assert Conflict.objects.filter(workspace=ws, status="decided").count() == 1
    assert Conflict.objects.filter(workspace=ws, status="open").count() == 1  # a possible conflict for the queue
    assert Policy.objects.filter(workspace=ws, active=True).count() == 3
    assert Fact.objects.filter(workspace=ws, embedding__isnull=True).count() == 0
    assert (tmp_path / "demo-agent-key").read_text().startswith("engram_")
    facts = Fact.objects.count()
    call_command("seed_demo", stdout=io.StringIO())
    assert Fact.objects.count() == facts
