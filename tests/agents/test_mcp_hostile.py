"""Hostile input over MCP (issue 33): `manage.py mcp` answers every frame — the API's hostile
corpus (tests/hostile_corpus.py) as argument values, as argument keys and as whole frames, for
every tool — with an error carrying the API's stable code, within a second, and goes on answering.

The frames are written to the server's stdin byte for byte (no SDK client, which would refuse to
send most of them) and its answers read line by line from its stdout.
"""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import pytest
from django.conf import settings
from mcp import types

from agents import operations as ops
from agents.api.parsers import SafeJSONParser
from agents.mcp_server import EngramTools, Refused, parse_frame, read_frame, request_id_of
from memory import safe_json
from memory.actors import Actor
from memory.errors import EngramError
from memory.services.tenancy import set_grant
from tests.agents.test_api_candidates import DOC
from tests.agents.test_mcp import SPEC_TOOLS, _env
from tests.conftest import client_for
from tests.factories import CandidateFactory, FactFactory, PolicyFactory
from tests.hostile_corpus import FIELD_VALUES, HOSTILE_KEYS, KEY_BODIES, LARGE_KEY_BODIES, RAW_BODIES, dumps
from tests.procs import ROOT

# A refused frame costs the server at most REFUSAL_SECONDS of CPU and is answered within
# ANSWER_SECONDS of wall clock: CI's other worker and PostgreSQL stretch the wall clock, not the
# server's own work.
REFUSAL_SECONDS = 1.0
ANSWER_SECONDS = 5.0
WORK_SECONDS = 60.0  # an accepted call does real work (the first embedding loads the model)
SAFE_JSON_CODES = {
    "malformed_json",
    "json_too_deep",
    "duplicate_key",
    "invalid_characters",
    "integer_out_of_range",
    "number_out_of_range",
}


