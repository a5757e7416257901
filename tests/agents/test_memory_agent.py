"""The reference memory-agent loop (SPEC §9) with a scripted action agent: without a memory
agent it repeats a failing command; with the rule-based one, one grounded reminder prevents the
repetition, and every other decision is selective silence, logged on the run."""

import json
import logging
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engram_client import EngramClient, EngramError
from engram_client.bank_adapter import LocalBank
from engram_client.memory_agent import (
    REMINDER_PREFIX,
    BankUpdate,
    Decision,
    MemoryAgent,
    MemoryView,
    OpenAICompatibleDecider,
    RuleBasedDecider,
    Step,
    extract_constraints,
    parse_reply,
    run_without_memory,
)
from memory.models import BankItem, Candidate, Fact, Intervention, MemoryRun


class ScriptedAgent:
    """Follows a fixed plan and sees only its last few messages (a short context window), so a
    failure from a while ago is forgotten. Like any agent it reads its context: a memory
    reminder naming the command it is about to run makes it take its alternative."""

    def __init__(self, plan, alternatives=None, visible=4):
        self.plan, self.alternatives, self.visible = plan, alternatives or {}, visible
        self.calls = 0
        self.contexts = []  # the context of every call, in order

    def __call__(self, context):
        self.calls += 1
        self.contexts.append(list(context))
        done = sum(1 for m in context if m["role"] == "tool")
        if done >= len(self.plan):
            return {"command": "", "final": True, "thought": "plan finished"}
        command = self.plan[done]
        for message in context[-self.visible :]:
            reminded = message["role"] == "user" and message["content"].startswith(REMINDER_PREFIX)
            if reminded and f"`{command}`" in message["content"] and command in self.alternatives:
                return {"command": self.alternatives[command], "thought": "the memory reminder says that fails"}
        return {"command": command, "thought": f"plan step {done}"}


class Shell:
    """A tiny environment: each command has a fixed answer; `done` ends the task."""

    def __init__(self, answers):
        self.answers, self.executed = answers, []

    def __call__(self, action):
        command = action["command"]
        self.executed.append(command)
        ok, output, *rest = self.answers.get(command, (False, f"sh: {command.split()[0]}: command not found"))
        return {"ok": ok, "output": output, "done": bool(rest and rest[0])}


REPO_TASK = "Get the payments test suite passing."
REPO_PLAN = ["ls", "make test", "cat Makefile", "ls tests", "cat tests/test_checkout.py", "make test", "pytest -q"]
REPO_ANSWERS = {
    "ls": (True, "Makefile  README.md  payments  tests"),
    "make test": (False, "make: *** No rule to make target 'test'.  Stop."),
    "cat Makefile": (True, "build:\n\tpython -m build"),
    "ls tests": (True, "test_checkout.py  test_refunds.py"),
    "cat tests/test_checkout.py": (True, "def test_checkout(db): ..."),
    "pytest -q": (True, "12 passed in 0.41s", True),
}


def _repo_agent():
    return ScriptedAgent(REPO_PLAN, alternatives={"make test": "pytest -q"})


def test_without_a_memory_agent_the_action_agent_repeats_the_failing_command():
    shell = Shell(REPO_ANSWERS)
    steps = run_without_memory(_repo_agent(), shell, REPO_TASK)
    failed_make = [s for s in steps if s.command == "make test"]
    assert len(failed_make) == 2
    assert all(not s.ok for s in failed_make)
    assert shell.executed.count("make test") == 2


