"""Reads of agents for authentication: every API request starts here, so the one read it needs is
plain SQL built once from the models, not a queryset compiled per request."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import models

from memory.models import Agent, Role, Workspace
from memory.routing import read_connection

_JOINED = (Agent, Workspace, Role)


@cache
def _agent_sql() -> str:
    """SELECT every column of the agent, its workspace and its role (in _meta order) by key hash."""

    def columns(model: type[models.Model], alias: str) -> str:
        return ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)

    return (
        f"SELECT {columns(Agent, 'a')}, {columns(Workspace, 'w')}, {columns(Role, 'r')}"  # noqa: S608 -- table and column names from the models; the hash is a bound param
        f' FROM "{Agent._meta.db_table}" a'
        f' JOIN "{Workspace._meta.db_table}" w ON w."id" = a."workspace_id"'
        f' JOIN "{Role._meta.db_table}" r ON r."id" = a."role_id"'
        ' WHERE a."key_hash" = %s'
    )


def agent_for_key_hash(key_hash: str) -> Agent | None:
    """The agent holding the key with this SHA-256 (revoked or not: the caller decides), with its
    workspace and role loaded, in one query; None when no agent holds it. Read where Django would
    read `Agent.objects.select_related("workspace", "role")` (memory.routing)."""
    database = read_connection(Agent)
    with database.cursor() as cursor:
        cursor.execute(_agent_sql(), [key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    instances: list[Any] = []
    start = 0
    for model in _JOINED:
        fields = model._meta.concrete_fields
        values = [_from_db(f, v, database) for f, v in zip(fields, row[start : start + len(fields)], strict=True)]
        instances.append(model.from_db(database.alias, [f.attname for f in fields], values))
        start += len(fields)
    agent, workspace, role = instances
    agent.workspace, agent.role = workspace, role
    return agent


def _from_db(field: models.Field, value: Any, database: Any) -> Any:
    converter = getattr(field, "from_db_value", None)
    return value if converter is None or value is None else converter(value, None, database)
