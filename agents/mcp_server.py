"""The agent tools over the Model Context Protocol (`python manage.py mcp`, stdio).

Each tool is named as in SPEC.md (declared per area in agents.mcp_tools, as the API's views are)
and calls `agents.operations` — the same serializers, selectors and services as the HTTP API —
so a tool answers exactly what the matching endpoint answers: the same JSON (as
`structuredContent`, and as text for clients that read only text), and on refusal the API's
error body `{"code", "detail", "fields"}` with `isError` set.

Every frame gets an answer. One the API would refuse as a body (too large, not UTF-8, not JSON,
too deep, NUL or an unpaired surrogate in a key or value, duplicate keys, numbers out of range)
is refused before the SDK sees it, as a JSON-RPC error whose `data` is that same error body
(`EngramMCPServer.run_stdio_async`); arguments of the wrong shape, arguments a tool does not
take and unknown tools answer `invalid_input`, `unknown_argument` and `not_found` as tool errors.

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
from typing import IO, Any

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
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from agents import operations as ops
from agents.api.renderers import printable
from agents.mcp_tools import prompts
from agents.mcp_tools import tools as generated_tools
from agents.operations.errors import error_body
from agents.operations.inputs import unknown_argument
from memory import safe_json
from memory.models import Agent, hash_key
from memory.recalls import served_over

logger = logging.getLogger("engram.mcp")

INSTRUCTIONS = """Engram is this workspace's governed long-term memory.
Start a task with get_preamble; verify what matters with search_memory before relying on it.
Propose durable knowledge with propose_fact, or many facts at once with propose_facts
(re-mentions and conflicts are detected for you).
Keep private notes with update_my_notes and record_observation (read them with get_my_notes).
When a turn produced files worth keeping, render the `remember` prompt for the remember
sub-agent, hand its output to a person with submit_remember_review, wait for the decision with
get_remember_review (wait up to 30 s per call), fold the resolution into your answer, then
consume_remember_review. A session has one live review until it is consumed: submitting again
answers that one, and list_remember_reviews (by session) finds it after a restart. Lessons from
failures go through the promotion gate: submit_candidate, record_replay, promote_candidate (a dry
run unless write is true). For a long task, open a run with create_memory_run and keep its
memory bank with the memory_* tools; finish_memory_run can offer bank items as promotion
candidates for a person to review — never as facts.
Every tool answers what the matching /api/v1/ endpoint answers."""


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


def _undeclared(schema: Mapping[str, Any], value: Any, defs: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The names in `value` that the JSON schema `schema` (a tool's input schema, `$defs` in
    `defs`) does not declare, nested objects and list items included (`scope.x`), as
    agents.operations.inputs.undeclared names them for a serializer. An object open to any name
    (`dict[str, Any]`) is left to the operation, which checks it against its serializer."""
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        schema = defs.get(ref.removeprefix("#/$defs/"), {})
    branches = [defs.get(b.get("$ref", "").removeprefix("#/$defs/"), b) for b in schema.get("anyOf", [])]
    if isinstance(value, Mapping):
        schema = next((b for b in branches if "properties" in b), schema)
        declared = schema.get("properties")
        if declared is None or schema.get("additionalProperties") not in (None, False):
            return []
        names = [f"{prefix}{key}" for key in value if key not in declared]
        for key, item in value.items():
            if key in declared:
                names += _undeclared(declared[key], item, defs, f"{prefix}{key}.")
        return names
    if isinstance(value, list):
        schema = next((b for b in branches if "items" in b), schema)
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [name for i, item in enumerate(value) for name in _undeclared(items, item, defs, f"{prefix}{i}.")]
    return []


class EngramMCPServer(MCPServer):
    """The SDK's server, with the guarded stdio transport above, arguments a tool does not take
    refused as the API refuses them (`unknown_argument`: the SDK would drop them unread), and
    arguments the SDK's schema refuses answered as the API answers invalid fields."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            return _result(404, error_body("not_found", f"No tool named {printable(name, limit=80)!r}."))
        refused = _bad_characters(arguments)  # before a refused name is echoed
        if refused is not None:
            return _result(400, refused)
        if names := _undeclared(tool.parameters, arguments or {}, tool.parameters.get("$defs", {})):
            answer = ops.error_result(unknown_argument(names))
            assert answer is not None  # an EngramError always has an answer
            return _result(answer.status, answer.body)
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
    generated_tools.register(server, tools)
    prompts.register(server)
    return server
