"""REST adapter: `POST /api/{tool}/{action}` for every action, with the same DI, validation and presenter.

A success's body is the data exactly as the MCP data block carries it (after `_select` and redaction);
a tool error answers its HTTP status with the same self-healing text.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .dispatch import ToolRegistry
from .errors import VALIDATION_ERROR, ValidationFailed, http_status
from .response import ToolResponse
from .schema import inline_refs
from .tool import Action

ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string", "description": "The self-healing text, as MCP sends it."},
            },
            "required": ["code", "message"],
        }
    },
    "required": ["error"],
}


def rest_body(response: ToolResponse) -> Response:
    """The HTTP response for a tool response."""
    if response.is_error:
        code = response.error_code or "ERROR"
        return JSONResponse(
            {"error": {"code": code, "message": response.text}}, status_code=http_status(code)
        )
    data = response.view.data if response.structured_content is None else response.structured_content
    return Response(
        json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str),
        media_type="application/json",
    )


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
            failed = ValidationFailed(action.label, [("(body)", "Send a JSON object of the action's parameters.")])
            return JSONResponse(
                {"error": {"code": VALIDATION_ERROR, "message": failed.render()}}, status_code=422
            )
        return rest_body(await registry.call_action(action, arguments, request))

    call_action.__name__ = f"{action.tool.name}_{action.name}"
    return call_action


def add_rest_routes(app: FastAPI, registry: ToolRegistry, *, prefix: str = "/api") -> None:
    """One documented POST route per action."""
    for action in registry.actions():
        errors = {
            str(status): {
                "description": description,
                "content": {"application/json": {"schema": ERROR_SCHEMA}},
            }
            for status, description in [(401, "Missing or bad credentials"), (404, "Not found"),
                                        (422, "Invalid parameters")]
        }
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
