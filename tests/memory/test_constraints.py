"""Database constraints of the data model hold even when code bypasses the services."""

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.models import AccessGrant, MemoryDomain
from tests.factories import DomainFactory, FactFactory, RepoFactory, RoleFactory, WorkspaceFactory


def _violates(fn) -> bool:
    try:
        with transaction.atomic():
            fn()
    except IntegrityError:
        return True
    return False


@pytest.mark.django_db
def test_domain_name_is_unique_per_scope_but_the_two_scopes_are_independent():
    ws = WorkspaceFactory()
    repo = RepoFactory(workspace=ws, slug="web")
    MemoryDomain.objects.create(workspace=ws, name="architecture")
    repo_domain = MemoryDomain.objects.create(workspace=ws, repo=repo, name="architecture")
    assert repo_domain.label == "repo:web/architecture"
    assert _violates(lambda: MemoryDomain.objects.create(workspace=ws, name="architecture"))
    assert _violates(lambda: MemoryDomain.objects.create(workspace=ws, repo=repo, name="architecture"))


@pytest.mark.django_db
def test_fact_confidence_must_lie_between_zero_and_one():
    domain = DomainFactory()
    assert _violates(lambda: FactFactory(domain=domain, confidence=1.5))
    assert _violates(lambda: FactFactory(domain=domain, confidence=-0.1))
    assert FactFactory(domain=domain, confidence=1.0).pk


@pytest.mark.django_db
def test_fact_rejects_unknown_memory_type_veracity_and_empty_content():
    domain = DomainFactory()
    assert _violates(lambda: FactFactory(domain=domain, memory_type="rumour"))
    assert _violates(lambda: FactFactory(domain=domain, veracity="dreamt", confidence=0.5))
    assert _violates(lambda: FactFactory(domain=domain, content=""))


@pytest.mark.django_db
def test_fact_cannot_supersede_itself_and_a_superseded_fact_records_when():
    fact = FactFactory()

    def self_supersede():
        fact.superseded_by_id = fact.pk
        fact.superseded_at = timezone.now()
        fact.save()

    assert _violates(self_supersede)
    other = FactFactory(domain=fact.domain)

    def without_time():
        fact.superseded_by_id, fact.superseded_at = other.pk, None
        fact.save()

    assert _violates(without_time)


@pytest.mark.django_db
def test_one_grant_per_role_and_domain_with_a_known_level():
    role = RoleFactory()
    domain = DomainFactory(workspace=role.workspace)
    AccessGrant.objects.create(role=role, domain=domain, level="read")
    assert _violates(lambda: AccessGrant.objects.create(role=role, domain=domain, level="write"))
    other = DomainFactory(workspace=role.workspace)
    assert _violates(lambda: AccessGrant.objects.create(role=role, domain=other, level="admin"))


@pytest.mark.django_db
def test_generated_search_vector_is_filled_by_the_database():
    fact = FactFactory(topic="deploys", content="Production deploys happen on Tuesdays")
    fact.refresh_from_db()
    assert "deploy" in str(fact.search_vector)
    assert "tuesday" in str(fact.search_vector)


@pytest.mark.django_db
def test_workspaces_slugs_are_unique():
    WorkspaceFactory(slug="same")
    from memory.models import Workspace

    assert _violates(lambda: Workspace.objects.create(slug="same", name="again"))
