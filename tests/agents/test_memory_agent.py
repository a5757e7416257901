"""The reference memory-agent loop (SPEC §9) with a scripted action agent: without a memory
agent it repeats a failing command; with the rule-based one, one grounded reminder prevents the
repetition, and every other decision is selective silence, logged on the run."""

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

    def __call__(self, context):
        self.calls += 1
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
    loop = MemoryAgent(_repo_agent(), shell, bank=LocalBank(world.coder), decider=RuleBasedDecider())

    result = loop.run(REPO_TASK)

    assert shell.executed.count("make test") == 1
    assert shell.executed[-1] == "pytest -q"
    assert result.done
    assert len(result.reminders) == 1
    step, reminder = result.reminders[0]
    assert step == 5
    assert "`make test` already failed at step 1" in reminder
    assert "No rule to make target" in reminder  # grounded in the error it saw
    # The reminder was appended to the action agent's context, as a message of its own.
    assert {"role": "user", "content": f"{REMINDER_PREFIX}\n{reminder}"} in result.context
    # Every decision is logged; all but one are selective silence.
    run = MemoryRun.objects.get(pk=result.run_id)
    logged = list(Intervention.objects.filter(run=run).values_list("step", "reminder"))
    assert [s for s, _ in logged] == [0, 1, 2, 3, 4, 5]
    assert [s for s, r in logged if r is not None] == [5]
    assert Intervention.objects.get(run=run, step=5).window[1]["command"] == "make test"
    # The bank remembers the failure with its error.
    failure = BankItem.objects.get(run=run, kind="procedural")
    assert failure.outcome == "failed"
    assert failure.content.startswith("`make test` failed at step 1: make: *** No rule to make target")
    # A last look after the final step: the bank holds the whole run when it is closed.
    assert "Last step 5: `pytest -q` ok." in BankItem.objects.get(run=run, kind="status").content
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
    system, user = decider.messages(view)
    assert system["role"] == "system" and "Only intervene" in system["content"]
    assert "Fix CI" in user["content"] and '"make test"' in user["content"]
    replies = iter(['{"reminder": "`make test` failed at step 3.", "updates": []}'])
    monkeypatch.setattr(decider, "complete", lambda messages: next(replies))
    assert decider(view) == Decision(reminder="`make test` failed at step 3.", rationale="model reply")


# --- test doubles --------------------------------------------------------------------------------
class InMemoryBank:
    """The bank calls without a server, for loop tests that are not about persistence."""

    def __init__(self):
        self.status, self.knowledge, self.procedural, self.interventions = "", {}, {}, []

    def create_run(self, task):
        return {"id": 1, "task": task}

    def get_bank(self, run_id):
        return {
            "status": self.status,
            "knowledge": [{"id": k, **v} for k, v in self.knowledge.items()],
            "procedural": [{"id": k, **v} for k, v in self.procedural.items()],
        }

    def update_status(self, run_id, content):
        self.status = content

    def save_knowledge(self, run_id, item_id, content, tags=None):
        self.knowledge[item_id] = {"content": content, "tags": list(tags or [])}

    def save_procedural(self, run_id, item_id, content, outcome):
        self.procedural[item_id] = {"content": content, "outcome": outcome}

    def delete_item(self, run_id, item_id, kind=None):
        self.knowledge.pop(item_id, None)
        self.procedural.pop(item_id, None)

    def intervene(self, run_id, step, reminder, rationale=None, window=None):
        self.interventions.append({"step": step, "reminder": reminder, "rationale": rationale, "window": window})

    def finish_run(self, run_id, offer_candidates=False):
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
