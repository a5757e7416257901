"""One declaration per agent operation (issue 36): what it takes, answers and refuses, said once.

An `Operation` names the use case (its MCP tool name is its schema operation id), the function of
agents.operations that runs it, its HTTP method and route, its input serializer — the one
declaration of its arguments — its path arguments, its answers and the error codes it can answer.
From it are generated:

- the MCP tool (agents.mcp_tools): a function whose signature is read off the input serializer
  (`tool_signature`), so the tool's JSON schema and the API's serializer cannot drift;
- the served OpenAPI operation (`schema_of`, used by every view's `extend_schema`): request or
  query parameters, typed answers, and exactly the errors the operation can answer, each status
  with its codes as an enum;
- the check that every answer seen in the tests is declared (tests/agents/test_declared_errors.py).

The input serializer still validates; the MCP schema only describes (types, enumerations, limits
shown as schema constraints, never enforced twice): a value out of range is refused by the same
serializer, with the same `invalid_input` body, on both surfaces.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema
from rest_framework import serializers

# The errors every agent operation can answer before its own code runs, by status: the key
# (agents.auth), the request body or query string refused whole (memory.safe_json,
# agents.api.parsers), the size and length guards (config.middleware), the rate limit
# (agents.api.throttling) and the database's absence (memory.health).
AUTH_ERRORS: Mapping[int, tuple[str, ...]] = {401: ("not_authenticated", "invalid_key", "key_revoked")}
BODY_ERRORS: Mapping[int, tuple[str, ...]] = {
    400: (
        "malformed_json",
        "json_too_deep",
        "duplicate_key",
        "invalid_characters",
        "integer_out_of_range",
        "number_out_of_range",
    ),
    411: ("length_required",),
    413: ("body_too_large",),
    415: ("unsupported_media_type",),
}
# A path whose id is not a number matches no route (agents.api.errors.json_404).
PATH_ERRORS: Mapping[int, tuple[str, ...]] = {404: ("not_found",)}
QUERY_ERRORS: Mapping[int, tuple[str, ...]] = {400: ("invalid_characters",)}
SERVICE_ERRORS: Mapping[int, tuple[str, ...]] = {406: ("not_acceptable",)}
AGENT_ERRORS: Mapping[int, tuple[str, ...]] = {429: ("throttled",), 503: ("database_unavailable",)}
# A person's session: a write without the CSRF token (DRF SessionAuthentication).
PERSON_ERRORS: Mapping[int, tuple[str, ...]] = {403: ("forbidden",)}
# Every operation refuses the arguments it does not take; one with inputs, their bad values.
UNKNOWN_ERRORS: Mapping[int, tuple[str, ...]] = {400: ("unknown_argument",)}
INPUT_ERRORS: Mapping[int, tuple[str, ...]] = {400: ("invalid_input",)}

STATUS_TEXT = {
    400: "Bad input; nothing was written. `fields` names each field refused (nested ones as `scope.x`).",
    401: "No key, an unknown key or a revoked key.",
    403: "Not allowed: the code says why; nothing was written.",
    406: "The Accept header asks for something other than JSON.",
    404: "Not found, or not visible to the caller (another workspace, a `none` domain).",
    409: "The object is not in a state that allows this; nothing was written.",
    411: "A chunked body on a server that cannot read one: send Content-Length.",
    413: "The body is larger than the server accepts.",
    415: "The body is not JSON (Content-Type).",
    429: "Throttled: retry after the number of seconds in Retry-After.",
    503: "The database is unavailable; retry shortly.",
}

ToolKind = Literal["read", "write", "replace"]


@dataclass(frozen=True)
class Operation:
    """One agent operation, declared once (see the module docstring).

    `path` lists the arguments taken from the URL, in order, as (name, type): the MCP tool takes
    them by these names and the operation function positionally after the agent. `paged` lists
    take `limit`/`offset` (agents.operations.pages); `links` operations take the site's address for
    the absolute links they answer (review_url). `errors` are the operation's own codes by status,
    beside those every operation shares (`all_errors`)."""

    name: str
    method: Literal["GET", "POST", "PUT", "DELETE"]
    route: str
    description: str
    answers: Mapping[int, Any]
    inputs: type[serializers.Serializer] | None = None
    path: tuple[tuple[str, type], ...] = ()
    errors: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    run: str = ""  # the function of agents.operations that runs it (its API view calls it too)
    kind: ToolKind = "read"
    paged: bool = False
    links: bool = False
    tool: bool = True  # an agent tool (False: people's endpoints, API only)
    agent: bool = True  # authenticated by an agent key (throttled per agent)

    def function(self) -> Callable[..., Any]:
        """The function of agents.operations that runs this operation, looked up when called."""
        from agents import operations

        return getattr(operations, self.run)

    @property
    def takes_body(self) -> bool:
        return self.method in ("POST", "PUT")

    def all_errors(self) -> dict[int, tuple[str, ...]]:
        """Every error code this operation can answer, by status: its own and the shared ones."""
        parts: list[Mapping[int, tuple[str, ...]]] = [AUTH_ERRORS, SERVICE_ERRORS, UNKNOWN_ERRORS]
        if self.inputs is not None:
            parts.append(INPUT_ERRORS)
        if self.path:
            parts.append(PATH_ERRORS)
        parts += [BODY_ERRORS if self.takes_body else QUERY_ERRORS, self.errors]
        parts.append(AGENT_ERRORS if self.agent else PERSON_ERRORS)
        merged: dict[int, list[str]] = {}
        for part in parts:
            for status, codes in part.items():
                merged.setdefault(status, [])
                merged[status] += [code for code in codes if code not in merged[status]]
        return {status: tuple(merged[status]) for status in sorted(merged)}

    def argument_names(self) -> list[str]:
        """The names the MCP tool takes: path arguments, the serializer's fields, then paging."""
        names = [name for name, _ in self.path]
        if self.inputs is not None:
            names += list(self.inputs().fields)
        if self.paged:
            names += ["limit", "offset"]
        return names