class RawMCP:
    """`manage.py mcp` as a subprocess spoken to in raw lines: any bytes in, answers out by id."""

    def __init__(self, key: str) -> None:
        # stderr to a file: a pipe nobody reads would fill and block the server
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 -- closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "mcp"],
            cwd=ROOT,
            env=_env(key),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.last_id = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, frame: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame + b"\n")
        self.proc.stdin.flush()

    def new_id(self) -> int:
        self.last_id += 1
        return self.last_id

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        request_id = self.new_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})}
        self.send(json.dumps(message).encode())
        return request_id

    def answers(self, count: int, timeout: float) -> list[dict[str, Any]]:
        """The next `count` answers; fewer when `timeout` seconds pass first."""
        deadline, got = time.monotonic() + timeout, []
        while len(got) < count:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                break
            if not line:
                break  # the server's stdout closed: it died
            got.append(json.loads(line))
        return got

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = WORK_SECONDS) -> dict:
        request_id = self.request(method, params)
        [answer] = self.answers(1, timeout)
        assert answer["id"] == request_id, answer
        return answer

    def initialize(self) -> None:
        answer = self.call(
            "initialize",
            {
                "protocolVersion": types.LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "hostile-tests", "version": "1"},
            },
            timeout=120,
        )
        assert "result" in answer, answer
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def cpu_seconds(self) -> float:
        """The CPU time the server process has used so far (user + system, all its threads)."""
        with open(f"/proc/{self.proc.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-3000:]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _error_code(answer: dict[str, Any]) -> str | None:
    """The API's stable code an answer carries: a JSON-RPC error's `data.code`, or a tool
    result's `structuredContent.code` when it is an error; None for a success."""
    if "error" in answer:
        return (answer["error"].get("data") or {}).get("code")
    result = answer.get("result") or {}
    if result.get("isError"):
        return (result.get("structuredContent") or {}).get("code")
    return None


def _tool_call(request_id: int | None, tool: str, arguments: bytes) -> bytes:
    """A tools/call frame whose `arguments` are `arguments`, byte for byte; the id comes first, as
    clients write it."""
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"method":"tools/call",'
    return head + b'"params":{"name":' + json.dumps(tool).encode() + b',"arguments":' + arguments + b"}}"


class Sweep:
    """Sends frames, each followed by a ping, and records what went wrong: no answer, an error
    without a code, a refusal costing more than REFUSAL_SECONDS of CPU or answered after
    ANSWER_SECONDS, or a dead server."""

    def __init__(self, server: RawMCP) -> None:
        self.server = server
        self.failures: list[str] = []
        self.frames = self.refused = 0
        self.slowest = (0.0, "")
        self.costliest = (0.0, "")

    def tool(self, name: str, arguments: bytes, what: str, *, refused: bool = False) -> None:
        """tools/call of `name` with `arguments` as they are; the answer must carry its id."""
        request_id = self.server.new_id()
        self.frame(_tool_call(request_id, name, arguments), f"{name}({what})", refused=refused, answered_id=request_id)

    def frame(self, frame: bytes, what: str, *, refused: bool = True, answered_id: int | None = None) -> None:
        ping = self.server.new_id()
        started, cpu = time.perf_counter(), self.server.cpu_seconds()
        self.server.send(frame)
        self.server.send(json.dumps({"jsonrpc": "2.0", "id": ping, "method": "ping"}).encode())
        answers = {a.get("id"): a for a in self.server.answers(2, WORK_SECONDS)}
        elapsed, cpu = time.perf_counter() - started, self.server.cpu_seconds() - cpu
        self.frames += 1
        answer, pong = answers.get(answered_id), answers.get(ping)
        if pong is None or pong.get("result") != {}:
            self.failures.append(f"{what}: no answer to the ping after it ({answers})")
            if self.server.proc.poll() is not None:
                raise AssertionError(f"the server died after {what}:\n{self.server.stderr()}")
        if answer is None:
            self.failures.append(f"{what}: no answer with id {answered_id!r} ({list(answers)})")
            return
        code = _error_code(answer)
        is_error = "error" in answer or (answer.get("result") or {}).get("isError")
        if is_error and not code:
            self.failures.append(f"{what}: an error without a code: {str(answer)[:300]}")
        if refused and code is None:
            self.failures.append(f"{what}: accepted: {str(answer)[:300]}")
        if code is not None:
            self.refused += 1
            self.slowest = max(self.slowest, (elapsed, what))
            self.costliest = max(self.costliest, (cpu, what))
            if cpu > REFUSAL_SECONDS or elapsed > ANSWER_SECONDS:
                self.failures.append(f"{what}: refused ({code}) after {elapsed:.2f} s, {cpu:.2f} s of CPU")


def _refused(value: Any) -> bool:
    """NUL, a lone surrogate and an integer past 64 bits are refused wherever they are."""
    if isinstance(value, str):
        return safe_json.has_bad_characters(value)
    return isinstance(value, int) and not safe_json.INT_MIN <= value <= safe_json.INT_MAX


def _refused_as_arguments(body: bytes) -> bool:
    """Refused as the API refuses the body, or as no arguments object ([], "s", 1); an object or
    `null` (no arguments at all) may be accepted by a tool that needs nothing more."""
    if len(body) > settings.ENGRAM_MAX_BODY_BYTES:
        return True
    try:
        return not isinstance(safe_json.loads(body.decode("utf-8")), dict | None)
    except (UnicodeDecodeError, safe_json.UnsafeJSON):
        return True


# --- The world the frames hit ---------------------------------------------------------------------
def _valid_arguments(world) -> dict[str, dict[str, Any]]:
    """Arguments each tool accepts, so that one hostile value among them reaches as deep as it can."""
    set_grant(role=world.coder_role, domain=world.architecture, level="write", by=Actor.system("test"))
    api = client_for(world.coder)
    fact = FactFactory(domain=world.architecture, topic="deploys", content="Deploys run on Tuesdays.")
    policy = PolicyFactory(domain=world.architecture)
    candidate = CandidateFactory(domain=world.architecture)
    run, finished_run = (api.post("/api/v1/runs/", {"task": t}, format="json").json()["id"] for t in ("a", "b"))
    review = api.post(
        "/api/v1/reviews/",
        {"session_id": "s1", "output": "see docs/a.md", "files": {"docs/a.md": "# A"}},
        format="json",
    ).json()["id"]
    a_fact = {
        "domain": "architecture",
        "topic": "deploys",
        "content": "Deploys run on Tuesdays.",
        "memory_type": "decision",
    }
    return {
        "get_preamble": {"task": "deploy the billing service"},
        "search_memory": {"query": "billing deploys", "mode": "keyword"},
        "get_fact": {"fact_id": fact.pk},
        "propose_fact": a_fact,
        "propose_facts": {"items": [a_fact]},
        "supersede_fact": {"fact_id": fact.pk, "content": "Deploys run on Wednesdays.", "reason": "moved"},
        "create_episode": {"kind": "session", "title": "a session"},
        "propose_policy": {"domain": "architecture", "rule": "Run the tests before merging."},
        "supersede_policy": {"policy_id": policy.pk, "rule": "Run all tests before merging.", "reason": "tightened"},
        "update_my_notes": {"notes": "my notes"},
        "record_observation": {"text": "the build was slow"},
        "remember": {"session_id": "s1", "content": "Remember the deploy day."},
        "record_meeting_decisions": {"title": "weekly", "date": "2026-01-05", "decisions": ["Ship on Tuesdays."]},
        "submit_remember_review": {"session_id": "s1", "output": "see docs/a.md", "files": {"docs/a.md": "# A"}},
        "get_remember_review": {"review_id": review},
        "consume_remember_review": {"review_id": review},
        "submit_candidate": DOC,
        "get_candidate": {"candidate_pk": candidate.pk},
        "record_replay": {"candidate_pk": candidate.pk, "probe": "contract-regression", "passed": True},
        "promote_candidate": {"candidate_pk": candidate.pk},
        "deny_candidate": {"candidate_pk": candidate.pk, "reason": "not general"},
        "create_memory_run": {"task": "fix the build"},
        "memory_get_bank": {"run_id": run},
        "memory_update_status": {"run_id": run, "content": "working"},
        "memory_save_knowledge": {"run_id": run, "id": "k1", "content": "the build uses make", "tags": ["build"]},
        "memory_save_procedural": {"run_id": run, "id": "p1", "content": "run make test", "outcome": "success"},
        "memory_delete": {"run_id": run, "id": "k9"},
        "memory_log_decision": {"run_id": run, "step": 1},
        "finish_memory_run": {"run_id": finished_run},
    }


@pytest.fixture
def server(world):
    raw = RawMCP(world.coder.plain_key)
    try:
        raw.initialize()
        yield raw
    finally:
        raw.close()


# --- The corpus, against every tool ---------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_every_tool_answers_the_whole_hostile_corpus_with_a_code_and_keeps_answering(world, server, capsys):
    valid = _valid_arguments(world)
    listed = server.call("tools/list")["result"]["tools"]
    assert {t["name"] for t in listed} >= SPEC_TOOLS
    send, started = Sweep(server), time.perf_counter()
    for tool in listed:
        name, base = tool["name"], valid.get(tool["name"], {})
        for argument in [*tool["inputSchema"].get("properties", {})] or ["a"]:
            for value in FIELD_VALUES:
                send.tool(
                    name, dumps({**base, argument: value}), f"{argument}={str(value)[:20]!r}", refused=_refused(value)
                )
        for label, key in HOSTILE_KEYS.items():
            send.tool(name, dumps({**base, key: 1}), f"key: {label}", refused=True)
        for label, body in KEY_BODIES.items():
            send.tool(name, body, f"arguments: {label}", refused=True)
        for label, body in LARGE_KEY_BODIES.items():
            send.tool(name, body, f"arguments: {label}")
        for label, body in RAW_BODIES.items():
            send.tool(name, body, f"arguments: raw {label}", refused=_refused_as_arguments(body))
    for label, body in {**RAW_BODIES, **KEY_BODIES}.items():  # whole frames: none names an id
        send.frame(body, f"raw frame: {label}")

    whoami = server.call("tools/call", {"name": "whoami", "arguments": {}})
    assert whoami["result"]["structuredContent"]["name"] == world.coder.name
    with capsys.disabled():
        print(
            f"\nhostile MCP: {send.frames} frames to {len(listed)} tools, {send.refused} refused with a code, "
            f"slowest refusal {send.slowest[0]:.2f} s ({send.slowest[1][:50]}), costliest "
            f"{send.costliest[0]:.2f} s of CPU ({send.costliest[1][:50]}), {time.perf_counter() - started:.1f} s"
        )
    assert not send.failures, "\n".join(send.failures[:40])
    assert server.proc.poll() is None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_issues_findings_each_get_the_apis_code_with_the_request_id_at_once(world, server):
    run = client_for(world.coder).post("/api/v1/runs/", {"task": "fix the build"}, format="json").json()["id"]
    cases = [
        # (arguments as sent, the API's code, the JSON-RPC code)
        (b'{"query": "x\\ud800"}', "invalid_characters", types.INVALID_PARAMS),
        (b'{"query": "x", "mode": "\\udc00"}', "invalid_characters", types.INVALID_PARAMS),
        (b'{"query": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "json_too_deep", types.PARSE_ERROR),
        (b'{"query": "x", "a\\u0000b": 1}', "invalid_characters", types.INVALID_PARAMS),
        (b'{"query": "' + b"x" * 5_000_000 + b'"}', "body_too_large", types.PARSE_ERROR),
        (b'{"query": "x", "limit": 99999999999999999999}', "integer_out_of_range", types.INVALID_PARAMS),
        (b'{"query": "x", "query": "y"}', "duplicate_key", types.INVALID_PARAMS),
        (b'{"query": "\xff"}', "invalid_characters", types.PARSE_ERROR),
        (b'{"query": ', "malformed_json", types.PARSE_ERROR),
    ]
    for arguments, code, rpc_code in cases:
        request_id = server.new_id()
        started, cpu = time.perf_counter(), server.cpu_seconds()
        server.send(_tool_call(request_id, "search_memory", arguments))
        [answer] = server.answers(1, ANSWER_SECONDS)
        elapsed, cpu = time.perf_counter() - started, server.cpu_seconds() - cpu
        assert answer["id"] == request_id, (arguments[:60], answer)
        assert (answer["error"]["code"], answer["error"]["data"]["code"]) == (rpc_code, code), arguments[:60]
        assert set(answer["error"]["data"]) == {"code", "detail", "fields"}
        assert cpu < REFUSAL_SECONDS and elapsed < ANSWER_SECONDS, (arguments[:60], cpu, elapsed)
    # A lone surrogate in each argument of each tool: 49 of 49 went unanswered.
    for tool in server.call("tools/list")["result"]["tools"]:
        for argument in tool["inputSchema"].get("properties", {}):
            request_id = server.new_id()
            server.send(_tool_call(request_id, tool["name"], dumps({argument: "\ud800"})))
            [answer] = server.answers(1, ANSWER_SECONDS)
            assert (answer["id"], answer["error"]["data"]["code"]) == (request_id, "invalid_characters")
    # An id holding NUL never reaches the database (it was a server_error).
    deleted = server.call(
        "tools/call", {"name": "memory_delete", "arguments": {"run_id": run, "id": "k\x00"}}, timeout=5
    )
    assert deleted["error"]["data"]["code"] == "invalid_characters"
    assert server.call("ping") == {"jsonrpc": "2.0", "id": server.last_id, "result": {}}
    over_http = client_for(world.coder).delete(f"/api/v1/runs/{run}/bank/items/k%00/")
    assert (over_http.status_code, over_http.json()["code"]) == (400, "invalid_characters")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_arguments_of_the_wrong_shape_unknown_arguments_and_unknown_tools_answer_the_apis_codes(world, server):
    wrong = server.call("tools/call", {"name": "search_memory", "arguments": {"query": "x", "limit": "many"}})
    result = wrong["result"]
    assert result["isError"] and result["structuredContent"]["code"] == "invalid_input"
    assert list(result["structuredContent"]["fields"]) == ["limit"]
    missing = server.call("tools/call", {"name": "propose_fact", "arguments": {}})["result"]["structuredContent"]
    assert missing["code"] == "invalid_input" and {"domain", "topic", "content"} <= set(missing["fields"])
    # An argument the tool does not take was dropped unread (issue 36): now refused, as over HTTP.
    extra = server.call("tools/call", {"name": "search_memory", "arguments": {"query": "x", "colour": "blue"}})
    assert extra["result"]["isError"] and extra["result"]["structuredContent"]["code"] == "unknown_argument"
    assert extra["result"]["structuredContent"]["fields"] == {"colour": ["Unknown argument."]}
    unknown = server.call("tools/call", {"name": "drop_tables", "arguments": {}})["result"]
    assert unknown["isError"] and unknown["structuredContent"]["code"] == "not_found"
    no_method = server.call("tools/teleport")
    assert no_method["error"]["code"] == types.METHOD_NOT_FOUND and no_method["error"]["data"]["code"] == "not_found"


# --- The reader, without a server -----------------------------------------------------------------
def test_a_line_over_the_limit_is_cut_and_the_rest_dropped_without_holding_it():
    limit = 1000
    stream = io.BytesIO(b"x" * 5000 + b"\n" + b'{"next": 1}\r\n' + b"last")
    assert read_frame(stream, limit) == (b"x" * limit, True)
    assert read_frame(stream, limit) == (b'{"next": 1}', False)
    assert read_frame(stream, limit) == (b"last", False)
    assert read_frame(stream, limit) is None


@pytest.mark.parametrize(
    ("text", "request_id"),
    [
        ('{"jsonrpc": "2.0", "id": 7, "params": ' + "[" * 100_000, 7),
        ('{"params": {"id": 1, "x": "\\"id\\": 2"}, "id" : "abc"}', "abc"),
        ('{"params": [' + '"a",' * 200_000 + '"b"], "id": -3}', -3),
        ('{"id": "\\u0000"}', None),
        ('{"id": 99999999999999999999}', None),
        ('{"id": 1.5}', None),
        ('{"id": true}', None),
        ('[{"id": 1}]', None),
        ("not json", None),
    ],
    ids=[
        "before a deep tail",
        "nested ids ignored",
        "after 200k strings",
        "NUL",
        "beyond 64 bits",
        "float",
        "bool",
        "in an array",
        "no JSON",
    ],
)
def test_the_id_of_an_unreadable_frame_is_found_without_recursion(text, request_id):
    started = time.process_time()
    assert request_id_of(text) == request_id
    assert time.process_time() - started < REFUSAL_SECONDS


def test_the_frame_reader_refuses_with_the_apis_code_for_the_same_bytes():
    """Every body of the corpus the API's parser refuses gets the same code as tool arguments."""
    checked = 0
    for label, body in {**RAW_BODIES, **KEY_BODIES}.items():
        if len(body) > settings.ENGRAM_MAX_BODY_BYTES:
            continue  # refused before any parser (tested with the server above)
        try:
            SafeJSONParser().parse(io.BytesIO(body), "application/json", {})
        except EngramError as exc:
            api_code = exc.code
        else:
            continue
        with pytest.raises(Refused) as refused:
            parse_frame(_tool_call(1, "search_memory", body))
        assert refused.value.body["code"] == api_code, label
        assert refused.value.request_id == 1, label
        json.dumps(refused.value.body, ensure_ascii=False).encode("utf-8")  # writable as it is
        checked += 1
    assert checked >= 30


@pytest.mark.django_db
def test_a_nul_in_an_id_is_refused_in_process_before_any_query(world, django_assert_num_queries):
    tools = EngramTools(world.coder.plain_key)
    with django_assert_num_queries(0):
        answer = tools.call(ops.delete_item, 1, "k\x00", {})
        surrogate_key = tools.call(ops.save_knowledge, 1, {"\ud800": "x", "id": "k", "content": "c"})
    assert answer.is_error and answer.structured_content["code"] == "invalid_characters"
    assert surrogate_key.structured_content["code"] == "invalid_characters"
