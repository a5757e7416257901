"""Personas shared by every test: a workspace with an admin, a reviewer, an outsider reviewer,
agents of two roles, and an agent of another workspace."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from memory.models import Agent, MemoryDomain, Role, Workspace
from tests.factories import (
    AgentFactory,
    DomainFactory,
    MembershipFactory,
    RepoFactory,
    RoleFactory,
    UserFactory,
    WorkspaceFactory,
)

# The `chromium` fixture of the browser tests (Playwright driving Debian Chromium).
pytest_plugins = ["tests.browser_fixtures"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Servers and workers the tests start decide writes by the rules alone (see write_classifier).
os.environ.setdefault("ENGRAM_PAIR_MODEL", "0")


@pytest.fixture(autouse=True)
def write_classifier(request, settings):
    """The product runs the write classifier's rules and then the pair model's second reading
    (ENGRAM_PAIR_MODEL, on by default). Tests pin the rules alone — their pairs and outcomes were
    written for the rules, which answer in a millisecond — unless marked `second_reading`: those
    run what a default install runs (the issue-14 cases, the unsure-pair flow, the held-out pairs)."""
    settings.ENGRAM_PAIR_MODEL = request.node.get_closest_marker("second_reading") is not None


@pytest.fixture(autouse=True)
def fresh_search_statistics():
    """Lexeme statistics are cached per process for minutes; each test reads its own tables'."""
    from memory.search import voices

    voices.forget_statistics()
    yield
    voices.forget_statistics()


@dataclass
class World:
    workspace: Workspace
    other_workspace: Workspace
    coder_role: Role
    planner_role: Role
    architecture: MemoryDomain
    conventions: MemoryDomain
    repo_context: MemoryDomain
    coder: Agent
    coder2: Agent
    planner: Agent
    foreign_agent: Agent
    admin_user: object
    reviewer: object
    outsider_reviewer: object


@pytest.fixture
def world(db) -> World:
    ws = WorkspaceFactory(slug="acme", name="Acme")
    other = WorkspaceFactory(slug="globex", name="Globex")
    coder_role = RoleFactory(workspace=ws, name="coder")
    planner_role = RoleFactory(workspace=ws, name="planner")
    repo = RepoFactory(workspace=ws, slug="web")
    architecture = DomainFactory(workspace=ws, name="architecture")
    conventions = DomainFactory(workspace=ws, name="conventions")
    repo_context = DomainFactory(workspace=ws, repo=repo, name="context")
    admin_user = UserFactory(username="wsadmin")
    MembershipFactory(user=admin_user, workspace=ws, is_admin=True)
    reviewer = UserFactory(username="reviewer")
    MembershipFactory(user=reviewer, workspace=ws)
    outsider = UserFactory(username="outsider")
    MembershipFactory(user=outsider, workspace=ws)
    other_role = RoleFactory(workspace=other, name="coder")
    return World(
        workspace=ws,
        other_workspace=other,
        coder_role=coder_role,
        planner_role=planner_role,
        architecture=architecture,
        conventions=conventions,
        repo_context=repo_context,
        coder=AgentFactory(workspace=ws, role=coder_role, name="coder-a"),
        coder2=AgentFactory(workspace=ws, role=coder_role, name="coder-b"),
        planner=AgentFactory(workspace=ws, role=planner_role, name="planner-a"),
        foreign_agent=AgentFactory(workspace=other, role=other_role, name="intruder"),
        admin_user=admin_user,
        reviewer=reviewer,
        outsider_reviewer=outsider,
    )


def client_for(agent: Agent | None) -> APIClient:
    client = APIClient()
    if agent is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent.plain_key}")  # type: ignore[attr-defined]
    return client


@pytest.fixture
def api(world: World) -> APIClient:
    """An API client acting as the coder agent of the main workspace."""
    return client_for(world.coder)


@pytest.fixture
def reviewer_reviews_world_domains(world: World) -> None:
    """`world.reviewer` holds guardian's `review_domain` on the workspace's domains (architecture,
    conventions, repo:web/context): people decide candidates of the domains they review only
    (memory.access, issue 16)."""
    from guardian.shortcuts import assign_perm

    for domain in (world.architecture, world.conventions, world.repo_context):
        assign_perm("memory.review_domain", world.reviewer, domain)


@pytest.fixture
def reviewer_is_workspace_admin(world: World) -> None:
    """`world.reviewer` administers the workspace, so it may decide every remember review item:
    items land in domains created on approval, which only workspace admins decide (issue 16)."""
    from memory.models import WorkspaceMembership

    WorkspaceMembership.objects.filter(workspace=world.workspace, user=world.reviewer).update(is_admin=True)


@pytest.fixture(autouse=True)
def answers_are_declared():
    """No test sees an operation answer an error code its declaration does not list (issue 36:
    the served schema is the contract; tests/declared_errors.py)."""
    from tests.declared_errors import watching_answers

    with watching_answers() as undeclared:
        yield
    assert not undeclared, "undeclared errors (add them to agents/operations/catalog.py): " + "; ".join(
        sorted(set(undeclared))
    )


@pytest.fixture(autouse=True)
def inference_outside_transactions(request):
    """Model inference refuses to run inside a transaction (memory.inference); a test's own wrapping
    transaction (the `db` fixture's) is declared as enclosing, so only the code's own count."""
    from memory import inference

    if "_django_db_helper" in request.fixturenames or request.node.get_closest_marker("django_db"):
        request.getfixturevalue("_django_db_helper")
    with inference.enclosing_transactions():
        yield


@pytest.fixture
def no_term_statistics(monkeypatch):
    """Search terms weighed as in a database never analysed (every lexeme equally rare): what a
    test of the preamble's bar reads is then its own facts, not the statistics an earlier test
    committed (an erasure's rewrite ANALYZEs memory_fact and commits)."""
    from memory.search import voices

    monkeypatch.setattr(voices, "lexeme_frequencies", lambda: ({}, 0.01, 0.0))
