"""drf-spectacular: document the Bearer agent key."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class AgentKeyScheme(OpenApiAuthenticationExtension):
    target_class = "agents.auth.AgentKeyAuthentication"
    name = "agentKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An agent key from `manage.py create_agent`."}


def declared(name: str) -> dict[str, Any]:
    """`extend_schema`'s arguments for the operation `name`, read off its declaration
    (agents.operations.catalog): operation id (the MCP tool name), description, request body or
    query parameters, and typed answers. Its errors are added by schema_hooks.add_error_responses."""
    from drf_spectacular.utils import OpenApiParameter

    from agents.api.pagination import page_parameters
    from agents.operations.catalog import OPERATIONS

    operation = OPERATIONS[name]
    schema: dict[str, Any] = {
        "operation_id": operation.name,
        "description": operation.description,
        "responses": dict(operation.answers),
    }
    if operation.takes_body:
        schema["request"] = operation.inputs
    else:
        parameters: list[Any] = [operation.inputs] if operation.inputs is not None else []
        if operation.paged:
            parameters += page_parameters()
        if name == "get_remember_review":
            parameters.append(
                OpenApiParameter(
                    "Retry-After",
                    int,
                    location=OpenApiParameter.HEADER,
                    response=[200],
                    description="set when the server holds too many long-polls to wait: seconds before polling again",
                )
            )
        schema["parameters"] = parameters
    return schema
