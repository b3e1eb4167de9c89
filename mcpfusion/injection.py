"""Resources and prompts get their FastAPI dependencies solved exactly as actions do.

The same `mcpfusion.dependencies` machinery runs (overrides, yield teardown, `Context` found by type); what
differs is only how a failure reaches the client: a JSON-RPC error instead of a tool result.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from starlette.requests import Request

from .dependencies import CONTEXT_SCOPE_KEY, DependencyErrors, as_dependency, build_dependant, resolve
from .errors import NOT_FOUND, VALIDATION_ERROR, ToolError, field_path
from .hints import type_hints
from .mcp import jsonrpc
from .mcp.jsonrpc import McpError


class ArgumentErrors(ValueError):
    """Arguments of a prompt or resource that do not fit their parameters' types (pydantic's errors)."""

    def __init__(self, errors: list[Any]) -> None:
        super().__init__("invalid arguments")
        self.errors = errors


class Injected:
    """A plain function (resource, prompt) whose FastAPI dependencies are solved per call as an action's are:
    `Depends`, `Header`, `Request`, yield teardown, `app.dependency_overrides` and `Context` (by type)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        hints = type_hints(fn)
        self.arguments: list[inspect.Parameter] = []
        dependencies: list[inspect.Parameter] = []
        self.takes_any = False  # **kwargs: every value is passed
        for param in inspect.signature(fn).parameters.values():
            if param.kind is param.VAR_KEYWORD:
                self.takes_any = True
                continue
            if param.kind is param.VAR_POSITIONAL:
                continue
            param = param.replace(annotation=hints.get(param.name, Any))
            dependency = as_dependency(param)
            if dependency is not None:
                dependencies.append(dependency)
            else:
                self.arguments.append(param)
        self.names = frozenset(p.name for p in self.arguments)
        self.dependant = build_dependant(dependencies, None)
        # Prompt arguments and URI variables arrive as text: typed parameters are converted and checked
        # (pydantic's lax mode, as a query string is read), text and untyped ones passed as they are.
        self._typed = any(p.annotation not in (str, Any) for p in self.arguments)
        self._model: type[BaseModel] | None = None

    def _validated(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """`kwargs` with each typed argument converted to its annotation; `ArgumentErrors` when one does not fit."""
        if self._model is None:
            fields: Any = {p.name: (p.annotation, ... if p.default is inspect.Parameter.empty else p.default)
                           for p in self.arguments}
            self._model = create_model(f"{getattr(self.fn, '__name__', 'fn')}_arguments",
                                       __config__=ConfigDict(extra="ignore", arbitrary_types_allowed=True), **fields)
        try:
            model = self._model.model_validate(kwargs)
        except ValidationError as exc:
            raise ArgumentErrors(exc.errors(include_url=False)) from None
        return {**kwargs, **{name: getattr(model, name) for name in self.names if name in kwargs}}


    async def call(self, values: dict[str, Any], request: Request,
                   finish: Callable[[Any], Any] = lambda value: value) -> Any:
        """`fn(**values it takes, **dependencies)`, then `finish(result)` before yield dependencies close."""
        kwargs = dict(values) if self.takes_any else {k: v for k, v in values.items() if k in self.names}
        if self._typed:
            kwargs = self._validated(kwargs)
        async with AsyncExitStack() as stack:
            kwargs.update(await resolve(self.dependant, request, stack))
            value = self.fn(**kwargs)
            if inspect.isawaitable(value):
                value = await value
            return finish(value)


async def call_injected(
    injected: Injected, values: dict[str, Any], context: Any, request: Request | None, finish: Callable[[Any], Any]
) -> Any:
    """Run `injected` for one MCP request with its `context`; dependency and tool errors become JSON-RPC errors."""
    if request is None:  # called outside a transport (a unit test): a detached request, no app overrides
        from .testing import make_request

        request = make_request(None, context=context)
    elif context is not None:
        request.scope[CONTEXT_SCOPE_KEY] = context  # where `current_context` finds it
    try:
        return await injected.call(values, request, finish)
    except (DependencyErrors, ArgumentErrors) as exc:
        fields = "; ".join(f"{field_path(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in exc.errors[:20])
        raise McpError(jsonrpc.INVALID_PARAMS, f"Invalid request: {fields}") from None
    except ToolError as exc:
        code = jsonrpc.INVALID_PARAMS if exc.code in (NOT_FOUND, VALIDATION_ERROR) else jsonrpc.INTERNAL_ERROR
        message = exc.message + (f" {exc.recovery}" if exc.recovery else "")
        raise McpError(code, message, {"code": exc.code}) from None
