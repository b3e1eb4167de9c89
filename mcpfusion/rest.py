"""REST adapter: `POST /api/{tool}/{action}` for every action, with the same DI, validation and presenter.

A success's body is the data exactly as the MCP data block carries it (after `_select` and redaction, with
the same serializer); every error, whether a tool's, a dependency's, routing's or a crash, is RFC 9457
problem details (`mcpfusion.problem`) with the same code, message, recovery and actions as the agent's.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from .dispatch import ToolRegistry
from .errors import INTERNAL_ERROR, ToolError, field_path
from .problem import (
    PROBLEM_SCHEMA,
    http_problem_response,
    openapi_errors,
    problem_of,
    problem_of_result,
    problem_response,
    validation_problem,
)
from .response import ToolResponse
from .schema import inline_refs
from .serializer import dumps
from .tool import Action, unknown_action


def rest_body(response: ToolResponse, request: Request | None = None) -> Response:
    """The HTTP response for a tool response: the data block's JSON, or problem details."""
    if response.is_error:
        return problem_response(problem_of_result(response, instance=request.url.path if request else None))
    # The data block's data (after _select and redaction), whatever other shape structuredContent has.
    return Response(dumps(response.view.data), media_type="application/json")


def _output_schema(action: Action) -> dict[str, Any]:
    if action.output_schema is not None:
        return inline_refs(action.output_schema)
    schemas = [inline_refs(p.item_schema()) for p in action.presenters]
    if not schemas:
        return {}
    items = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    return {"anyOf": [items, {"type": "array", "items": items}]}


def _endpoint(registry: ToolRegistry, action: Action) -> Any:
    async def call_action(request: Request) -> Response:
        raw = await request.body()
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except (ValueError, UnicodeDecodeError):
            arguments = None
        if not isinstance(arguments, dict):
            fields = [("(body)", "Send a JSON object of the action's parameters.")]
            return validation_problem(action.label, fields, request.url.path)
        return rest_body(await registry.call_action(action, arguments, request), request)

    call_action.__name__ = f"{action.tool.name}_{action.name}"
    return call_action


def add_rest_routes(app: FastAPI, registry: ToolRegistry, *, prefix: str = "/api") -> None:
    """One documented POST route per action; every error under `prefix` answers problem details."""
    errors = openapi_errors()
    for action in registry.actions():
        app.add_api_route(
            f"{prefix}/{action.tool.name}/{action.name}",
            _endpoint(registry, action),
            methods=["POST"],
            name=f"{action.tool.name}.{action.name}",
            summary=action.description or action.name,
            description=action.fn.__doc__ or action.description,
            tags=[action.tool.name],
            operation_id=f"{action.tool.name}_{action.name}",
            include_in_schema=True,
            openapi_extra={
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": inline_refs(action.input_schema)}},
                },
                "responses": {
                    "200": {
                        "description": "The data, exactly as the MCP data block carries it",
                        "content": {"application/json": {"schema": _output_schema(action)}},
                    },
                    **errors,
                },
            },
        )
    install_problem_handlers(app, registry, prefix)
    _document_problem(app)


def _unknown(registry: ToolRegistry, path: str, prefix: str) -> ToolError:
    """Why `path` (under `prefix`) names no action: an unknown tool, or an unknown action of a tool."""
    tool_name, _, action_name = path[len(prefix) + 1:].partition("/")
    try:
        registry.find(tool_name, action_name)
    except ToolError as exc:
        return exc
    return unknown_action(registry.tools[tool_name], action_name)  # a deeper path under a real action


def install_problem_handlers(app: FastAPI, registry: ToolRegistry, prefix: str = "/api") -> None:
    """Errors of requests under `prefix` (routing, dependencies, crashes) become problem details; the app's
    other paths keep the handlers they had."""
    previous_http = app.exception_handlers.get(StarletteHTTPException, http_exception_handler)
    previous_validation = app.exception_handlers.get(RequestValidationError, request_validation_exception_handler)
    previous_crash = app.exception_handlers.get(Exception)

    def ours(request: Request) -> bool:
        return request.url.path.startswith(prefix + "/")

    async def on_http(request: Request, exc: Exception) -> Response:
        if not ours(request) or not isinstance(exc, StarletteHTTPException):
            return await previous_http(request, exc)  # type: ignore[no-any-return]
        path = request.url.path
        if exc.status_code == 404 and exc.detail == "Not Found":  # routing found no action at this path
            return problem_response(problem_of(_unknown(registry, path, prefix), instance=path))
        return http_problem_response(exc, path)

    async def on_validation(request: Request, exc: Exception) -> Response:
        if not ours(request) or not isinstance(exc, RequestValidationError):
            return await previous_validation(request, exc)  # type: ignore[no-any-return]
        fields = [(field_path(e.get("loc", ())), f"{e.get('msg', 'invalid')}.") for e in exc.errors()]
        return validation_problem(request.url.path, fields, request.url.path)

    async def on_crash(request: Request, exc: Exception) -> Response:
        if not ours(request):
            if previous_crash is not None:
                return await previous_crash(request, exc)  # type: ignore[no-any-return]
            return PlainTextResponse("Internal Server Error", status_code=500)
        failed = ToolError(INTERNAL_ERROR, "The request failed with an internal error.",
                           recovery="This is a server problem, not your call; retry later.")
        return problem_response(problem_of(failed, instance=request.url.path))

    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(Exception, on_crash)


def _document_problem(app: FastAPI) -> None:
    """Add the `Problem` schema the error responses refer to."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
