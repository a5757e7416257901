"""The harness of bench.attacks: an agent's key against the API over HTTP (Agent, Resp), the
manage.py subprocesses that set the workspace up (Manage), and the table of results (Report).

Standard library only; no Django import, so it runs against any Engram reachable over HTTP.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MISSING_ID = 2_000_000_000  # an id no row has (fits PostgreSQL's integer)


# --- HTTP ----------------------------------------------------------------------------------------
@dataclass
class Resp:
    status: int
    body: Any
    started: float = 0.0
    ended: float = 0.0

    @property
    def code(self) -> str:
        return str(self.body.get("code", "")) if isinstance(self.body, dict) else ""

    def get(self, key: str, default: Any = None) -> Any:
        return self.body.get(key, default) if isinstance(self.body, dict) else default


class Agent:
    """One agent's key against the API."""

    def __init__(self, base: str, name: str, key: str) -> None:
        self.base = base.rstrip("/") + "/api/v1/"
        self.name = name
        self.key = key

    def call(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None) -> Resp:
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 (http only, given by the caller)
        request.add_header("Authorization", f"Bearer {self.key}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        ended = time.monotonic()
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = {"code": "<not json>", "detail": raw[:200].decode(errors="replace")}
        return Resp(status, parsed, started, ended)

    def get(self, path: str, **query: Any) -> Resp:
        return self.call("GET", path, query=query or None)

    def post(self, path: str, body: Any) -> Resp:
        return self.call("POST", path, body)


# --- manage.py -----------------------------------------------------------------------------------
class Manage:
    def __init__(self, home: str) -> None:
        self.env = {**os.environ, "ENGRAM_HOME": home}
        self.env.setdefault("HF_HUB_OFFLINE", "1")

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise SystemExit(f"manage.py {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        return done.stdout

    def create_agent(self, workspace: str, name: str, role: str, *flags: str) -> str:
        out = self.run("create_agent", "--workspace", workspace, "--name", name, "--role", role, *flags)
        return out.strip().splitlines()[-1].strip()


# --- Results -------------------------------------------------------------------------------------
@dataclass
class Row:
    number: str
    request: str
    status: str
    outcome: str
    unchanged: bool | None  # None: nothing to read back
    ok: bool  # attack: refused; legit: worked
    legit: bool = False
    note: str = ""
    error: bool = False  # a 5xx (or the step aborted) with the protected state unchanged: not judged

    @property
    def verdict(self) -> str:
        if self.legit:
            return "legit ok" if self.ok else "LEGIT BROKEN"
        if self.error:
            return "ERROR"
        return "refused" if self.ok else "SUCCEEDED"


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    verbose: bool = False

    def add(
        self,
        number: str,
        request: str,
        resp: Resp | None,
        *,
        ok: bool,
        unchanged: bool | None = None,
        outcome: str | None = None,
        legit: bool = False,
        note: str = "",
        error: bool = False,
    ) -> Row:
        status = str(resp.status) if resp is not None else "-"
        if outcome is None:
            outcome = (resp.code or "-") if resp is not None else "-"
        if resp is not None and resp.status >= 500:
            outcome = f"server error ({resp.code or 'no code'})"
        if unchanged is False:
            ok = ok and legit  # an attack that changed protected state succeeded, whatever it answered
        # A server error that changed nothing is neither a refusal nor a success: the code is broken.
        error = not legit and not ok and unchanged is not False and (error or (resp is not None and resp.status >= 500))
        row = Row(number, request, status, outcome, unchanged, ok, legit, note, error)
        self.rows.append(row)
        if self.verbose:
            print(f"  {row.number:<4} {row.verdict:<10} {row.request} -> {row.status} {row.outcome}", flush=True)
        return row

    def print(self) -> int:
        headers = ("#", "request", "HTTP", "code / outcome", "state unchanged", "verdict")
        cells = [
            (
                r.number,
                r.request,
                r.status,
                r.outcome,
                "-" if r.unchanged is None else ("yes" if r.unchanged else "NO"),
                r.verdict,
            )
            for r in self.rows
        ]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
        widths[1] = min(widths[1], 62)
        widths[3] = min(widths[3], 58)

        def line(values: tuple[str, ...]) -> str:
            parts = []
            for i, value in enumerate(values):
                if len(value) > widths[i]:
                    value = value[: widths[i] - 1] + "…"
                parts.append(value.ljust(widths[i]))
            return "  ".join(parts).rstrip()

        print(line(headers))
        print(line(tuple("-" * w for w in widths)))
        for c in cells:
            print(line(c))
        notes = [r for r in self.rows if r.note]
        if notes:
            print()
            for r in notes:
                print(f"[{r.number}] {r.note}")
        attacks = [r for r in self.rows if not r.legit]
        legit = [r for r in self.rows if r.legit]
        succeeded = [r for r in attacks if not r.ok and not r.error]
        errors = [r for r in attacks if r.error]
        refused = len(attacks) - len(succeeded) - len(errors)
        broken = [r for r in legit if not r.ok]
        print()
        print(f"legitimate paths: {len(legit)} checked, {len(legit) - len(broken)} ok, {len(broken)} broken")
        tail = f", {len(errors)} not judged (server error, nothing changed)" if errors else ""
        print(f"{len(attacks)} attacks, {refused} refused, {len(succeeded)} succeeded{tail}")
        if succeeded or errors:
            return 1
        return 2 if broken else 0


def fact_state(reader: Agent, fact_id: int) -> tuple[Any, ...]:
    """What must not change about a fact, as another agent reads it."""
    r = reader.get(f"facts/{fact_id}/")
    if r.status != 200:
        return ("unreadable", r.status, r.code)
    b = r.body
    return (b["content"], b["status"], b["superseded_by"], b["veracity"], b["confidence"], b.get("observed_at"))


def topic_count(reader: Agent, domain: str, topic: str) -> int:
    """Facts on (domain, topic), superseded ones included, as another agent reads them."""
    r = reader.get("facts/", domain=domain, topic=topic, current="false", limit=200)
    return int(r.body["count"]) if r.status == 200 else -1


def normalise(resp: Resp, *names: str) -> tuple[int, str, str]:
    """An error answer with the names that differ between two requests blanked out."""
    text = json.dumps({k: v for k, v in (resp.body or {}).items() if k in ("code", "detail", "fields")})
    for name in names:
        text = text.replace(name, "<name>")
    text = re.sub(r"\b\d+\b", "<n>", text)
    return resp.status, resp.code, text


def short(value: Any, size: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= size else text[: size - 1] + "…"