def test_the_memory_agent_reminder_prevents_the_repeated_failure(world):
    shell = Shell(REPO_ANSWERS)
    agent = _repo_agent()
    loop = MemoryAgent(agent, shell, bank=LocalBank(world.coder), decider=RuleBasedDecider())

    result = loop.run(REPO_TASK)

    assert result.memory_available
    assert shell.executed.count("make test") == 1
    assert shell.executed[-1] == "pytest -q"
    assert result.done
    assert len(result.reminders) == 1
    step, reminder = result.reminders[0]
    assert step == 5
    assert "`make test` already failed at step 1" in reminder
    assert "No rule to make target" in reminder  # grounded in the error it saw
    # Step 5's proposal (`make test` again) was held back; step 6's one call carried the reminder,
    # as a message of its own at the end of its context — and the kept context never holds it.
    message = {"role": "user", "content": f"{REMINDER_PREFIX}\n{reminder}"}
    assert [i for i, seen in enumerate(agent.contexts) if message in seen] == [6]
    assert agent.contexts[6][-1] == message
    assert message not in result.context
    # Every decision is logged; all but one are selective silence.
    run = MemoryRun.objects.get(pk=result.run_id)
    logged = list(Intervention.objects.filter(run=run).values_list("step", "reminder"))
    assert [s for s, _ in logged] == [0, 1, 2, 3, 4, 5, 6]
    assert [s for s, r in logged if r is not None] == [5]
    assert Intervention.objects.get(run=run, step=5).window[1]["command"] == "make test"
    # The bank remembers the failure with its error.
    failure = BankItem.objects.get(run=run, kind="procedural")
    assert failure.outcome == "failed"
    assert failure.content.startswith("`make test` failed at step 1: make: *** No rule to make target")
    # A last look after the final step: the bank holds the whole run when it is closed.
    assert "Last step 6: `pytest -q` ok." in BankItem.objects.get(run=run, kind="status").content
    assert run.status == "finished"


def test_a_saved_constraint_stops_a_contradicting_command():
    task = "Install the PostgreSQL client library for payments. Do not use `sudo`: the CI runner has no root."
    plan = ["apt-get install -y libpq-dev", "sudo apt-get install -y libpq-dev", "python -c 'import psycopg'"]
    answers = {
        "apt-get install -y libpq-dev": (False, "E: Could not open lock file - open (13: Permission denied)"),
        "sudo apt-get install -y libpq-dev": (True, "libpq-dev installed"),
        "pip install psycopg[binary]": (True, "Successfully installed psycopg-3.2"),
        "python -c 'import psycopg'": (True, "", True),
    }
    alternatives = {"sudo apt-get install -y libpq-dev": "pip install psycopg[binary]"}

    baseline = Shell(answers)
    run_without_memory(ScriptedAgent(plan, alternatives), baseline, task)
    assert "sudo apt-get install -y libpq-dev" in baseline.executed

    shell = Shell(answers)
    bank = InMemoryBank()
    result = MemoryAgent(ScriptedAgent(plan, alternatives), shell, bank=bank).run(task)
    assert not any(c.startswith("sudo") for c in shell.executed)
    assert "pip install psycopg[binary]" in shell.executed
    [(step, reminder)] = result.reminders
    assert step == 1
    assert "Do not use `sudo`" in reminder
    assert "uses `sudo`" in reminder
    constraint = next(iter(bank.knowledge.values()))
    assert "constraint" in constraint["tags"] and "forbid:sudo" in constraint["tags"]


def test_retrying_after_a_fix_is_not_reminded():
    plan = ["pytest -q", "pip install psycopg", "pytest -q"]
    shell = StatefulShell()
    bank = InMemoryBank()
    result = MemoryAgent(ScriptedAgent(plan), shell, bank=bank).run("Make the tests pass.")
    assert shell.executed == plan
    assert result.reminders == []  # the retry follows a change: silence is right
    [decision_rationale] = [d.rationale for step, d in result.decisions if step == 2]
    assert "after a change at step 1" in decision_rationale
    item = next(iter(bank.procedural.values()))
    assert item["outcome"] == "worked"
    assert len(bank.interventions) == 3


def test_the_memory_agent_runs_every_n_steps_on_the_last_k_steps():
    plan = [f"echo {i}" for i in range(20)]
    shell = Shell({c: (True, c[5:]) for c in plan})
    seen: list[MemoryView] = []

    def decider(view):
        seen.append(view)
        return None

    bank = InMemoryBank()
    MemoryAgent(ScriptedAgent(plan), shell, bank=bank, decider=decider, interval=5, window=8).run("Count.")
    assert [v.step for v in seen] == [0, 5, 10, 15, 20]
    assert [len(v.window) for v in seen] == [0, 5, 8, 8, 8]
    assert [s.step for s in seen[3].window] == list(range(7, 15))
    assert [i["step"] for i in bank.interventions] == [0, 5, 10, 15, 20]
    assert all(i["reminder"] is None for i in bank.interventions)


