"""Shared by the benchmarks: a database of their own, recreated empty for each run, and the sets a
run is asked for."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from django.db import connections


def recreate_database() -> str:
    """Drop and create the configured database (never the one `make run` uses), then migrate."""
    from django.core.management import call_command

    settings = connections["default"].settings_dict
    name = settings["NAME"]
    if name in {"engram", "postgres"}:
        raise SystemExit(f"refusing to recreate the database {name!r}: benchmarks set ENGRAM_DB_NAME")
    connections.close_all()
    params = {
        "host": settings["HOST"],
        "port": settings["PORT"] or 5432,
        "user": settings["USER"],
        "password": settings["PASSWORD"] or None,
        "dbname": "postgres",
        "autocommit": True,
    }
    with psycopg.connect(**{k: v for k, v in params.items() if v is not None}) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    call_command("migrate", verbosity=0)
    return str(name)


def busy_cpu_seconds() -> float | None:
    """CPU seconds every process of this machine has used so far (user, nice, system, irq and
    softirq time from /proc/stat; idle, I/O wait and a hypervisor's steal excluded), or None where
    /proc is not Linux's. Two readings bound what a benchmark could reach on this machine: a rate
    that needs C CPU seconds per unit cannot exceed cores / C units per second."""
    import os

    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def postgres_cpu_seconds() -> float | None:
    """CPU seconds used so far by the running processes named `postgres` (the server and its
    backends), or None without a Linux /proc. A backend that exits takes its time with it: read
    it while the benchmark's connections are open."""
    import os
    from pathlib import Path

    if not Path("/proc/self/stat").exists():
        return None
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended meanwhile
            continue
        name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        if name == "postgres":
            total += int(rest[11]) + int(rest[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def chosen_sets(
    asked: Sequence[str] | None, part: str, tune: Sequence[str], held_out: Sequence[str], path: Callable[[str], Path]
) -> list[str]:
    """The sets a run scores: those `asked` by name, else those of `part` (tune, held-out or all),
    kept when their file (`path(name)`) is there."""
    names = asked or {"tune": tune, "held-out": held_out, "all": (*tune, *held_out)}[part]
    return [name for name in names if path(name).exists()]


def fresh_agent(workspace_slug: str, workspace_name: str, agent_name: str) -> tuple[Any, Any]:
    """An empty database (recreate_database) with one workspace and one agent (role "assistant"):
    (workspace, agent) for a run that writes and searches as an agent's runtime would."""
    from agents.services import create_agent
    from memory.actors import Actor
    from memory.services.tenancy import get_or_create_role, get_or_create_workspace

    recreate_database()
    by = Actor.system("eval")
    workspace = get_or_create_workspace(slug=workspace_slug, name=workspace_name, by=by)
    role = get_or_create_role(workspace=workspace, name="assistant", by=by)
    agent, _ = create_agent(workspace=workspace, name=agent_name, role=role, by=by)
    return workspace, agent
