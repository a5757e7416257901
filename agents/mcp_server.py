"""The agent tools over the Model Context Protocol (`python manage.py mcp`, stdio).

Each tool is named as in SPEC.md and calls `agents.operations` — the same serializers,
selectors and services as the HTTP API — so a tool answers exactly what the matching endpoint
answers: the same JSON (as `structuredContent`, and as text for clients that read only text),
and on refusal the API's error body `{"code", "detail", "fields"}` with `isError` set.

Every frame gets an answer. One the API would refuse as a body (too large, not UTF-8, not JSON,
too deep, NUL or an unpaired surrogate in a key or value, duplicate keys, numbers out of range)
is refused before the SDK sees it, as a JSON-RPC error whose `data` is that same error body
(`EngramMCPServer.run_stdio_async`); arguments of the wrong shape and unknown tools answer
`invalid_input` and `not_found` as tool errors.

The server acts as one agent: the one whose key is in ENGRAM_AGENT_KEY. The key is checked at
start (the command refuses to start without a valid one) and again on every call, so revoking
it in the admin stops a running server at its next call.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable, Mapping
from io import TextIOWrapper
from typing import IO, Annotated, Any, Literal

import anyio
import anyio.to_thread
from django.conf import settings
from django.db import close_old_connections
from mcp import types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _open_stdout_diversion
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError
from typing_extensions import TypedDict

from agents import operations as ops
from agents import prompts
from agents.api.renderers import printable
from agents.operations.errors import error_body
from memory import safe_json
from memory.models import Agent, hash_key
from memory.recalls import served_over

logger = logging.getLogger("engram.mcp")

# The enumerations of the tools' signatures, spelled out for the JSON schema the MCP client
# sees; tests/agents/test_operations_parity.py holds each equal to the model choices it mirrors.
SearchMode = Literal["keyword", "semantic", "hybrid"]
MemoryType = Literal["commitment", "event", "observation", "decision", "convention", "procedure", "profile"]
# What an agent may state (issue 13). human_stated is offered only to an agent a workspace admin
# marked as relaying people's words; the service refuses it from any other (veracity_not_allowed).
AgentVeracity = Literal["agent_inferred", "tool_generated", "imported"]
RelayVeracity = Literal["agent_inferred", "tool_generated", "imported", "human_stated"]
ConflictStatus = Literal["open", "decided", "dismissed", "closed"]
BankItemKind = Literal["knowledge", "procedural"]
FailureClass = Literal[
    "agent_failure", "verification_failure", "environment_blocker", "flaky_blocker", "harness_blocker"
]
FactStatus = Literal["active", "challenged", "deprecated", "archived"]
PromotionStatus = Literal["candidate", "held", "blocked", "harness_fix", "active", "denied"]


class CandidateScope(TypedDict, total=False):
    """Where a candidate's rule applies and where it does not (without both it is held)."""

    applies_to: list[str]
    does_not_apply_to: list[str]


INSTRUCTIONS = """Engram is this workspace's governed long-term memory.
Start a task with get_preamble; verify what matters with search_memory before relying on it.
Propose durable knowledge with propose_fact, or many facts at once with propose_facts
(re-mentions and conflicts are detected for you).
Keep private notes with update_my_notes and record_observation (read them with get_my_notes).
When a turn produced files worth keeping, render the `remember` prompt for the remember
sub-agent, hand its output to a person with submit_remember_review, wait for the decision with
get_remember_review (wait up to 30 s per call), fold the resolution into your answer, then
consume_remember_review. Lessons from failures go through the promotion gate: submit_candidate,
record_replay, promote_candidate (a dry run unless write is true). For a long task, open a run
with create_memory_run and keep its memory bank with the memory_* tools; finish_memory_run can
offer bank items as promotion candidates for a person to review — never as facts.
Every tool answers what the matching /api/v1/ endpoint answers."""

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
REPLACE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


class AgentKeyError(Exception):
    """ENGRAM_AGENT_KEY is missing, unknown or revoked."""


def agent_for_key(key: str) -> Agent:
    """The active agent holding `key`. Raises AgentKeyError with a sentence a person can act on."""
    key = (key or "").strip()
    if not key:
        raise AgentKeyError(
            "Set ENGRAM_AGENT_KEY to an agent key (create one with "
            "`python manage.py create_agent --workspace SLUG --name NAME --role ROLE`)."
        )
    agent = Agent.objects.select_related("workspace", "role").filter(key_hash=hash_key(key)).first()
    if agent is None:
        raise AgentKeyError("ENGRAM_AGENT_KEY is not a valid agent key.")
    if agent.revoked_at is not None:
        raise AgentKeyError(f"The key in ENGRAM_AGENT_KEY (agent {agent.name!r}) was revoked; ask for a new one.")
    return agent