def test_any_callable_decides_and_a_failing_decider_means_silence():
    plan = ["make build", "make build"]
    shell = Shell({"make build": (True, "ok")})
    bank = InMemoryBank()

    def custom(view):
        if view.step == 1:
            return {
                "updates": [{"tool": "memory_save_knowledge", "id": "k1", "content": "build twice"}],
                "reminder": "x",
            }
        raise RuntimeError("model unavailable")

    result = MemoryAgent(ScriptedAgent(plan), shell, bank=bank, decider=custom).run("Build.")
    assert result.reminders == [(1, "x")]
    assert bank.knowledge["k1"]["content"] == "build twice"
    assert bank.interventions[0]["reminder"] is None
    assert "decider failed: model unavailable" in bank.interventions[0]["rationale"]


def test_offering_candidates_at_the_end_creates_candidates_and_no_fact(world):
    facts = Fact.objects.count()
    loop = MemoryAgent(_repo_agent(), Shell(REPO_ANSWERS), bank=LocalBank(world.coder), offer_candidates=True)
    result = loop.run(REPO_TASK)
    assert Fact.objects.count() == facts
    [candidate] = result.finished["candidates"]
    assert candidate["origin"] == "memory_agent"
    assert candidate["requires_human_review"] is True
    assert Candidate.objects.get(pk=candidate["id"]).fact_id is None


@pytest.mark.django_db(transaction=True)
def test_the_loop_works_over_http_with_the_client(world, live_server):
    engram = EngramClient(live_server.url, world.coder.plain_key)
    shell = Shell(REPO_ANSWERS)
    result = MemoryAgent(_repo_agent(), shell, bank=engram).run(REPO_TASK)
    assert shell.executed.count("make test") == 1
    assert [s for s, _ in result.reminders] == [5]
    bank = engram.get_bank(result.run_id)
    assert bank["run_status"] == "finished"
    assert bank["procedural"][0]["outcome"] == "failed"
    with pytest.raises(EngramError) as exc:
        EngramClient(live_server.url, world.coder2.plain_key).get_bank(result.run_id)
    assert exc.value.status == 404


# --- Engram down, reminder lifetime, one call per step, two-phase model decider ------------------
def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _unreachable_warnings(caplog):
    return [r for r in caplog.records if r.name == "engram.memory_agent" and "unreachable" in r.getMessage()]


def test_with_engram_down_from_the_start_the_task_runs_without_memory(caplog):
    caplog.set_level(logging.WARNING, logger="engram.memory_agent")
    engram = EngramClient(f"http://127.0.0.1:{_closed_port()}", "no-server", timeout=2, sleep=lambda s: None)
    shell, agent = Shell(REPO_ANSWERS), _repo_agent()

    result = MemoryAgent(agent, shell, bank=engram).run(REPO_TASK)

    # The memory lookup failed, not the task: every step ran, as it would with no memory agent.
    assert shell.executed == REPO_PLAN
    assert result.done and [s.command for s in result.steps] == REPO_PLAN
    assert agent.calls == len(REPO_PLAN)
    assert result.reminders == [] and result.decisions == []
    assert (result.memory_available, result.run_id, result.finished) == (False, None, {})
    assert "create_run" in result.memory_error and "connection_error" in result.memory_error
    assert len(_unreachable_warnings(caplog)) == 1


