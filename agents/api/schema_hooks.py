"""drf-spectacular post-processing: every API operation documents the error answers it can give.

Errors are one shape everywhere (agents.api.errors), so they are added here once instead of on
each view; clients and schemathesis then know every status code the API may return."""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "stable snake_case error code"},
        "detail": {"type": "string", "description": "a human sentence"},
        "fields": {"type": "object", "additionalProperties": True, "description": "field → messages (400)"},
    },
    "required": ["code", "detail", "fields"],
}
ERRORS = {
    "400": "Bad input: field errors in `fields` (`invalid_input`), an argument the operation does not take "
    "(`unknown_argument`, each named in `fields`, nested ones as `scope.x`), or a body refused whole "
    "(`malformed_json`, `json_too_deep`, `duplicate_key`, `invalid_characters`, `integer_out_of_range`, "
    "`number_out_of_range`; `fields` names where when known); nothing was written.",
    "401": "No key, an unknown key or a revoked key.",
    "403": "The agent's role lacks the grant (`insufficient_memory_permission`), or the agent claimed a veracity "
    "it may not state (`veracity_not_allowed`: human_stated needs a person or a relay agent); nothing was written.",
    "404": "Not found, or not visible to this agent (another workspace, a `none` domain).",
    "409": "The object is not in a state that allows this (already superseded, already resolved…).",
    "411": "A chunked body on a server that cannot read one (`length_required`): send Content-Length.",
    "413": "The body is larger than the server accepts.",
    "429": "Throttled: retry after the number of seconds in Retry-After.",
    "503": "The database is unavailable; retry shortly.",
}


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: Any) -> dict[str, Any]:
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorResponse"] = ERROR_SCHEMA
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/v1/") or path.startswith(("/api/v1/schema", "/api/v1/docs")):
            continue
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for status, description in ERRORS.items():
                operation["responses"].setdefault(
                    status,
                    {
                        "description": description,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
                    },
                )
    return result