def _json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, default=str)


def _result(status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> CallToolResult:
    """The tool answer: the API's body, and its headers (Retry-After) in `_meta.headers`."""
    return CallToolResult(
        _meta={"headers": dict(headers)} if headers else None,
        content=[TextContent(type="text", text=_json(body))],
        structured_content=body,
        is_error=status >= 400,
    )


def _given(**arguments: Any) -> dict[str, Any]:
    """The arguments the caller set: left at None, the API's own default applies (as over HTTP)."""
    return {k: v for k, v in arguments.items() if v is not None}


class EngramTools:
    """The tools of one agent. `call` wraps every operation: a fresh agent row (revocation is
    seen at once), Django's connection housekeeping, and the API's error mapping."""

    def __init__(self, key: str, *, site_url: str = "") -> None:
        self.key = key
        self.site_url = site_url.rstrip("/")
        agent = agent_for_key(key)
        self.agent_id = agent.pk
        self.relays_human_words = agent.relays_human_words

    def call(self, operation: Callable[..., ops.Result], *args: Any, **kwargs: Any) -> CallToolResult:
        # Before any query: PostgreSQL cannot store NUL, and a lone surrogate cannot be encoded.
        # The stdio reader refuses both already; this holds for any other way in (another
        # transport, an in-process caller).
        refused = _bad_characters(args, kwargs)
        if refused is not None:
            return _result(400, refused)
        close_old_connections()
        try:
            try:
                agent = agent_for_key(self.key)
            except AgentKeyError as exc:
                return _result(401, {"code": "invalid_key", "detail": str(exc), "fields": {}})
            try:
                with served_over("mcp"):  # the exposure trail tells MCP from HTTP (mcp_preamble, mcp_search)
                    result = operation(agent, *args, **kwargs)
            except Exception as exc:
                answer = ops.error_result(exc)
                if answer is None:
                    logger.exception("MCP tool failed")
                    return _result(500, {"code": "server_error", "detail": "Something went wrong; it was logged."})
                return _result(answer.status, answer.body)
            return _result(result.status, result.body, result.headers)
        finally:
            close_old_connections()


def _bad_characters(*values: Any) -> dict[str, Any] | None:
    """The API's invalid_characters body when a string or key anywhere in `values` holds NUL or
    an unpaired surrogate (as memory.safe_json refuses them in a body), else None. Iterative."""
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if safe_json.has_bad_characters(value):
                return error_body("invalid_characters", "Text may not contain NUL or unpaired surrogates.")
        elif isinstance(value, Mapping):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return None


# --- The wire: line-delimited JSON-RPC on stdio, read so that every frame gets an answer --------
# Each line is one message. It is read up to ENGRAM_MAX_BODY_BYTES (the API's body limit; the
# rest of a longer line is dropped unread), decoded as strict UTF-8 and parsed by memory.safe_json,
# the API's own parser — nesting measured without recursion, NUL and unpaired surrogates refused in
# keys and values — before the SDK sees it. A refused frame is answered with a JSON-RPC error whose
# `data` is the API's error body with the API's code; its id is the request's when one can be read.

# Strings (as the depth scan of memory.safe_json reads them), brackets, and runs of anything else:
# the tokens the id scan needs. Possessive quantifiers: linear whatever the input.
_TOKENS = re.compile(safe_json._STRING.pattern + r'|[{}\[\]]|[^"{}\[\]]++', re.DOTALL)
_ID_VALUE = re.compile(r'\s*:\s*(-?[0-9]{1,19}(?![0-9.eE])|"(?:[^"\\]|\\.){0,1000}")\s*[,}]', re.DOTALL)
_LINE_CHUNK = 1 << 16
# A tool's arguments sit two levels below the message ({"params": {"arguments": {...}}}): they may
# nest as deeply as an API body.
_ENVELOPE_DEPTH = 2
# Errors the SDK answers itself get the API's code for the same fault.
_CODE_OF_RPC_ERROR = {
    types.PARSE_ERROR: "malformed_json",
    types.INVALID_REQUEST: "invalid_input",
    types.METHOD_NOT_FOUND: "not_found",
    types.INVALID_PARAMS: "invalid_input",
}


class Refused(Exception):
    """A frame the server will not hand to the SDK, with the answer it gets instead."""

    def __init__(
        self,
        code: str,
        detail: str,
        *,
        rpc_code: int,
        request_id: types.RequestId | None,
        fields: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.body = error_body(code, printable(detail, limit=500), fields)
        self.rpc_code = rpc_code
        self.request_id = request_id

    def message(self) -> types.JSONRPCError:
        error = types.ErrorData(code=self.rpc_code, message=self.body["detail"], data=self.body)
        return types.JSONRPCError(jsonrpc="2.0", id=self.request_id, error=error)


def _usable_id(value: Any) -> types.RequestId | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and safe_json.INT_MIN <= value <= safe_json.INT_MAX:
        return value
    if isinstance(value, str) and not safe_json.has_bad_characters(value):
        return value
    return None


def request_id_of(text: str) -> types.RequestId | None:
    """The top-level "id" of a frame that could not be read whole (too deep, cut short, not JSON):
    one pass over its tokens, no recursion, stopping at the id."""
    depth = 0
    for token in _TOKENS.finditer(text):
        first = text[token.start()]
        if first in "{[":
            depth += 1
        elif first in "}]":
            depth -= 1
            if depth <= 0:
                return None
        elif depth == 1 and token.group() == '"id"':
            value = _ID_VALUE.match(text, token.end())
            if value is None:
                return None
            try:
                return _usable_id(json.loads(value.group(1)))
            except ValueError:
                return None
    return None


def read_frame(stream: IO[bytes], limit: int) -> tuple[bytes, bool] | None:
    """The next line of `stream` without its line end, and whether it was longer than `limit`
    bytes (then only its first `limit` bytes are kept and the rest is read and dropped, so memory
    stays bounded); None at the end of the stream."""
    line = stream.readline(limit + 1)
    if not line:
        return None
    if line.endswith(b"\n"):
        return line[:-1].removesuffix(b"\r"), False
    if len(line) <= limit:
        return line, False  # the last line, without a line end
    while True:
        rest = stream.readline(_LINE_CHUNK)
        if not rest or rest.endswith(b"\n"):
            return line[:limit], True


def next_message(stream: IO[bytes]) -> types.JSONRPCMessage | Refused | None:
    """The next message on `stream`, or why its frame was refused; None at the end. Blocking:
    the transport calls it in a worker thread, so a long frame never holds the event loop."""
    read = read_frame(stream, settings.ENGRAM_MAX_BODY_BYTES)
    if read is None:
        return None
    try:
        return parse_frame(*read)
    except Refused as refused:
        return refused


def parse_frame(frame: bytes, cut: bool = False) -> types.JSONRPCMessage:
    """The JSON-RPC message in `frame`, read by the API's rules. Raises Refused with the API's
    code: body_too_large, invalid_characters (not UTF-8, NUL, unpaired surrogates), malformed_json,
    json_too_deep, duplicate_key, integer_out_of_range, number_out_of_range, or invalid_input for
    JSON that is no JSON-RPC message."""
    limit = settings.ENGRAM_MAX_BODY_BYTES
    if cut:
        detail = f"The message is over the limit of {limit} bytes."
        text = frame.decode("utf-8", "replace")
        raise Refused("body_too_large", detail, rpc_code=types.PARSE_ERROR, request_id=request_id_of(text))
    try:
        text = frame.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(
            "invalid_characters",
            "The message is not valid utf-8 text.",
            rpc_code=types.PARSE_ERROR,
            request_id=request_id_of(frame.decode("utf-8", "replace")),
        ) from None
    try:
        value = safe_json.loads(text, max_depth=safe_json.MAX_DEPTH + _ENVELOPE_DEPTH)
    except safe_json.UnsafeJSON as exc:
        where = printable(exc.path)
        fields = {where: [printable(exc.detail, limit=500)]} if where else {}
        if exc.code in {"malformed_json", "json_too_deep"}:
            rpc_code = types.PARSE_ERROR  # not read at all
        else:  # read, and a value in it refused: in the params unless it was found elsewhere
            rpc_code = types.INVALID_REQUEST if where and not where.startswith("params") else types.INVALID_PARAMS
        raise Refused(exc.code, exc.detail, rpc_code=rpc_code, request_id=request_id_of(text), fields=fields) from None
    request_id = _usable_id(value.get("id")) if isinstance(value, dict) else None
    try:
        return types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as exc:
        raise Refused(
            "invalid_input",
            'Not a JSON-RPC 2.0 message: an object with jsonrpc "2.0" and a method, or a result or error.',
            rpc_code=types.INVALID_REQUEST,
            request_id=request_id,
            fields=_fields_of(exc),
        ) from None


def _fields_of(exc: ValidationError) -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    for error in exc.errors(include_input=False, include_url=False)[:20]:
        where = printable(".".join(str(part) for part in error["loc"])) or "non_field_errors"
        fields.setdefault(where, []).append(printable(error["msg"]))
    return fields


class EngramMCPServer(MCPServer):
    """The SDK's server, with the guarded stdio transport above and tool arguments the SDK's
    schema refuses answered as the API answers invalid fields."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> Any:
        if self._tool_manager.get_tool(name) is None:
            return _result(404, error_body("not_found", f"No tool named {printable(name, limit=80)!r}."))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                detail = "The request has invalid fields; see `fields`."
                return _result(400, error_body("invalid_input", detail, _fields_of(exc.__cause__)))
            raise

    async def run_stdio_async(self) -> None:
        stdin, restore_stdin = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
        stdout, restore_stdout = _claim_fd(1, sys.stdout, "wb", _open_stdout_diversion)
        wire_out = anyio.wrap_file(TextIOWrapper(stdout, encoding="utf-8", write_through=True))
        inbound_writer, inbound = create_context_streams[SessionMessage | Exception](0)
        outbound, outbound_reader = create_context_streams[SessionMessage](0)
        answers = outbound.clone()  # the reader's own refusals share the one writer

        async def reader() -> None:
            async with inbound_writer, answers:
                while True:
                    message = await anyio.to_thread.run_sync(next_message, stdin, abandon_on_cancel=True)
                    if message is None:
                        return  # end of input: the SDK's loop ends, then the writer
                    try:
                        if isinstance(message, Refused):
                            logger.info("MCP frame refused: %s", message.body["code"])
                            await answers.send(SessionMessage(message.message()))
                        else:
                            await inbound_writer.send(SessionMessage(message))
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return  # the SDK's loop is gone

        async def writer() -> None:
            async with outbound_reader:
                async for session_message in outbound_reader:
                    await wire_out.write(_serialised(session_message.message) + "\n")
                    await wire_out.flush()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(reader)
                group.start_soon(writer)
                await self._lowlevel_server.run(
                    inbound, outbound, self._lowlevel_server.create_initialization_options()
                )
        finally:
            for restore in (restore_stdout, restore_stdin):
                if restore is not None:
                    restore()


def _serialised(message: types.JSONRPCMessage) -> str:
    """The line for `message`; a message that cannot be written (text no UTF-8 encoder takes)
    becomes the API's server_error for its request, so no request goes unanswered."""
    if isinstance(message, types.JSONRPCError) and not (
        isinstance(message.error.data, dict) and "code" in message.error.data
    ):
        code = _CODE_OF_RPC_ERROR.get(message.error.code, "server_error")
        data = error_body(code, printable(message.error.message, limit=500))
        error = types.ErrorData(code=message.error.code, message=message.error.message, data=data)
        message = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
    try:
        line = message.model_dump_json(by_alias=True, exclude_unset=True)
        line.encode("utf-8")
        return line
    except Exception:
        logger.exception("MCP answer could not be written")
        request_id = getattr(message, "id", None)
        body = error_body("server_error", "Something went wrong; it was logged.")
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=body["detail"], data=body)
        return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error).model_dump_json(by_alias=True)