def test_a_hung_engram_costs_one_timeout_and_the_run_goes_on(caplog):
    caplog.set_level(logging.WARNING, logger="engram.memory_agent")
    with socket.socket() as hung:  # accepts connections (the backlog), never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        engram = EngramClient(f"http://127.0.0.1:{hung.getsockname()[1]}", "k", timeout=0.5, retries=0)
        shell = Shell({c: (True, "ok") for c in ("a", "b", "c")})
        started = time.monotonic()
        result = MemoryAgent(ScriptedAgent(["a", "b", "c"]), shell, bank=engram).run("Letters.")
    assert shell.executed == ["a", "b", "c"]
    assert not result.memory_available and result.run_id is None
    assert time.monotonic() - started < 5  # one timeout, not one per step
    assert len(_unreachable_warnings(caplog)) == 1


class Proxy:
    """A forwarding HTTP server in front of the live server: stopping it is Engram going away."""

    def __init__(self, target):
        class Handler(BaseHTTPRequestHandler):
            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
                request = urllib.request.Request(target + self.path, data=body, method=self.command)  # noqa: S310 — live_server
                for name in ("Authorization", "Content-Type", "Accept"):
                    if self.headers.get(name):
                        request.add_header(name, self.headers[name])
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                        status, raw = answer.status, answer.read()
                except urllib.error.HTTPError as exc:
                    status, raw = exc.code, exc.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = _forward

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.django_db(transaction=True)
def test_when_engram_stops_mid_run_the_task_carries_on_without_memory(world, live_server, caplog):
    caplog.set_level(logging.WARNING, logger="engram.memory_agent")
    proxy = Proxy(live_server.url)
    engram = EngramClient(proxy.url, world.coder.plain_key, timeout=5, sleep=lambda s: None)

    class StopsAfterTwoSteps(Shell):
        def __call__(self, action):
            if len(self.executed) == 2:
                proxy.stop()  # Engram goes away before step 2's memory turn
            return super().__call__(action)

    shell, agent = StopsAfterTwoSteps(REPO_ANSWERS), _repo_agent()
    try:
        result = MemoryAgent(agent, shell, bank=engram).run(REPO_TASK)
    finally:
        proxy.stop()

    # Steps 0-2 had their memory turns; from step 3 on there was none, and no reminder: the
    # repeated `make test` ran, like a run without memory, instead of the task failing.
    assert shell.executed == REPO_PLAN
    assert agent.calls == len(REPO_PLAN)
    assert result.done and result.reminders == []
    assert [step for step, _ in result.decisions] == [0, 1, 2]
    assert (result.memory_available, result.finished) == (False, {})
    assert result.run_id is not None and result.memory_error
    assert len(_unreachable_warnings(caplog)) == 1  # once, not once per step
    run = MemoryRun.objects.get(pk=result.run_id)
    assert list(Intervention.objects.filter(run=run).values_list("step", flat=True)) == [0, 1, 2]
    assert run.status != "finished"


@pytest.mark.parametrize("status", [0, 408, 429, 500, 502, 503])
def test_an_outage_of_any_kind_means_no_memory_and_one_warning(status, caplog):
    caplog.set_level(logging.WARNING, logger="engram.memory_agent")
    bank = InMemoryBank(fail={"get_bank": EngramError(status, "down", "Engram is away")})
    shell = Shell({c: (True, "ok") for c in ("a", "b", "c")})
    result = MemoryAgent(ScriptedAgent(["a", "b", "c"]), shell, bank=bank).run("Letters.")
    assert shell.executed == ["a", "b", "c"]
    assert not result.memory_available and result.memory_error.startswith("get_bank:")
    assert bank.calls == ["create_run", "get_bank"]  # nothing more once Engram is known to be away
    assert len(_unreachable_warnings(caplog)) == 1


@pytest.mark.parametrize("method", ["create_run", "get_bank", "intervene", "finish_run"])
def test_a_refusal_that_means_a_caller_bug_still_raises(method):
    bank = InMemoryBank(fail={method: EngramError(403, "insufficient_memory_permission", "no")})
    shell = Shell({"a": (True, "ok")})
    with pytest.raises(EngramError) as exc:
        MemoryAgent(ScriptedAgent(["a"]), shell, bank=bank).run("A.")
    assert exc.value.status == 403