# --- the MCP tool ------------------------------------------------------------------------------
def field_schema(field_: serializers.Field, *, items_open: bool = False) -> dict[str, Any]:
    """The JSON schema of a serializer field, as the MCP client sees the argument: its type,
    enumeration, limits, nullability, default and help text. Nested objects refuse names they do
    not declare (`additionalProperties: false`), except a list whose items are answered one by one
    (`items_open`: an item's unknown name refuses that item, as over HTTP)."""
    schema: dict[str, Any]
    if isinstance(field_, serializers.ListSerializer):
        assert field_.child is not None  # `many=True` always sets it
        schema = {"type": "array", "items": field_schema(field_.child, items_open=items_open)}
    elif isinstance(field_, serializers.Serializer):
        fields = field_.fields
        schema = {
            "type": "object",
            "properties": {name: field_schema(f) for name, f in fields.items()},
            "required": [name for name, f in fields.items() if f.required],
        }
        schema["additionalProperties"] = items_open
    elif isinstance(field_, serializers.ChoiceField):
        schema = {"type": "string", "enum": list(field_.choices)}
    elif isinstance(field_, serializers.BooleanField):
        schema = {"type": "boolean"}
    elif isinstance(field_, serializers.IntegerField):
        schema = {"type": "integer"}
    elif isinstance(field_, serializers.FloatField):
        schema = {"type": "number"}
    elif isinstance(field_, serializers.ListField):
        schema = {"type": "array", "items": field_schema(field_.child)}
    elif isinstance(field_, serializers.DictField):
        schema = {"type": "object", "additionalProperties": field_schema(field_.child)}
    elif isinstance(field_, serializers.JSONField):
        schema = {}
    elif isinstance(field_, serializers.DateTimeField):
        schema = {"type": "string", "format": "date-time"}
    elif isinstance(field_, serializers.DateField):
        schema = {"type": "string", "format": "date"}
    else:
        schema = {"type": "string"}
    array = schema.get("type") == "array"
    for attr, key in (("min_value", "minimum"), ("max_value", "maximum")):
        if getattr(field_, attr, None) is not None:
            schema[key] = getattr(field_, attr)
    for attr, key in (
        ("min_length", "minItems" if array else "minLength"),
        ("max_length", "maxItems" if array else "maxLength"),
    ):
        if getattr(field_, attr, None) is not None:
            schema[key] = getattr(field_, attr)
    default = plain_default(field_)
    if default is not None:
        schema["default"] = default
    if getattr(field_, "allow_null", False):
        schema = {"anyOf": [schema, {"type": "null"}]}
    if field_.help_text:
        schema["description"] = str(field_.help_text)
    return schema


