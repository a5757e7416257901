"""Shared by the benchmarks: a database of their own, recreated empty for each run."""

from __future__ import annotations

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