def test_a_reminder_is_shown_with_the_next_call_only():
    plan = ["a", "b", "c", "d"]
    agent = ScriptedAgent(plan, visible=100)

    def decider(view):
        return f"note for step {view.step}" if view.step in (1, 2) else None

    result = MemoryAgent(
        agent, Shell({c: (True, "ok") for c in plan}), bank=InMemoryBank(), decider=decider, preview=False
    ).run("Letters.")

    assert result.reminders == [(1, "note for step 1"), (2, "note for step 2")]
    shown = [[m["content"] for m in context if m["content"].startswith(REMINDER_PREFIX)] for context in agent.contexts]
    assert shown == [
        [],
        [f"{REMINDER_PREFIX}\nnote for step 1"],
        [f"{REMINDER_PREFIX}\nnote for step 2"],  # not step 1's as well
        [],
        [],
    ]
    assert not any(m["content"].startswith(REMINDER_PREFIX) for m in result.context)


def test_with_preview_the_action_agent_is_called_once_per_step(world):
    agent = _repo_agent()
    shell = Shell(REPO_ANSWERS)
    result = MemoryAgent(agent, shell, bank=LocalBank(world.coder), preview=True).run(REPO_TASK)
    # interval=1: one memory turn per step, and one action call per step — the reminder step too.
    assert agent.calls == len(result.decisions) == 7
    assert [step for step, _ in result.decisions] == list(range(7))
    # The call of step 5 proposed `make test` again: held back, never run.
    assert agent.contexts[5] == agent.contexts[6][:-1]
    assert shell.executed.count("make test") == 1


def test_a_proposal_is_never_held_back_twice_in_a_row():
    agent = ScriptedAgent(["make test", "make test", "make test"])  # ignores every reminder
    shell = Shell({"make test": (False, "make: *** No rule to make target 'test'.")})
    result = MemoryAgent(agent, shell, bank=InMemoryBank()).run("Test.")
    # Step 1's repeat is held back with a reminder; the agent insists at step 2, and it runs.
    assert [s.step for s in result.steps] == [0, 2, 4]
    assert [step for step, _ in result.reminders] == [1, 2, 3, 4]
    assert agent.calls == 6  # steps 0-5: five proposals and the final answer


class FakeChat:
    """An OpenAI-compatible /chat/completions on 127.0.0.1: answers phase 1 (bank operations) and
    phase 2 (the decision) from two scripts, and records every request."""

    def __init__(self, updates, decisions):
        self.updates, self.decisions, self.requests = list(updates), list(decisions), []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                phase1 = "only manage the memory bank" in body["messages"][0]["content"]
                content = (fake.updates if phase1 else fake.decisions).pop(0)
                raw = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _bank_in(prompt, label):
    return json.loads(re.search(rf"{label}: (\{{.*?\}})\n\n", prompt, re.S).group(1))


@pytest.mark.django_db(transaction=True)
def test_the_model_decider_updates_the_bank_then_decides_on_the_updated_bank(world, live_server):
    saved = {
        "tool": "memory_save_knowledge",
        "id": "k-db-port",
        "content": "The test database listens on port 5433, not 5432.",
        "tags": ["path"],
    }
    chat = FakeChat(
        updates=[json.dumps({"updates": [saved]}), '{"updates": []}', '{"updates": []}'],
        decisions=[
            '{"reminder": null, "rationale": "nothing bears on ls"}',
            '{"reminder": "Not `psql -p 5432`: the test database listens on port 5433.", "rationale": "k-db-port"}',
        ],
    )
    engram = EngramClient(live_server.url, world.coder.plain_key)
    plan = ["ls", "psql -p 5432"]
    agent = ScriptedAgent(plan, alternatives={"psql -p 5432": "psql -p 5433"})
    shell = Shell({"ls": (True, "db.conf"), "psql -p 5433": (True, "connected", True)})
    try:
        decider = OpenAICompatibleDecider(chat.url, "sk-test", "small-model")
        result = MemoryAgent(agent, shell, bank=engram, decider=decider, preview=False).run("Connect to the test db.")
    finally:
        chat.close()

    # Step 0: update (writes k-db-port), then decide; step 1: update, decide; the final update.
    phases = ["update" if "only manage" in r["messages"][0]["content"] else "decide" for r in chat.requests]
    assert phases == ["update", "decide", "update", "decide", "update"]
    first, second = (r["messages"][1]["content"] for r in chat.requests[:2])
    assert "5433" not in first
    # The decision saw the bank as Engram holds it after phase 1's write: re-read, not assumed.
    bank = _bank_in(second, "Updated memory bank")
    assert bank["run"] == result.run_id and bank["run_status"] == "running"
    [item] = bank["knowledge"]
    assert (item["id"], item["content"]) == ("k-db-port", saved["content"]) and item["updated_at"]
    assert BankItem.objects.get(run_id=result.run_id, item_id="k-db-port").tags == ["path"]
    assert result.reminders == [(1, "Not `psql -p 5432`: the test database listens on port 5433.")]
    assert shell.executed == ["ls", "psql -p 5433"]
    assert result.memory_available and result.finished["status"] == "finished"