def plain_default(field_: serializers.Field) -> Any:
    """The serializer's default when it is a plain value (shown in the schema), else None."""
    default = field_.default
    if default is serializers.empty or callable(default) or default is None:
        return None
    return default


def argument_type(schema: dict[str, Any]) -> Any:
    """A tool parameter's annotation: any JSON value, shown to the client with `schema`. The MCP
    SDK then hands the value on as sent, and the input serializer alone validates it — the same
    check, and the same error body, as over HTTP."""

    def keep_default(generated: dict[str, Any]) -> None:
        # The parameter's own default is None (only what the caller set is passed on); the schema
        # keeps the default the API applies, which pydantic would overwrite with that None.
        generated.pop("default", None)
        if "default" in schema:
            generated["default"] = schema["default"]

    return Annotated[Any, WithJsonSchema(schema), Field(json_schema_extra=keep_default)]


def tool_signature(operation: Operation) -> inspect.Signature:
    """The MCP tool's signature: the path arguments, then the input serializer's fields (required
    ones first, as Python requires), then `limit`/`offset` for a list."""
    required: list[inspect.Parameter] = []
    optional: list[inspect.Parameter] = []
    kw = inspect.Parameter.POSITIONAL_OR_KEYWORD
    for name, kind in operation.path:
        required.append(inspect.Parameter(name, kw, annotation=kind))
    if operation.inputs is not None:
        serializer = operation.inputs()
        items_open = set(getattr(serializer, "answered_per_item", ()))
        for name, field_ in serializer.fields.items():
            schema = field_schema(field_, items_open=name in items_open)
            if field_.required:
                required.append(inspect.Parameter(name, kw, annotation=argument_type(schema)))
                continue
            if plain_default(field_) is None and "anyOf" not in schema:  # left out or null: the API's default
                schema = {"anyOf": [schema, {"type": "null"}], "default": None}
            # Never passed unless the caller set it (the schema shows the default the API applies),
            # so the operation reads what the caller sent, as over HTTP: links and echoes alike.
            optional.append(inspect.Parameter(name, kw, annotation=argument_type(schema), default=None))
    if operation.paged:
        for name, schema in PAGE_SCHEMAS.items():
            optional.append(inspect.Parameter(name, kw, annotation=argument_type(schema), default=None))
    return inspect.Signature(required + optional)


def json_schema_of(annotation: Any) -> dict[str, Any]:
    """The schema an `argument_type` annotation shows."""
    for meta in getattr(annotation, "__metadata__", ()):
        if isinstance(meta, WithJsonSchema) and meta.json_schema is not None:
            return meta.json_schema
    raise ValueError("not an argument_type annotation")


PAGE_SCHEMAS = {
    "limit": {
        "type": "integer",
        "minimum": 1,
        "description": "page size (default 50, at most ENGRAM_API_MAX_PAGE_SIZE)",
    },
    "offset": {"type": "integer", "minimum": 0, "description": "rows to skip (default 0)"},
}


def call_arguments(operation: Operation, given: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """How a tool call's arguments reach the operation function: (path arguments in order, the
    raw input, the keyword arguments for paging). Arguments left at None are not passed, so the
    serializer's own default applies, as over HTTP."""
    raw = {name: value for name, value in given.items() if value is not None}
    path = [raw.pop(name) for name, _ in operation.path]
    paging: dict[str, Any] = {}
    if operation.paged:
        paging = {"limit": raw.pop("limit", None), "offset": raw.pop("offset", None)}
    return path, raw, paging


# --- the served schema -------------------------------------------------------------------------
def error_responses(operation: Operation) -> dict[str, Any]:
    """The OpenAPI responses for the operation's errors: per status, the codes it can answer, as
    an enum of the error body's `code`."""
    responses: dict[str, Any] = {}
    for status, codes in operation.all_errors().items():
        schema = {
            "allOf": [
                {"$ref": "#/components/schemas/ErrorResponse"},
                {"type": "object", "properties": {"code": {"type": "string", "enum": list(codes)}}},
            ]
        }
        responses[str(status)] = {
            "description": f"{STATUS_TEXT.get(status, '')} Codes: {', '.join(f'`{c}`' for c in codes)}.",
            "content": {"application/json": {"schema": schema}},
        }
    return responses
