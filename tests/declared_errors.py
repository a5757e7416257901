"""Every error the agent API or an MCP tool answers in any test is one its operation declares
(agents.operations.catalog): the autouse fixture `answers_are_declared` (tests/conftest.py)
watches every response of every test and fails the test on an undeclared (operation, status,
code). With tests/agents/test_declared_errors.py, which provokes every declared code, the
served schema lists exactly the errors each operation can answer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agents.operations.catalog import OPERATIONS, at


def undeclared(operation: str, status: int, code: Any) -> str | None:
    """Why (operation, status, code) is not declared, or None when it is."""
    declared = OPERATIONS[operation].all_errors()
    if code in declared.get(status, ()):
        return None
    return f"{operation} answered {status} {code!r}; it declares {declared}"


@contextmanager
def watching_answers() -> Iterator[list[str]]:
    """Collect, while open, each answer of an operation (over HTTP or MCP) whose error is not
    declared. 5xx answers other than the declared 503 are bugs other tests catch; they are not
    errors an operation declares."""
    from rest_framework.views import APIView

    from agents import mcp_server

    found: list[str] = []
    finalize, call = APIView.finalize_response, mcp_server.EngramTools.call

    def finalize_response(self: APIView, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = finalize(self, request, response, *args, **kwargs)
        match = getattr(request, "resolver_match", None)
        if 400 <= response.status_code < 500 or response.status_code == 503:
            try:
                operation = at(match.url_name, request.method).name if match else None
            except KeyError:  # a method the route does not serve (405): no operation
                operation = None
            data = getattr(response, "data", None)
            if operation is not None and isinstance(data, dict):
                problem = undeclared(operation, response.status_code, data.get("code"))
                if problem:
                    found.append(problem)
        return response

    def tool_call(self: Any, operation: Any, *args: Any, **kwargs: Any) -> Any:
        result = call(self, operation, *args, **kwargs)
        body = result.structured_content
        if result.is_error and isinstance(body, dict):
            names = [op.name for op in OPERATIONS.values() if op.tool and op.run == getattr(operation, "__name__", "")]
            if names and not any(body.get("code") in codes for codes in OPERATIONS[names[0]].all_errors().values()):
                found.append(f"MCP {names[0]} answered {body.get('code')!r}")
        return result

    APIView.finalize_response = finalize_response  # type: ignore[method-assign]
    mcp_server.EngramTools.call = tool_call  # type: ignore[method-assign]
    try:
        yield found
    finally:
        APIView.finalize_response = finalize  # type: ignore[method-assign]
        mcp_server.EngramTools.call = call  # type: ignore[method-assign]