# --- the decider's pieces ----------------------------------------------------------------------
def test_constraints_are_read_from_plain_sentences():
    [c] = extract_constraints("Build it. Do not use `sudo` on the runners.")
    assert (c.forbid, c.instead) == ("sudo", "")
    [c] = extract_constraints("error: `pip install` is disabled here; use `uv pip install` instead.")
    assert (c.forbid, c.instead) == ("pip install", "uv pip install")
    [c] = extract_constraints("Don't run 'make deploy' from a laptop.")
    assert c.forbid == "make deploy"
    assert extract_constraints("Everything is fine. Use `make`.") == []


def test_the_alternative_named_by_a_constraint_is_not_a_violation():
    decider = RuleBasedDecider()
    view = MemoryView(task="`pip install` is disabled; use `uv pip install` instead.", step=0, window=[], bank={})
    decider.update(view)
    allowed = MemoryView(task=view.task, step=0, window=[], bank={}, proposed={"command": "uv pip install rich"})
    assert decider.decide(allowed)[0] is None
    denied = MemoryView(task=view.task, step=0, window=[], bank={}, proposed={"command": "pip install rich"})
    assert "uses `pip install`" in decider.decide(denied)[0]


def test_the_rule_based_decider_resumes_from_a_bank_written_earlier():
    bank = {
        "procedural": [{"id": "f1", "content": "`make test` failed at step 3: no rule", "outcome": "failed"}],
        "knowledge": [{"id": "c1", "content": "Never use `sudo`.", "tags": ["constraint", "forbid:sudo"]}],
    }
    decider = RuleBasedDecider()
    repeat = decider(MemoryView(task="t", step=9, window=[], bank=bank, proposed={"command": "make  test"}))
    assert "failed at step 3: no rule" in repeat.reminder
    sudo = decider(MemoryView(task="t", step=9, window=[], bank=bank, proposed={"command": "sudo ls"}))
    assert "Never use `sudo`." in sudo.reminder
    quiet = decider(MemoryView(task="t", step=9, window=[], bank=bank, proposed={"command": "pytest"}))
    assert quiet.reminder is None


def test_parse_reply_reads_json_tags_or_stays_silent():
    fenced = parse_reply(
        'Sure.\n```json\n{"updates": [{"tool": "memory_save_procedural", "id": "p1", "content": "`x` failed",'
        ' "outcome": "failed"}, {"tool": "launch_rockets"}], "reminder": "`x` failed at step 2.",'
        ' "rationale": "repeat"}\n```'
    )
    assert fenced.reminder == "`x` failed at step 2."
    assert fenced.updates == [BankUpdate("memory_save_procedural", id="p1", content="`x` failed", outcome="failed")]
    bare = parse_reply('{"updates": [{"tool": "update_status", "content": "halfway"}], "reminder": null}')
    assert bare.reminder is None
    assert bare.updates[0].tool == "memory_update_status"
    assert parse_reply("<context_for_action>Use port 5433.</context_for_action>").reminder == "Use port 5433."
    assert parse_reply("<no_intervention/>").reminder is None
    garbage = parse_reply("I think you should be careful {not json")
    assert garbage.reminder is None
    assert "unreadable" in garbage.rationale


