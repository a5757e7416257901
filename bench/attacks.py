"""Issue 13, tried from outside: a hostile agent with an ordinary key against a running Engram.

    .venv/bin/python -m bench.attacks --url http://127.0.0.1:8765 --home /tmp/attack-home

`--home` is the server's ENGRAM_HOME: agents, domains and the `none` grant are made with
`manage.py create_agent|create_domain|grant` subprocesses on that data directory (a fresh
workspace `attack-<time>` unless `--workspace` names one), everything else goes over HTTP as
an agent. For each attack the table shows the request, the HTTP status, the error `code` (or
the outcome) and whether the protected state stayed unchanged, read back with another agent's
key. Rows marked `legit` are the paths that must keep working (a relay agent's human_stated
fact, a verifier's replay promoting, an agent's own episode); they are not counted as attacks.

Exit status: 0 when every attack was refused and every legitimate path worked, 1 when an
attack succeeded (or could not be judged), 2 when only a legitimate path broke.

Standard library only; no Django import, so it runs against any Engram reachable over HTTP.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from bench.attack_harness import MISSING_ID, Agent, Manage, Report, Resp, fact_state, normalise, short, topic_count


# --- The attacks ---------------------------------------------------------------------------------
class Attacks:
    def __init__(self, url: str, home: str, workspace: str, report: Report) -> None:
        self.url = url
        self.manage = Manage(home)
        self.ws = workspace
        self.report = report
        self.tag = workspace.rsplit("-", 1)[-1]

    # Setup: the attacker (coder), another role's agent (planner), a relay agent, a verifier.
    def setup(self) -> None:
        m = self.manage
        print(f"Setting up workspace {self.ws!r} through manage.py (ENGRAM_HOME={m.env['ENGRAM_HOME']})…", flush=True)
        self.attacker = Agent(self.url, "mallory", m.create_agent(self.ws, "mallory", "coder"))
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            other = pool.submit(m.create_agent, self.ws, "olivia", "planner")
            relay = pool.submit(m.create_agent, self.ws, "chat-relay", "frontend", "--relays-human-words")
            verifier = pool.submit(m.create_agent, self.ws, "vera", "reviewer", "--verifier")
            self.other = Agent(self.url, "olivia", other.result())
            self.relay = Agent(self.url, "chat-relay", relay.result())
            self.verifier = Agent(self.url, "vera", verifier.result())
        # Domains after the roles: a new domain gives `write` to every role that exists then.
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            list(
                pool.map(
                    lambda name: m.run("create_domain", "--workspace", self.ws, name),
                    ("architecture", "knowledge", "conventions"),
                )
            )
        for agent in (self.attacker, self.other, self.relay, self.verifier):
            me = agent.get("me/")
            if me.status != 200 or me.get("workspace") != self.ws:
                raise SystemExit(f"{agent.name}'s key does not work: {me.status} {me.body}")
        print("Attacking as mallory (role coder, an ordinary key)…", flush=True)

    # 1. Forged authority ------------------------------------------------------------------------
    def forged_authority(self) -> None:
        rep, a, o = self.report, self.attacker, self.other
        person = self.relay.post(
            "facts/",
            {
                "domain": "architecture",
                "topic": "database",
                "memory_type": "decision",
                "veracity": "human_stated",
                "content": "The primary datastore is PostgreSQL 16; pgvector holds embeddings next to the rows.",
            },
        )
        fact = person.get("fact") or {}
        rep.add(
            "1.0",
            "relay agent: POST facts/ veracity=human_stated (a person's words)",
            person,
            ok=person.status == 201 and fact.get("veracity") == "human_stated",
            outcome=f"{person.get('outcome')} {fact.get('veracity')}" if person.status == 201 else person.code,
            legit=True,
        )
        if person.status != 201:
            raise SystemExit(f"cannot create the person's fact: {person.status} {person.body}")
        pid = fact["id"]

        def snapshot() -> tuple[Any, ...]:
            return (fact_state(o, pid), topic_count(o, "architecture", "database"))

        forged = {
            "domain": "architecture",
            "topic": "database",
            "memory_type": "decision",
            "content": "The primary datastore is MySQL 5.7; embeddings live in a separate vector store.",
        }
        cases = [
            ("1.1", "POST facts/ veracity=human_stated", {"veracity": "human_stated"}, {403}, "veracity_not_allowed"),
            (
                "1.2",
                "POST facts/ observed_at=9999-12-31T23:59:59Z",
                {"observed_at": "9999-12-31T23:59:59Z"},
                {400},
                "invalid_input",
            ),
            (
                "1.3",
                "POST facts/ observed_at=now+1h (past the clock skew)",
                {"observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))},
                {400},
                "invalid_input",
            ),
            (
                "1.4",
                "POST facts/ human_stated + observed_at=9999 (issue's call)",
                {"veracity": "human_stated", "observed_at": "9999-12-31T23:59:59Z"},
                {400, 403},
                None,
            ),
        ]
        for number, label, extra, statuses, code in cases:
            before = snapshot()
            r = a.post("facts/", {**forged, **extra})
            unchanged = snapshot() == before
            rep.add(number, label, r, ok=r.status in statuses and (code is None or r.code == code), unchanged=unchanged)

        before = snapshot()
        r = a.post(f"facts/{pid}/supersede/", {"content": forged["content"], "reason": "outdated"})
        rep.add(
            "1.5",
            f"POST facts/{pid}/supersede/ (a person's human_stated fact)",
            r,
            ok=r.status == 403 and r.code == "fact_protected",
            unchanged=snapshot() == before,
        )

        # The legitimate path beside it: an agent replaces its own agent_inferred fact.
        own = o.post(
            "facts/",
            {
                "domain": "conventions",
                "topic": f"release-notes-{self.tag}",
                "memory_type": "convention",
                "content": "Release notes are written in the pull request description.",
            },
        )
        own_id = (own.get("fact") or {}).get("id")
        r = o.post(f"facts/{own_id}/supersede/", {"content": "Release notes live in CHANGELOG.md.", "reason": "moved"})
        rep.add(
            "1.6",
            "olivia: POST facts/{id}/supersede/ of her own agent_inferred fact",
            r,
            ok=own.status == 201 and r.status == 201,
            outcome=f"new fact {r.get('id')}" if r.status == 201 else None,
            legit=True,
        )

    # 2. Self-certified verification ------------------------------------------------------------
    def candidate(self, suffix: str, topic: str, *, traceable: bool = True) -> dict[str, Any]:
        return {
            "domain": "conventions",
            "topic": topic,
            "schema": "awtl.memory_candidate.v2",
            "candidate_id": f"memcand-attack-{self.tag}-{suffix}",
            "failure_class": "agent_failure",
            "failure_type": "skipped_check",
            "source_action_ids": [f"action-{suffix}-1"] if traceable else [],
            "root_cause_summary": "The agent merged without running the linter.",
            "proposed_memory": f"Always run the linter before proposing a merge ({suffix}).",
            "scope": {"applies_to": ["merge"], "does_not_apply_to": ["docs_only_change"]},
            "evidence_refs": [f"ci:run-{suffix}"] if traceable else [],
            "verification_probe_candidate": f"lint-probe-{suffix}",
            "requires_human_review": False,
        }

    def _candidate_state(self, cid: int, topic: str) -> tuple[Any, ...]:
        c = self.other.get(f"candidates/{cid}/")
        return (c.get("fact_id"), c.get("promotion_status"), topic_count(self.other, "conventions", topic))

    def self_certified(self) -> None:
        rep, a, v = self.report, self.attacker, self.verifier

        # 2.1/2.2: the submitter's own passing replay, then promote.
        topic = f"lint-self-{self.tag}"
        sub = a.post("candidates/", self.candidate("self", topic))
        if sub.status not in (200, 201):
            rep.add(
                "2.0", "POST candidates/ (well-formed document)", sub, ok=False, legit=True, note=short(sub.body, 300)
            )
            return
        cid = sub.body["id"]
        replay = a.post(f"candidates/{cid}/replays/", {"probe": f"lint-probe-{self.tag}", "passed": True})
        counts = replay.get("counts_as_evidence")
        before = self._candidate_state(cid, topic)
        r = a.post(f"candidates/{cid}/promote/", {"auto": True, "write": True})
        after = self._candidate_state(cid, topic)
        gates = r.get("gates") or r.get("scorecard") or {}
        rep.add(
            "2.1",
            "own replay passed=true, then promote {auto:true, write:true}",
            r,
            ok=r.get("fact") is None and r.get("fact_id") is None and after[0] is None,
            unchanged=after == before and after[2] == 0,
            outcome=f"{r.code or r.get('decision')}; own replay counts={counts}; "
            f"evidence {gates.get('evidence', {}).get('status')}",
            note=f"evidence gate: {short(gates.get('evidence', {}).get('reason', ''), 200)}",
        )
        before = self._candidate_state(cid, topic)
        r = a.post(f"candidates/{cid}/promote/", {"write": True})
        after = self._candidate_state(cid, topic)
        gates = r.get("gates") or r.get("scorecard") or {}
        rep.add(
            "2.2",
            "same candidate: promote {write:true} (no auto)",
            r,
            ok=r.get("fact") is None and r.get("fact_id") is None and after[0] is None,
            unchanged=after == before and after[2] == 0,
            outcome=f"{r.code or r.get('decision')}; evidence {gates.get('evidence', {}).get('status')}",
        )

        # 2.3: no source_action_ids, no evidence_refs: held even after a verifier's passing replay.
        topic = f"lint-untraced-{self.tag}"
        sub = a.post("candidates/", self.candidate("untraced", topic, traceable=False))
        if sub.status not in (200, 201):
            rep.add("2.3", "POST candidates/ source_action_ids=[] evidence_refs=[]", sub, ok=sub.status == 400)
        else:
            cid = sub.body["id"]
            held = sub.get("promotion_status")
            vr = v.post(f"candidates/{cid}/replays/", {"probe": f"lint-probe-{self.tag}", "passed": True})
            before = self._candidate_state(cid, topic)
            r = a.post(f"candidates/{cid}/promote/", {"auto": True, "write": True})
            after = self._candidate_state(cid, topic)
            gates = r.get("gates") or r.get("scorecard") or {}
            trace = gates.get("traceability", {}).get("status")
            rep.add(
                "2.3",
                "no source_action_ids/evidence_refs + verifier replay, promote auto",
                r,
                ok=r.get("fact") is None and after[0] is None and trace == "failed" and held == "held",
                unchanged=after == before and after[2] == 0,
                outcome=f"{r.code or r.get('decision')}; submitted {held}; traceability {trace}; "
                f"verifier replay counts={vr.get('counts_as_evidence')}",
            )

        # 2.4 (legit): a verifier's passing replay, then the submitter promotes automatically.
        topic = f"lint-verified-{self.tag}"
        sub = a.post("candidates/", self.candidate("verified", topic))
        if sub.status not in (200, 201):
            rep.add("2.4", "verifier replay then promote", sub, ok=False, legit=True, note=short(sub.body, 300))
            return
        cid = sub.body["id"]
        vr = v.post(f"candidates/{cid}/replays/", {"probe": f"lint-probe-{self.tag}", "passed": True})
        r = a.post(f"candidates/{cid}/promote/", {"auto": True, "write": True})
        fact_id = r.get("fact_id") or (r.get("fact") or {}).get("id")
        readable = fact_id is not None and self.other.get(f"facts/{fact_id}/").status == 200
        rep.add(
            "2.4",
            "verifier's replay passed, then promote {auto, write} -> a fact",
            r,
            ok=r.status in (200, 201) and readable,
            outcome=f"{r.get('decision')}; verifier replay counts={vr.get('counts_as_evidence')}; fact {fact_id}",
            legit=True,
        )

    # 3. `none` bypassed ----------------------------------------------------------------------------
    def none_bypassed(self) -> None:
        rep, a, o = self.report, self.attacker, self.other
        topic = "staging-cluster"
        hidden = o.post(
            "facts/",
            {
                "domain": "knowledge",
                "topic": topic,
                "memory_type": "observation",
                "content": "The staging cluster runs Kubernetes 1.29 on three nodes in eu-west-1.",
            },
        )
        if hidden.status != 201:
            raise SystemExit(f"cannot write the hidden fact: {hidden.status} {hidden.body}")
        hid = hidden.body["fact"]["id"]
        self.manage.run("grant", "--workspace", self.ws, "--role", "coder", "--domain", "knowledge", "--level", "none")

        def snapshot() -> tuple[Any, ...]:
            return (fact_state(o, hid), topic_count(o, "knowledge", topic))

        initial = snapshot()
        unknown = f"nosuch{self.tag}"

        # The hidden domain must answer exactly like an unknown one.
        pairs = [
            ("3.1", f"GET facts/{hid}/ (hidden) vs facts/{MISSING_ID}/", lambda d, i: a.get(f"facts/{i}/")),
            (
                "3.2",
                "POST facts/ domain=knowledge vs an unknown domain",
                lambda d, i: a.post(
                    "facts/", {"domain": d, "topic": topic, "memory_type": "observation", "content": "Kubernetes 1.25"}
                ),
            ),
            (
                "3.3",
                "POST remember/ domain=knowledge vs an unknown domain",
                lambda d, i: a.post(
                    "remember/", {"session_id": f"s-explicit-{self.tag}", "domain": d, "content": "Kubernetes 1.25"}
                ),
            ),
            (
                "3.4",
                "POST candidates/ domain=knowledge vs an unknown domain",
                lambda d, i: a.post("candidates/", {**self.candidate(f"hidden-{d}", topic), "domain": d}),
            ),
            (
                "3.5",
                "POST harmonize/ domain=knowledge vs an unknown domain",
                lambda d, i: a.post("harmonize/", {"domain": d}),
            ),
            ("3.6", "GET facts/?domain=knowledge vs an unknown domain", lambda d, i: a.get("facts/", domain=d)),
        ]
        for number, label, send in pairs:
            before = snapshot()
            hidden_answer = send("knowledge", hid)
            unknown_answer = send(unknown, MISSING_ID)
            same = normalise(hidden_answer, "knowledge", str(hid)) == normalise(
                unknown_answer, unknown, str(MISSING_ID)
            )
            refused = hidden_answer.status >= 400 or (
                number == "3.6" and hidden_answer.status == 200 and hidden_answer.get("count") == 0
            )
            rep.add(
                number,
                label,
                hidden_answer,
                ok=same and refused,
                unchanged=snapshot() == before,
                outcome=f"{hidden_answer.code or hidden_answer.get('count')} vs {unknown_answer.status} "
                f"{unknown_answer.code or unknown_answer.get('count')}: {'identical' if same else 'DIFFERENT'}",
                note=""
                if same
                else f"hidden: {short(hidden_answer.body, 200)} / unknown: {short(unknown_answer.body, 200)}",
            )

        # remember without a domain (defaults to `knowledge`), then consolidate: a near-restatement,
        # a contradiction and an unrelated control must get the same report, and nothing may land.
        entries = [
            ("3.7", "restatement", "Staging runs Kubernetes 1.29 with three nodes in eu-west-1."),
            ("3.8", "contradiction", "The staging cluster runs Kubernetes 1.25 on five nodes in us-east-1."),
            ("3.9", "unrelated", "The office coffee machine is descaled every second Monday."),
        ]
        reports: dict[str, tuple[Any, ...]] = {}
        for number, kind, content in entries:
            session = f"s-{kind}-{self.tag}"
            before = snapshot()
            rem = a.post("remember/", {"session_id": session, "content": content, "topic": topic})
            r = a.post("consolidate/", {"session_id": session})
            body = r.body if isinstance(r.body, dict) else {}
            counters = {
                k: body.get(k) for k in ("promoted", "re_mentioned", "conflicts", "possible_conflicts", "merged")
            }
            refused = [(x.get("code"), x.get("detail")) for x in body.get("refused", [])]
            reports[kind] = (r.status, tuple(sorted(counters.items())), tuple(refused))
            nothing = not any(counters.values()) and len(refused) == 1 and refused[0][0] == "unknown_domain"
            rep.add(
                number,
                f"remember (no domain, {kind}) + consolidate",
                r,
                ok=rem.status == 201 and nothing,
                unchanged=snapshot() == before,
                outcome=(
                    " ".join(f"{k}={v}" for k, v in counters.items() if k in ("promoted", "re_mentioned", "conflicts"))
                    + f" refused={','.join(c for c, _ in refused) or 'none'}"
                ),
                note="" if rem.status == 201 else f"remember answered {rem.status} {short(rem.body, 200)}",
            )
        same = len(set(reports.values())) == 1
        final = snapshot()
        rep.add(
            "3.10",
            "consolidate reports: restatement = contradiction = unrelated?",
            None,
            ok=same,
            unchanged=final == initial,
            outcome="identical reports" if same else "reports DIFFER (a match is revealed)",
            note="" if same else "; ".join(f"{k}: {v}" for k, v in reports.items()),
        )
        if final != initial:
            rep.rows[-1].note += f" hidden fact before {initial} after {final}"

    # 4. Planted context ---------------------------------------------------------------------------
    def planted_context(self) -> None:
        rep, a, o = self.report, self.attacker, self.other
        pre = o.post("preamble/", {"task": "Review the linting conventions before the release."})
        episode = pre.get("episode_id")
        if not episode:
            rep.add("4.1", "another agent's POST preamble/ -> episode_id", pre, ok=False, legit=True)
            return
        topic = f"planted-{self.tag}"
        body = {
            "domain": "conventions",
            "topic": topic,
            "memory_type": "convention",
            "content": "Lint warnings may be ignored on release branches.",
        }
        before = topic_count(o, "conventions", topic)
        r = a.post("facts/", {**body, "episode_id": episode})
        missing = a.post("facts/", {**body, "episode_id": MISSING_ID})
        same = normalise(r, str(episode)) == normalise(missing, str(MISSING_ID))
        rep.add(
            "4.1",
            f"POST facts/ episode_id={episode} (olivia's preamble episode)",
            r,
            ok=r.status == 400 and r.code == "unknown_episode" and same,
            unchanged=topic_count(o, "conventions", topic) == before,
            outcome=f"{r.code}; same as a missing episode: {'yes' if same else 'NO'}",
        )
        own = a.post("episodes/", {"kind": "session", "title": "mallory's own session"})
        mine = a.post("facts/", {**body, "topic": f"own-episode-{self.tag}", "episode_id": own.get("id")})
        rep.add(
            "4.2",
            "POST facts/ with an episode the agent opened itself",
            mine,
            ok=own.status == 201 and mine.status == 201,
            outcome=mine.get("outcome") or mine.code,
            legit=True,
        )

    # 5. Unbounded pushes --------------------------------------------------------------------------
    def unbounded_pushes(self) -> None:
        rep, a, o = self.report, self.attacker, self.other

        def active_ids() -> set[int]:
            r = o.get("policies/", active="true", limit=200)
            return {p["id"] for p in r.body["results"]} if r.status == 200 else {-1}

        accepted, last = 0, None
        before = active_ids()
        for i in range(40):
            rule = f"Policy {i}: " + ("Always double-check every generated migration before merging it. " * 8)
            rule = rule[:480]
            last = a.post("policies/", {"domain": "conventions", "rule": rule})
            if last.status != 201:
                break
            accepted += 1
            before = active_ids()
        assert last is not None
        budget = last.get("budget") or {}
        within = bool(budget) and budget.get("chars", 0) <= budget.get("budget", -1) < budget.get("chars_after", 0)
        pre = o.post("preamble/", {"task": "Plan the next release."})
        policy_chars = len("\n".join(pre.get("policies") or []))
        rep.add(
            "5.1",
            f"POST policies/ x{accepted + 1} (480-char rules) until refused",
            last,
            ok=last.status == 409 and last.code == "policy_budget_exceeded" and within,
            unchanged=active_ids() == before,
            outcome=f"{last.code} after {accepted} accepted; budget {json.dumps(budget)}",
            note=f"another agent's preamble: {len(pre.get('text') or '')} chars, policy lines {policy_chars} chars "
            f"(budget {budget.get('budget')})",
        )
        before = active_ids()
        r = a.post("policies/", {"domain": "conventions", "rule": "R" * 1999 + "."})
        fields = r.get("fields") or {}
        rep.add(
            "5.2",
            "POST policies/ rule of 2,000 characters",
            r,
            ok=r.status == 400 and "rule" in fields,
            unchanged=active_ids() == before,
            outcome=f"{r.code} on {','.join(fields) or '-'}",
        )

    # 6. Unbounded reads and queues ---------------------------------------------------------------
    def unbounded_reads(self) -> None:
        rep, a = self.report, self.attacker
        for number, path, query in [
            ("6.1", "facts/", {"limit": 1_000_000}),
            ("6.2", "facts/", {"limit": "abc"}),
            ("6.3", "facts/", {"offset": 10**13}),
            ("6.4", "policies/", {"limit": 1_000_000}),
            ("6.5", "conflicts/", {"limit": 1_000_000}),
            ("6.6", "candidates/", {"limit": 1_000_000}),
        ]:
            r = a.get(path, **query)
            results = r.get("results")
            clamped = r.status == 200 and results is not None and len(results) <= 200
            rep.add(
                number,
                f"GET {path}?{urllib.parse.urlencode(query)}",
                r,
                ok=r.status == 400 or clamped,
                outcome=(
                    f"{r.code} on {','.join(r.get('fields') or {}) or '-'}"
                    if r.status == 400
                    else f"{len(results or [])} rows of {r.get('count')}"
                ),
            )
        r = a.post("search/", {"query": "linter", "limit": 100_000})
        rep.add("6.7", "POST search/ limit=100000", r, ok=r.status == 400)

        self._burst("6.8", "POST harmonize/ x20 at once", 20, lambda: a.post("harmonize/", {}))
        session = f"s-burst-{self.tag}"
        a.post("remember/", {"session_id": session, "domain": "conventions", "content": "Lint before merging."})
        self._burst(
            "6.9",
            "POST consolidate/ x10 at once (one session)",
            10,
            lambda: a.post("consolidate/", {"session_id": session}),
        )

    def _burst(self, number: str, label: str, count: int, send: Any) -> None:
        barrier = threading.Barrier(count)

        def one() -> Resp:
            barrier.wait()
            return send()

        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            answers = list(pool.map(lambda _: one(), range(count)))
        statuses = sorted({r.status for r in answers})
        started = [r for r in answers if r.get("joined") is False]
        joined = [r for r in answers if r.get("joined") is True]
        started_ids = {r.get("task_id") for r in started}
        strays = {r.get("task_id") for r in joined} - started_ids
        errors = [r for r in answers if r.status >= 400]
        # Requests released together: with one job at a time, those that arrive while it is queued
        # or running join it. Every request starting its own job is the attack succeeding. (Without a
        # broker jobs run inline and answer when done, so a later request may start a second job after
        # the first finished; the note says how many.)
        ok = not errors and bool(joined) and len(started_ids) < count and not strays
        rep_note = ""
        if len(started_ids) > 1:
            per_job = [sum(1 for r in joined if r.get("task_id") == t) for t in started_ids]
            rep_note = (
                f"{len(started_ids)} jobs for {count} requests, joined {per_job} times each; without a broker a job "
                "runs inline, so a request claiming after it finished starts the next"
            )
        if errors:
            rep_note = f"errors: {short(errors[0].body, 200)}"
        self.report.add(
            number,
            label,
            answers[0],
            ok=ok,
            outcome=f"{len(started_ids)} job(s) started, {len(joined)} joined"
            + (f", {len(strays)} unknown task ids" if strays else ""),
            note=rep_note,
        )
        self.report.rows[-1].status = "/".join(map(str, statuses))

    def run(self) -> None:
        self.setup()
        for step in (
            self.forged_authority,
            self.self_certified,
            self.none_bypassed,
            self.planted_context,
            self.unbounded_pushes,
            self.unbounded_reads,
        ):
            try:
                step()
            except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError, TypeError) as exc:
                self.report.add(
                    step.__name__,
                    f"{step.__name__}: aborted",
                    None,
                    ok=False,
                    outcome=f"{type(exc).__name__}: {exc}",
                    error=True,
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--url", required=True, help="the running server, e.g. http://127.0.0.1:8765")
    parser.add_argument("--home", required=True, help="the server's ENGRAM_HOME, for the manage.py subprocesses")
    parser.add_argument("--workspace", default=None, help="workspace slug to create (default attack-<unix time>)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each row as it is decided")
    args = parser.parse_args(argv)
    workspace = args.workspace or f"attack-{int(time.time())}"
    report = Report(verbose=args.verbose)
    Attacks(args.url, args.home, workspace, report).run()
    print()
    return report.print()


if __name__ == "__main__":
    sys.exit(main())
