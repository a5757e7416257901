"""Factories for tests. Facts are built directly (no embedding) unless a test asks for one."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model

from memory.models import (
    VERACITY_WEIGHT,
    AccessGrant,
    Agent,
    Candidate,
    Fact,
    MemoryDomain,
    Policy,
    Repo,
    Role,
    Workspace,
    WorkspaceMembership,
    generate_key,
    hash_key,
)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"person{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("correct horse battery staple")
    is_staff = True


class WorkspaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workspace
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"ws{n}")
    name = factory.LazyAttribute(lambda w: f"Workspace {w.slug}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WorkspaceMembership

    user = factory.SubFactory(UserFactory)
    workspace = factory.SubFactory(WorkspaceFactory)
    is_admin = False


class RepoFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Repo
        django_get_or_create = ("workspace", "slug")

    workspace = factory.SubFactory(WorkspaceFactory)
    slug = factory.Sequence(lambda n: f"repo{n}")


class RoleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Role
        django_get_or_create = ("workspace", "name")

    workspace = factory.SubFactory(WorkspaceFactory)
    name = factory.Sequence(lambda n: f"role{n}")


class DomainFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = MemoryDomain
        django_get_or_create = ("workspace", "repo", "name")

    workspace = factory.SubFactory(WorkspaceFactory)
    repo = None
    name = factory.Sequence(lambda n: f"domain{n}")


class GrantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AccessGrant

    role = factory.SubFactory(RoleFactory)
    domain = factory.SubFactory(DomainFactory)
    level = "read"


class AgentFactory(factory.django.DjangoModelFactory):
    """An agent whose plain key is available as `agent.plain_key` (tests only)."""

    class Meta:
        model = Agent

    workspace = factory.SubFactory(WorkspaceFactory)
    role = factory.LazyAttribute(lambda a: RoleFactory(workspace=a.workspace, name="coder"))
    name = factory.Sequence(lambda n: f"agent{n}")
    key_hash = ""
    key_hint = ""

    @classmethod
    def _create(cls, model_class: type[Agent], *args: Any, **kwargs: Any) -> Agent:
        key = generate_key()
        kwargs["key_hash"], kwargs["key_hint"] = hash_key(key), key[:12]
        agent = super()._create(model_class, *args, **kwargs)
        agent.plain_key = key  # type: ignore[attr-defined]
        return agent


class FactFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Fact

    domain = factory.SubFactory(DomainFactory)
    workspace = factory.LazyAttribute(lambda f: f.domain.workspace)
    topic = "general"
    content = factory.Sequence(lambda n: f"Fact number {n} about the build system.")
    memory_type = "decision"
    veracity = "agent_inferred"
    confidence = factory.LazyAttribute(lambda f: VERACITY_WEIGHT[f.veracity])


class PolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Policy

    domain = factory.SubFactory(DomainFactory)
    workspace = factory.LazyAttribute(lambda p: p.domain.workspace)
    rule = factory.Sequence(lambda n: f"Rule {n}: always run the tests.")


class CandidateFactory(factory.django.DjangoModelFactory):
    """A promotion candidate stored directly (no gate computed); use memory.services.promotion
    to exercise the gate itself."""

    class Meta:
        model = Candidate

    domain = factory.SubFactory(DomainFactory)
    workspace = factory.LazyAttribute(lambda c: c.domain.workspace)
    topic = "general"
    candidate_id = factory.Sequence(lambda n: f"memcand-{n}")
    failure_class = "agent_failure"
    proposed_memory = factory.Sequence(lambda n: f"Rule {n}: update the contract artifact with the schema.")
    applies_to = factory.LazyFunction(lambda: ["public_api"])
    does_not_apply_to = factory.LazyFunction(lambda: ["internal_refactor"])
    verification_probe_candidate = "contract-regression"