def test_openai_compatible_decider_is_configured_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_MODEL"):
        OpenAICompatibleDecider()
    monkeypatch.setenv("OPENAI_MODEL", "small-model")
    decider = OpenAICompatibleDecider()
    assert (decider.base_url, decider.api_key, decider.model) == ("http://127.0.0.1:9/v1", "sk-test", "small-model")
    view = MemoryView(
        task="Fix CI",
        step=4,
        window=[Step(3, "make test", "", False, "no rule")],
        bank={"status": ""},
        proposed={"command": "make test"},
    )
    system, user = decider.update_messages(view)
    assert system["role"] == "system" and "only manage the memory bank" in system["content"]
    assert "Fix CI" in user["content"] and '"make test"' in user["content"]
    system, user = decider.decide_messages(view)
    assert system["role"] == "system" and "Only intervene" in system["content"]
    assert "Updated memory bank" in user["content"] and '"make test"' in user["content"]
    replies = iter(
        [
            '{"updates": [{"tool": "memory_save_procedural", "id": "p1", "content": "no rule", "outcome": "failed"}]}',
            '{"reminder": "`make test` failed at step 3.", "updates": []}',
        ]
    )
    sent = []
    monkeypatch.setattr(decider, "complete", lambda messages: sent.append(messages) or next(replies))
    assert decider(view) == Decision(
        updates=[BankUpdate("memory_save_procedural", id="p1", content="no rule", outcome="failed")],
        reminder="`make test` failed at step 3.",
        rationale="model reply",
    )
    # Used on its own, phase 2 sees the bank with phase 1's update applied.
    assert '"id": "p1"' in sent[1][1]["content"]


# --- test doubles --------------------------------------------------------------------------------
class InMemoryBank:
    """The bank calls without a server, for loop tests that are not about persistence. `fail`
    maps a method name to the error it raises; `calls` records the methods called."""

    def __init__(self, fail=None):
        self.status, self.knowledge, self.procedural, self.interventions = "", {}, {}, []
        self.fail, self.calls = fail or {}, []

    def _called(self, name):
        self.calls.append(name)
        if name in self.fail:
            raise self.fail[name]

    def create_run(self, task):
        self._called("create_run")
        return {"id": 1, "task": task}

    def get_bank(self, run_id):
        self._called("get_bank")
        return {
            "status": self.status,
            "knowledge": [{"id": k, **v} for k, v in self.knowledge.items()],
            "procedural": [{"id": k, **v} for k, v in self.procedural.items()],
        }

    def update_status(self, run_id, content):
        self._called("update_status")
        self.status = content

    def save_knowledge(self, run_id, item_id, content, tags=None):
        self._called("save_knowledge")
        self.knowledge[item_id] = {"content": content, "tags": list(tags or [])}

    def save_procedural(self, run_id, item_id, content, outcome):
        self._called("save_procedural")
        self.procedural[item_id] = {"content": content, "outcome": outcome}

    def delete_item(self, run_id, item_id, kind=None):
        self._called("delete_item")
        self.knowledge.pop(item_id, None)
        self.procedural.pop(item_id, None)

    def intervene(self, run_id, step, reminder, rationale=None, window=None):
        self._called("intervene")
        self.interventions.append({"step": step, "reminder": reminder, "rationale": rationale, "window": window})

    def finish_run(self, run_id, offer_candidates=False):
        self._called("finish_run")
        return {"id": run_id, "status": "finished", "candidates": []}


class StatefulShell(Shell):
    """pytest fails until psycopg is installed."""

    def __init__(self):
        super().__init__({})
        self.installed = False

    def __call__(self, action):
        command = action["command"]
        self.executed.append(command)
        if command == "pip install psycopg":
            self.installed = True
            return {"ok": True, "output": "Successfully installed psycopg"}
        if self.installed:
            return {"ok": True, "output": "3 passed", "done": True}
        return {"ok": False, "output": "ModuleNotFoundError: No module named 'psycopg'"}