def build_server(key: str, *, site_url: str = "") -> MCPServer:
    """An MCPServer exposing the agent tools as the agent holding `key` (AgentKeyError if none)."""
    tools = EngramTools(key, site_url=site_url)
    server: MCPServer = EngramMCPServer(name="engram", instructions=INSTRUCTIONS)

    # --- prompts ---------------------------------------------------------------------------
    @server.prompt(name="remember", title="Remember this turn (remember.v1)")
    def remember_prompt(
        task: Annotated[str, Field(description="the user's request this turn worked on")],
        artifacts: Annotated[
            str, Field(description="the files the turn produced or changed, comma- or newline-separated")
        ],
        turn_summary: Annotated[str, Field(description="what the turn did, in a few lines")] = "",
    ) -> str:
        """The remember sub-agent's prompt (remember.v1, the client's prompts/remember_v1.md): it
        nominates at most 10 of the turn's files for long-term memory, each with a layer, a
        rationale and a note, as one fenced JSON block for submit_remember_review."""
        return prompts.render_remember_prompt(task, turn_summary, artifacts)

    # --- identity --------------------------------------------------------------------------
    @server.tool(annotations=READ)
    def whoami() -> CallToolResult:
        """The agent this server acts as (GET me/): its id, name, role and workspace."""
        return tools.call(ops.me)

    # --- recall ----------------------------------------------------------------------------
    @server.tool(annotations=WRITE)  # it opens a dispatch episode and counts recalls
    def get_preamble(
        task: str, repo: str | None = None, as_of: str | None = None, valid_at: str | None = None
    ) -> CallToolResult:
        """The dispatch preamble: every active policy, your private notes, up to 5 keyword-matched
        facts for the task (tasks of 20+ characters), and a closing line. Call it when a task starts.
        as_of (ISO 8601 with a timezone): the policies and facts Engram held at that moment;
        valid_at: only facts true at that moment."""
        return tools.call(ops.get_preamble, _given(task=task, repo=repo, as_of=as_of, valid_at=valid_at))

    @server.tool(annotations=READ)
    def search_memory(
        query: str,
        mode: SearchMode = "hybrid",
        repo: str | None = None,
        domain: str | None = None,
        limit: int = 10,
        session_key: str | None = None,
        as_of: str | None = None,
        valid_at: str | None = None,
    ) -> CallToolResult:
        """Search long-term memory. hybrid (default) fuses lexical, semantic, recency and graph voices;
        keyword is full-text only; semantic fuses full-text and vectors. `domain` like `architecture`
        or `repo:<slug>/architecture`; `repo` ranks that repo's facts first. limit 1–50. `session_key`:
        only facts written under that session key (exact match). `as_of` (ISO 8601 with a timezone):
        what Engram believed at that moment; `valid_at`: only facts true at that moment."""
        raw = _given(
            query=query,
            mode=mode,
            repo=repo,
            domain=domain,
            limit=limit,
            session_key=session_key,
            as_of=as_of,
            valid_at=valid_at,
        )
        return tools.call(ops.search, raw)

    @server.tool(annotations=READ)
    def list_facts(
        domain: str | None = None,
        repo: str | None = None,
        topic: str | None = None,
        status: FactStatus | None = None,
        current: bool | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> CallToolResult:
        """The facts you may see (GET facts/), filtered by domain (`architecture` or
        `repo:<slug>/architecture`), repo, topic, status; `current` (default true) leaves out
        superseded versions. One page: limit 1–200 (default 50), offset ≥ 0; `next`/`previous` are
        the API's links to the neighbouring pages, null at either end."""
        raw = _given(domain=domain, repo=repo, topic=topic, status=status, current=current)
        return tools.call(ops.list_facts, raw, limit=limit, offset=offset, site_url=tools.site_url)

    @server.tool(annotations=READ)
    def get_fact(fact_id: int, as_of: str | None = None) -> CallToolResult:
        """One fact (GET facts/{id}/) with its supersession chain (`history`), its conflicts and what
        was said each time it was stated again (`mentions`). fact_not_found when you may not see it.
        as_of (ISO 8601 with a timezone): all of it as it was at that moment."""
        return tools.call(ops.get_fact, fact_id, _given(as_of=as_of))

    # --- writes ----------------------------------------------------------------------------
    def propose_fact(
        domain: str,
        topic: str,
        content: str,
        memory_type: MemoryType,
        repo: str | None = None,
        veracity: AgentVeracity = "agent_inferred",
        observed_at: str | None = None,
        valid_until: str | None = None,
        source_observation_ids: list[int] | None = None,
        episode_id: int | None = None,
        session_key: str | None = None,
    ) -> CallToolResult:
        """Propose a fact. Stating a known fact again re-mentions it (your words are kept as a
        mention); a contradiction of a live fact of the domain (the nearest in meaning, whatever
        their topic) is resolved (higher veracity, then the later statement — an update — wins)
        and recorded; when the wording cannot tell, or a contradiction under another topic does
        not announce an update ("now", "switched to"), both facts stay live and a person decides. veracity: agent_inferred (default), tool_generated or imported.
        observed_at: when it was true (default now; never in the future). episode_id: an episode
        you opened (your preamble, search or memory run). session_key: a session key (≤ 200
        characters) to find this session's facts again (search_memory's `session_key`). Answers the
        fact, the outcome (created, re_mentioned, conflict_won, conflict_lost or possible_conflict,
        with conflict_id) and the reason."""
        raw = _given(
            domain=domain,
            repo=repo,
            topic=topic,
            content=content,
            memory_type=memory_type,
            veracity=veracity,
            observed_at=observed_at,
            valid_until=valid_until,
            source_observation_ids=source_observation_ids,
            episode_id=episode_id,
            session_key=session_key,
        )
        return tools.call(ops.propose_fact, raw)

    if tools.relays_human_words:
        # Read when the server starts; the service checks the flag again on every call.
        propose_fact.__annotations__["veracity"] = "RelayVeracity"
        propose_fact.__doc__ = (propose_fact.__doc__ or "") + (
            "\n        You relay people's own words: use human_stated only for what a person said."
        )
    server.tool(annotations=WRITE)(propose_fact)

    @server.tool(annotations=WRITE)
    def propose_facts(items: list[dict[str, Any]]) -> CallToolResult:
        """Propose up to 100 facts at once (ENGRAM_BATCH_MAX_ITEMS), each an object with
        propose_fact's arguments (domain, topic, content, memory_type, and optionally repo,
        veracity, observed_at, valid_until, source_observation_ids, episode_id). They are written in
        order exactly as propose_fact would write them one after another — a later item restating
        an earlier one re-mentions it. Answers one result per item, in order:
        status 201 with the fact and outcome, or the item's error status and `error` (nothing
        written for that item); plus `created` and `failed` counts. An empty or too long list is
        refused whole (batch_empty, batch_too_large)."""
        return tools.call(ops.propose_facts_batch, {"items": items})

    @server.tool(annotations=WRITE)
    def supersede_fact(fact_id: int, content: str, reason: str | None = None) -> CallToolResult:
        """Replace a live fact with a new version (the old one stays in its history)."""
        return tools.call(ops.supersede_fact, fact_id, _given(content=content, reason=reason))

    @server.tool(annotations=WRITE)
    def create_episode(kind: str, title: str | None = None, started_at: str | None = None) -> CallToolResult:
        """Start an episode (dispatch, session, meeting, run, import…); facts proposed with its
        `episode_id` are linked to it. started_at: ISO 8601, default now, never in the future."""
        return tools.call(ops.create_episode, _given(kind=kind, title=title, started_at=started_at))

    @server.tool(annotations=WRITE)
    def propose_policy(
        domain: str,
        rule: str,
        repo: str | None = None,
        required_role: str | None = None,
        derived_from: list[int] | None = None,
    ) -> CallToolResult:
        """Propose a normative rule (it goes into every dispatch). Needs `write` on the domain,
        else the error code is insufficient_memory_permission."""
        raw = _given(domain=domain, repo=repo, rule=rule, required_role=required_role, derived_from=derived_from)
        return tools.call(ops.propose_policy, raw)

    @server.tool(annotations=WRITE)
    def supersede_policy(policy_id: int, rule: str, reason: str | None = None) -> CallToolResult:
        """Replace a live policy with a new version (the old one stays in its history). Needs
        `write` on its domain (else insufficient_memory_permission); policy_not_live if it was
        already replaced, policy_budget_exceeded past the workspace's policy budget."""
        return tools.call(ops.supersede_policy, policy_id, _given(rule=rule, reason=reason))

    @server.tool(annotations=READ)
    def list_policies(active: bool | None = None, limit: int | None = None, offset: int = 0) -> CallToolResult:
        """The policies you may see (GET policies/), newest first; active true: the live active
        ones, false: the others. One page: limit 1–200 (default 50), offset ≥ 0, with the API's
        `next`/`previous` links."""
        raw = _given(active=active)
        return tools.call(ops.list_policies, raw, limit=limit, offset=offset, site_url=tools.site_url)

    @server.tool(annotations=READ)
    def list_memory_conflicts(
        domain: str | None = None,
        repo: str | None = None,
        topic: str | None = None,
        limit: int = 50,
        offset: int = 0,
        status: ConflictStatus | None = None,
    ) -> CallToolResult:
        """Recorded conflicts between facts: the pair (existing, proposed), winner, loser, the rule
        that decided, when. status open: possible conflicts a person has yet to decide (no winner,
        both facts live); dismissed: a person said both are true; closed: left open, but a fact of the
        pair is no longer live (closed_reason says why). One page: limit 1–200
        (ENGRAM_API_MAX_PAGE_SIZE), offset ≥ 0; out of range is refused (invalid_input). `next` and
        `previous` are the API's links to the neighbouring pages, null at either end."""
        raw = _given(domain=domain, repo=repo, topic=topic, status=status)
        return tools.call(ops.list_conflicts, raw, limit=limit, offset=offset, site_url=tools.site_url)

    @server.tool(annotations=READ)
    def get_my_notes() -> CallToolResult:
        """Your private scratchpad and your latest observations; no other agent can read them."""
        return tools.call(ops.get_notes)

    @server.tool(annotations=REPLACE)
    def update_my_notes(notes: str) -> CallToolResult:
        """Replace your whole private scratchpad (kept across runs, injected into your dispatches)."""
        return tools.call(ops.update_notes, {"notes": notes})

    @server.tool(annotations=WRITE)
    def record_observation(text: str) -> CallToolResult:
        """Note something you saw; its id can be cited as a fact's source."""
        return tools.call(ops.record_observation, {"text": text})

    @server.tool(annotations=WRITE)
    def remember(
        session_id: str, content: str, domain: str | None = None, repo: str | None = None, topic: str | None = None
    ) -> CallToolResult:
        """Keep a session-scoped entry in the hot tier until consolidate_memory."""
        raw = _given(session_id=session_id, content=content, domain=domain, repo=repo, topic=topic)
        return tools.call(ops.remember, raw)

    @server.tool(annotations=WRITE)
    def consolidate_memory(session_id: str | None = None) -> CallToolResult:
        """Promote hot-tier entries to facts (normal write rules) and merge near-duplicates."""
        return tools.call(ops.consolidate, _given(session_id=session_id))

    @server.tool(annotations=WRITE)
    def harmonize_memory(domain: str | None = None, repo: str | None = None) -> CallToolResult:
        """Resolve contradicting facts written by different agents (in one domain, or all you may
        see). One job at a time per workspace: while one is queued or running you join it
        (status queued|running, joined true) instead of starting a second; otherwise the summary
        of conflicts found and resolved (status done), or queued when a worker runs it."""
        return tools.call(ops.harmonize, _given(domain=domain, repo=repo))

    @server.tool(annotations=WRITE)
    def record_meeting_decisions(
        title: str, date: str, decisions: list[str], topic: str | None = None
    ) -> CallToolResult:
        """Record what a meeting decided, in people's own words: each item of `decisions` becomes a
        human_stated `decision` fact in the workspace's `decisions` domain (re-mention and conflict
        rules apply), all linked to one `meeting` episode with `title`, started at `date`
        (YYYY-MM-DD, not in the future). At most 50 decisions; all or none are written. Only an
        agent a workspace admin marked as relaying people's words may call it (else
        veracity_not_allowed); it needs write on `decisions` (else insufficient_memory_permission)."""
        raw = _given(title=title, date=date, decisions=decisions, topic=topic)
        return tools.call(ops.record_meeting_decisions, raw)

    @server.tool(annotations=WRITE)
    def submit_remember_review(
        session_id: str, output: str, files: dict[str, str] | None = None, repo: str | None = None
    ) -> CallToolResult:
        """Hand the remember sub-agent's output (a fenced JSON block of recommendations) and the
        nominated files' texts to a person. Answers the pending review and its review_url."""
        raw = _given(session_id=session_id, output=output, files=files, repo=repo)
        return tools.call(ops.submit_review, raw, site_url=tools.site_url)

    @server.tool(annotations=READ)
    def get_remember_review(review_id: int, wait: float = 0) -> CallToolResult:
        """Your review's status (pending, approved, rejected, consumed) and, once a person decided,
        its resolution {approved, selected_paths, edits, stored_ids, note}. wait: seconds (0–30)
        to hold while it is pending — the call returns as soon as it is decided; call again to
        keep waiting. When the server already holds too many waits it answers at once with
        `_meta.headers["Retry-After"]`: the seconds to let pass before asking again."""
        return tools.call(ops.get_review, review_id, {"wait": wait}, site_url=tools.site_url)

    @server.tool(annotations=WRITE)
    def consume_remember_review(review_id: int) -> CallToolResult:
        """Mark a decided review as folded into your final answer (approved|rejected → consumed).
        review_pending while a person has not decided, review_already_consumed the second time."""
        return tools.call(ops.consume_review, review_id, site_url=tools.site_url)

    # --- promotion candidates (SPEC §7) ----------------------------------------------------
    @server.tool(annotations=READ)
    def list_candidates(
        promotion_status: PromotionStatus | None = None,
        failure_class: FailureClass | None = None,
        domain: str | None = None,
        repo: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> CallToolResult:
        """Promotion candidates you may see, newest first, each with its gates, replays and
        decisions. One page: limit 1–200 (default 50), offset ≥ 0, with the API's `next`/`previous`."""
        raw = _given(promotion_status=promotion_status, failure_class=failure_class, domain=domain, repo=repo)
        return tools.call(ops.list_candidates, raw, limit=limit, offset=offset, site_url=tools.site_url)

    @server.tool(annotations=WRITE)
    def submit_candidate(
        domain: str,
        topic: str,
        candidate_id: str,
        failure_class: FailureClass,
        proposed_memory: str,
        repo: str | None = None,
        scope: CandidateScope | None = None,
        failure_type: str | None = None,
        source_action_ids: list[str] | None = None,
        root_cause_summary: str | None = None,
        evidence_refs: list[str] | None = None,
        verification_probe_candidate: str | None = None,
        requires_human_review: bool | None = None,
        origin: str | None = None,
        memory_type: MemoryType | None = None,
        schema: str | None = None,
        schema_version: str | None = None,
        promotion_status: Literal["candidate"] | None = None,
    ) -> CallToolResult:
        """Submit a lesson as an awtl.memory_candidate.v2 document (SPEC §7) for the promotion gate —
        never straight to memory. proposed_memory: the rule that would become a fact in
        domain/topic; scope: {applies_to, does_not_apply_to} (without both it is held). Answers
        the candidate with its gates; the same candidate_id again answers the stored candidate
        unchanged; candidate_id_taken when the id belongs to a candidate you may not see."""
        raw = _given(
            domain=domain,
            repo=repo,
            topic=topic,
            schema=schema,
            schema_version=schema_version,
            candidate_id=candidate_id,
            failure_class=failure_class,
            failure_type=failure_type,
            source_action_ids=source_action_ids,
            root_cause_summary=root_cause_summary,
            proposed_memory=proposed_memory,
            scope=scope,
            evidence_refs=evidence_refs,
            verification_probe_candidate=verification_probe_candidate,
            promotion_status=promotion_status,
            requires_human_review=requires_human_review,
            origin=origin,
            memory_type=memory_type,
        )
        return tools.call(ops.submit_candidate, raw)

    @server.tool(annotations=READ)
    def get_candidate(candidate_pk: int) -> CallToolResult:
        """One candidate — candidate_pk is the numeric `id` submit_candidate answered, not the
        document's candidate_id — with its gates now, its replays, and every decision with
        the scorecard it was made on. candidate_not_found when you may not see it."""
        return tools.call(ops.get_candidate, candidate_pk)

    @server.tool(annotations=WRITE)
    def record_replay(candidate_pk: int, probe: str, passed: bool, details: str | None = None) -> CallToolResult:
        """Record a replay of the candidate's verification probe; its gates are recomputed. On a
        promoted candidate a failed replay challenges its fact and a passing one revalidates it."""
        return tools.call(ops.record_replay, candidate_pk, _given(probe=probe, passed=passed, details=details))

    @server.tool(annotations=WRITE)
    def promote_candidate(candidate_pk: int, write: bool = False, auto: bool = False) -> CallToolResult:
        """Decide a candidate. Without write a dry run: the decision it would make, nothing written.
        With write: the recorded decision and its gate scorecard, and the fact only when every
        gate passed (else `refused`, the candidate stays open). auto: only on a passing replay by
        someone other than the submitter, and no human review required. 409 once decided."""
        return tools.call(ops.promote_candidate, candidate_pk, {"write": write, "auto": auto})

    @server.tool(annotations=WRITE)
    def deny_candidate(candidate_pk: int, reason: str | None = None) -> CallToolResult:
        """Deny a candidate for good, recorded with its gates at that moment; 409 once decided."""
        return tools.call(ops.deny_candidate, candidate_pk, _given(reason=reason))

    # --- memory agent runs (SPEC §9) -------------------------------------------------------
    @server.tool(annotations=WRITE)
    def create_memory_run(task: str) -> CallToolResult:
        """Open a run with an empty memory bank for a long task."""
        return tools.call(ops.create_run, {"task": task})

    @server.tool(annotations=READ)
    def memory_get_bank(run_id: int) -> CallToolResult:
        """The run's memory bank: status, knowledge[], procedural[]."""
        return tools.call(ops.get_bank, run_id)

    @server.tool(annotations=REPLACE)
    def memory_update_status(run_id: int, content: str) -> CallToolResult:
        """Replace the run's progress note (seen only by the memory agent)."""
        return tools.call(ops.update_status, run_id, {"content": content})

    @server.tool(annotations=REPLACE)
    def memory_save_knowledge(run_id: int, id: str, content: str, tags: list[str] | None = None) -> CallToolResult:
        """Save a stable fact of the task (requirement, path, constraint) under `id`; the same id
        replaces it. Tags `applies_to:X` / `not_for:Y` give an offered candidate its scope."""
        return tools.call(ops.save_knowledge, run_id, _given(id=id, content=content, tags=tags))

    @server.tool(annotations=REPLACE)
    def memory_save_procedural(run_id: int, id: str, content: str, outcome: str) -> CallToolResult:
        """Save an attempt and its outcome (a command that failed or worked, a diagnosis) under `id`."""
        return tools.call(ops.save_procedural, run_id, {"id": id, "content": content, "outcome": outcome})

    @server.tool(annotations=REPLACE)
    def memory_delete(run_id: int, id: str, kind: BankItemKind | None = None) -> CallToolResult:
        """Delete the knowledge and/or procedural item with this id (`kind` narrows it)."""
        return tools.call(ops.delete_item, run_id, id, _given(kind=kind))

    @server.tool(annotations=WRITE)
    def memory_log_decision(
        run_id: int,
        step: int,
        reminder: str | None = None,
        rationale: str | None = None,
        window: list[dict[str, Any]] | None = None,
    ) -> CallToolResult:
        """Log the memory agent's decision before `step`: one specific reminder for the action
        agent, or none (selective silence — logged too). `window`: the steps reviewed (≤ 8)."""
        raw = {"step": step, "reminder": reminder, **_given(rationale=rationale, window=window)}
        return tools.call(ops.intervene, run_id, raw)

    @server.tool(annotations=WRITE)
    def finish_memory_run(
        run_id: int,
        offer_candidates: bool = False,
        items: list[str] | None = None,
        domain: str | None = None,
        repo: str | None = None,
        topic: str | None = None,
        failure_class: FailureClass | None = None,
    ) -> CallToolResult:
        """Finish the run. offer_candidates: the knowledge and procedural items (or `items`) become
        promotion candidates that a person must approve — never facts."""
        raw = _given(
            offer_candidates=offer_candidates,
            items=items,
            domain=domain,
            repo=repo,
            topic=topic,
            failure_class=failure_class,
        )
        return tools.call(ops.finish_run, run_id, raw)

    return server
