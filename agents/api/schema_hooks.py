"""drf-spectacular post-processing: every API operation documents exactly the errors it can answer.

Errors are one shape everywhere (agents.api.errors). Each operation's codes, by status, come from
its declaration (agents.operations.catalog, `Operation.all_errors`): the schema lists a status
only when the operation can answer it, with its codes as an enum of the body's `code`."""

from __future__ import annotations

from typing import Any

from agents.operations.catalog import OPERATIONS
from agents.operations.declaration import error_responses

ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "stable snake_case error code"},
        "detail": {"type": "string", "description": "a human sentence"},
        "fields": {"type": "object", "additionalProperties": True, "description": "field → messages (400)"},
    },
    "required": ["code", "detail", "fields"],
}


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: Any) -> dict[str, Any]:
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorResponse"] = ERROR_SCHEMA
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or operation.get("operationId") not in OPERATIONS:
                continue
            responses = operation.setdefault("responses", {})
            for status in [s for s in responses if s.startswith(("4", "5"))]:
                del responses[status]  # drf-spectacular's guesses; the declaration says which
            responses.update(error_responses(OPERATIONS[operation["operationId"]]))
    return result
