"""`MCPFusion`: the composition object users write. It gathers tools, resources, prompts and completions,
and mounts `/mcp` (every MCP revision), REST and `/healthz` on a FastAPI application.

    fusion = MCPFusion(name="billing", version="1.0.0", tools=[billing])
    app = fusion.build_app()            # or fusion.mount(existing_app)
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from . import collector, inputschema
from .context import Context
from .dependencies import CONTEXT_SCOPE_KEY, context_parameter, draining
from .dispatch import ToolRegistry, _failure_of, no_phase
from .errors import INTERNAL_ERROR, ToolError, UnknownToolError, ValidationFailed, field_path, sent_value
from .health import (
    HEALTHZ_RESPONSES,
    READYZ_RESPONSES,
    Check,
    HeadServedToo,
    Readiness,
    ReadinessGroup,
    healthz,
    readyz_endpoint,
)
from .injection import Injected, call_injected
from .listing import exposed
from .mcp import jsonrpc
from .mcp.callables import invoke
from .mcp.engine import Call, Engine
from .mcp.http import McpHttpTransport
from .mcp.jsonrpc import McpError, ProtocolSignal, notification
from .mcp.security import Guarded, HostGuard, HostOriginGuard, mcp_refusal
from .mcp.settings import TransportSettings
from .mcp.state import RequestStateSigner
from .middleware import ActionCall, CallNext, Middleware, applies, chain
from .pagination import Paging, checked_ttl, warning_of_a_process_key
from .problem import http_problem_response
from .prompts import Prompt, PromptRegistry
from .resources import Resource, ResourceRegistry, ResourceTemplate
from .response import ResponseView, ToolResponse
from .schema import lean
from .tool import _NAME as TOOL_NAME
from .tool import Tool, check_output_schema

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .authorization import ProtectedResource, ScopesOf
    from .redis import RedisStores
    from .telemetry import Telemetry
    from .tool import Action

logger = logging.getLogger("mcpfusion")
# Decorators hand the function back unchanged: its own type, for the caller's type checker.
F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=Check)
_SETTING_NAMES = set(TransportSettings._fields)


class RawAction:
    """A raw tool as the app's middleware see it (`call.action`, and `call.tool`: a raw tool is a tool of one
    action): its name and the hints of its annotations. Unless `readOnlyHint` is true it is a mutation (MCP's
    default), so `Audit()` of mutations audits it."""

    middleware: tuple[Any, ...] = ()
    scopes: frozenset[str] = frozenset()
    confirm = False
    paginate = None

    def __init__(self, descriptor: dict[str, Any]) -> None:
        hints = descriptor.get("annotations") or {}
        self.name = str(descriptor["name"])
        self.description = str(descriptor.get("description", ""))
        self.readonly = hints.get("readOnlyHint") is True
        self.destructive = not self.readonly and hints.get("destructiveHint") is not False
        self.idempotent = hints.get("idempotentHint") is True
        self.open_world = hints.get("openWorldHint") is not False

    @property
    def tool(self) -> RawAction:
        return self

    @property
    def actions(self) -> dict[str, RawAction]:
        return {self.name: self}

    @property
    def qualified_name(self) -> str:
        return self.name

    label = qualified_name

    def __repr__(self) -> str:
        return f"RawAction({self.name!r})"


class RawResponse(ToolResponse):
    """A raw tool's `CallToolResult` as middleware see it (its text blocks, whether it failed and with which
    code); it answers that result unchanged unless a middleware answers another response."""

    __slots__ = ("result",)

    def __init__(self, result: dict[str, Any], code: str | None = None) -> None:
        texts = [b["text"] for b in result.get("content") or () if isinstance(b, dict) and b.get("type") == "text"
                 and isinstance(b.get("text"), str)]
        failed = result.get("isError") is True
        super().__init__(texts, is_error=failed, view=ResponseView(error_code=code or ("ERROR" if failed else None)))
        self.result = result

    def to_mcp(self) -> dict[str, Any]:
        return self.result


class RawTool:
    """A tool answering its `CallToolResult` itself (content blocks of any type, a hand-written schema).
    The escape hatch for what actions and presenters do not cover; prefer `Tool` + `@tool.action`.

    Its arguments are checked against its input schema (the declared one, else its signature's, as an
    action's) and its result against MCP's `CallToolResult` before it leaves: a bad call is a
    `VALIDATION_ERROR`, a bad result an `INTERNAL_ERROR`. The app's middleware (`Audit`, `RateLimit`, ...)
    wrap its calls as they wrap an action's."""

    def __init__(self, fn: Callable[..., Any], descriptor: dict[str, Any], validator: Any = None,
                 model: type[BaseModel] | None = None) -> None:
        self.fn = fn
        self.descriptor = descriptor
        self.validator = validator  # a jsonschema validator of the declared input schema, or None
        output = descriptor.get("outputSchema")
        self.output = None if output is None else inputschema.output_validator(output)
        self.model = model  # the argument model of its signature (no input schema declared), or None
        self.context_arg = context_parameter(fn)
        self.action = RawAction(descriptor)
        self._pipelines: dict[tuple[Any, ...], CallNext | None] = {}
        params = inspect.signature(fn).parameters
        # Which arguments the function takes, computed once (None: it takes **kwargs, so all of them).
        self.accepts: frozenset[str] | None = (
            None if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()) else frozenset(params)
        )

    @property
    def name(self) -> str:
        return str(self.descriptor["name"])

    async def call(self, arguments: dict[str, Any], context: Any) -> dict[str, Any]:
        """The `CallToolResult` of one call (no middleware: `call_through` runs them)."""
        return (await self.respond(arguments, context)).to_mcp()

    async def call_through(self, middleware: tuple[Any, ...], arguments: dict[str, Any], request: Request,
                           context: Any, guards: Any) -> dict[str, Any]:
        """One call inside `middleware` (the app's): they see it as an action call (`RawAction`), so a raw tool
        is audited and rate-limited like the actions beside it."""
        pipeline = self._pipeline(middleware)
        if pipeline is None:
            return await self.call(arguments, context)
        request.scope[CONTEXT_SCOPE_KEY] = context  # (`call.context` reads it there)
        action = cast("Action", self.action)  # (duck-typed: what middleware read of an action)
        call = ActionCall(action, dict(arguments), arguments, request, "mcp", guards, no_phase)
        return (await pipeline(call)).to_mcp()

    def _pipeline(self, middleware: tuple[Any, ...]) -> CallNext | None:
        """The chain of the middleware that apply to this tool (None: none do), composed once."""
        try:
            return self._pipelines[middleware]
        except KeyError:
            pass
        layers = [mw for mw in middleware if applies(mw, cast("Action", self.action))]
        found = self._pipelines[middleware] = \
            chain(layers, self._endpoint, _failure_of, self._own_answer) if layers else None
        return found

    async def _endpoint(self, call: ActionCall) -> ToolResponse:
        response = await self.respond(call.arguments, call.request.scope.get(CONTEXT_SCOPE_KEY))
        call.answered = response  # (checked already: a middleware returning it as it is costs nothing more)
        return response

    def _own_answer(self, call: ActionCall, response: ToolResponse) -> ToolResponse:
        """A response a middleware gave in place of the tool's (a cache's, a guard's): held to what the tool's
        own results are (`_checked`), as an action's middleware answers are to its contract."""
        return self._checked(response.to_mcp(), response.error_code)

    async def respond(self, arguments: dict[str, Any], context: Any) -> RawResponse:
        """Validate the arguments, run the function, check its result."""
        invalid = self._invalid(arguments)
        if invalid is not None:
            return _error_result(invalid)
        if self.model is not None:
            try:
                kwargs = self._validated(self.model, arguments)
            except ValidationFailed as exc:
                return _error_result(exc)
        else:
            accepts = self.accepts
            kwargs = dict(arguments) if accepts is None else {k: v for k, v in arguments.items() if k in accepts}
        if self.context_arg:
            kwargs[self.context_arg] = context
        try:
            value = await invoke(self.fn, kwargs)
        except ProtocolSignal:
            raise
        except ToolError as exc:  # raised for the agent, as from an action (no back channel: NO_BACK_CHANNEL)
            return _error_result(exc)
        except Exception:
            # Same contract as actions: a self-healing error text, never the exception's own message.
            logger.exception("raw tool %s failed", self.name)
            return self._internal_error()
        return self._checked(_raw_result(value))

    @staticmethod
    def signature_model(fn: Callable[..., Any], where: str) -> type[BaseModel]:
        """The argument model of `fn`'s parameters (its `Context` one left out): what a raw tool declared
        without `input_schema` takes, validated as an action's (`**kwargs` lets other arguments through)."""
        from pydantic import ConfigDict, create_model

        from .argschema import check_listable
        from .hints import type_hints
        from .validatable import check_validatable

        try:
            hints = type_hints(fn)
        except Exception as exc:
            raise TypeError(f"{where}: its annotations cannot be evaluated ({type(exc).__name__}: {exc})") from exc
        skipped = {context_parameter(fn)}
        params = inspect.signature(fn).parameters.values()
        fields: dict[str, Any] = {}
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in skipped:
                continue
            if p.name.startswith("_"):  # (pydantic keeps those names for private attributes)
                raise ValueError(f"{where}: parameter {p.name!r} starts with an underscore; rename it")
            annotation = hints.get(p.name, Any)
            check_validatable(annotation, f"{where}: parameter {p.name!r}")
            check_listable(annotation, f"{where}: parameter {p.name!r}")
            fields[p.name] = (annotation, ... if p.default is p.empty else p.default)
        takes_more = any(p.kind is p.VAR_KEYWORD for p in params)
        config = ConfigDict(extra="allow" if takes_more else "forbid", allow_inf_nan=False)  # (an action's model's)
        return create_model(f"{fn.__name__}_arguments", __config__=config, **fields)

    def _validated(self, model: type[BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
        """The function's keyword arguments, validated by its signature's model; each fault names its field.
        Unknown keys are listed apart, never validated one by one (a flood of them costs nothing)."""
        from pydantic import ValidationError

        names = {field.alias or name: None for name, field in model.model_fields.items()}  # (in their order)
        unknown: list[tuple[str, str]] = []
        if model.model_config.get("extra") == "forbid":
            accepted = f"Accepted here: {', '.join(names)}." if names else "This tool takes no arguments."
            unknown = [(field_path((key,)), f"Unknown field. {accepted}") for key in arguments if key not in names]
            arguments = {key: value for key, value in arguments.items() if key in names} if unknown else arguments
        try:
            found = model.__pydantic_validator__.validate_python(arguments)
        except ValidationError as exc:
            raise ValidationFailed(self.name, [*_faults(exc), *unknown]) from None
        if unknown:
            raise ValidationFailed(self.name, unknown)
        return {**{name: getattr(found, name) for name in model.model_fields}, **(found.model_extra or {})}

    def _invalid(self, arguments: dict[str, Any]) -> ValidationFailed | None:
        """The arguments' faults against the declared input schema, each naming its field (None: valid)."""
        if self.validator is None:
            return None
        found = inputschema.faults(self.validator, arguments)
        return ValidationFailed(self.name, found) if found else None  # (it lists the first ones, counts the rest)

    def _checked(self, result: dict[str, Any], code: str | None = None) -> RawResponse:
        """`result` when MCP's `CallToolResult` accepts it and, for a tool declaring an `outputSchema`, a success
        carries `structuredContent` that the schema accepts; else an internal error (a client's SDK would refuse
        the result: the agent would get nothing it can act on), logged with where it is wrong, never values."""
        from mcp_types import CallToolResult
        from pydantic import ValidationError

        try:
            CallToolResult.model_validate(result)
        except ValidationError as exc:
            wrong = sorted({".".join(map(str, e["loc"][:2])) or "(root)" for e in exc.errors()})
            logger.error("raw tool %s returned a result that is not an MCP CallToolResult (at %s): a result is a "
                         "str, a list of content blocks or a {\"content\": [...]} dict", self.name, ", ".join(wrong))
            return self._internal_error()
        if self.output is not None and result.get("isError") is not True:
            structured = result.get("structuredContent")
            wrong = ["structuredContent (missing)"] if not isinstance(structured, dict) else sorted(
                {"structuredContent" + "".join(f"[{part!r}]" for part in list(e.absolute_path)[:2])
                 for e in self.output.iter_errors(structured)})
            if wrong:
                logger.error("raw tool %s answered a result its outputSchema refuses (at %s): a client refuses it",
                             self.name, ", ".join(wrong[:5]))
                return self._internal_error()
        return RawResponse(result, code)

    def _internal_error(self) -> RawResponse:
        return _error_result(ToolError(
            INTERNAL_ERROR, f"{self.name} failed with an internal error.",
            recovery="This is a server problem, not your call; retry later or try another tool.",
        ))


def _faults(exc: Any) -> list[tuple[str, str]]:
    """A raw tool's argument faults as pydantic found them, each naming its field (values cut short)."""
    fields = []
    for err in exc.errors(include_url=False):
        message = "Field required." if err["type"] == "missing" else \
            f"{err['msg'].rstrip('.')}. You sent: {sent_value(err.get('input'))}."
        fields.append((field_path(err["loc"]) or "(arguments)", message))
    return fields


def _raw_result(value: Any) -> dict[str, Any]:
    """A raw tool's return value as a `CallToolResult` dict: a whole result, content blocks, or text. Any dict
    is taken for a whole result: one without "content" is refused by `_checked`, never sent as its repr."""
    if isinstance(value, dict):
        return value
    if isinstance(value, list):
        return {"content": value, "isError": False}
    return {"content": [{"type": "text", "text": "OK" if value is None else str(value)}], "isError": False}


def _error_result(error: ToolError | ValidationFailed) -> RawResponse:
    return RawResponse({"content": [{"type": "text", "text": error.render()}], "isError": True}, error.code)


class FusionBackend:
    """Adapts the core's `ToolRegistry` (plus raw tools) to the engine's `ToolBackend` protocol."""

    def __init__(self, fusion: MCPFusion) -> None:
        self.fusion = fusion

    def listing_key(self, request: Request) -> frozenset[str] | None:
        """The caller's granted scopes that some action requires: callers who differ only in scopes no action
        asks for see the same tools, so they share one cached listing (rather than one entry per token)."""
        registry = self.fusion.registry
        granted = registry.granted(request)
        if granted is None:
            return None
        # Read on each listing: actions added later may use new scopes.
        used: frozenset[str] = frozenset().union(*(action.scopes for action in registry.actions()))
        return granted & used

    def list_tools(self, key: frozenset[str] | None = None) -> list[dict[str, Any]]:
        raw = [t.descriptor for t in self.fusion.raw_tools.values()]
        return [*raw, *self.fusion.registry.mcp_tools(key)]

    async def call_tool(self, name: str, arguments: dict[str, Any], request: Request, context: Any) -> dict[str, Any]:
        raw = self.fusion.raw_tools.get(name)
        if raw is not None:
            registry = self.fusion.registry
            return await raw.call_through(registry.middleware, arguments, request, context, registry.guards)
        request.scope[CONTEXT_SCOPE_KEY] = context  # where the core's dependency resolution finds it
        try:
            response = await self.fusion.registry.call(name, arguments, request)
        except UnknownToolError as exc:
            available = sorted({*exc.available, *self.fusion.raw_tools})
            message = f"Unknown tool: {exc.name}. Available tools: {', '.join(available) or 'none'}."
            raise McpError(jsonrpc.INVALID_PARAMS, message, {"name": exc.name, "available": available}) from None
        return response.to_mcp()


class MCPFusion:
    """One MCP server: tools, resources, prompts, completions, and the transport settings of `/mcp`.

    `middleware` (functions or guards such as `RateLimit`, `Audit`) wrap every action call on every
    transport, outside the tools' and actions' own (see `mcpfusion.middleware`).

    Transport settings are `TransportSettings` fields, given as `settings=` or as keyword arguments
    (`allowed_hosts=[...]`, `json_response=True`, `max_body_bytes=...`, `event_store=...`, ...).

    Cursors of paginated actions are signed with the settings' `signing_key`, expire after `cursor_ttl`
    seconds and are bound to the value of the `cursor_scope` dependency (e.g. the caller's tenant; by
    default the Authorization header).

    `output_schemas=False` keeps every `outputSchema` out of `tools/list` (a token budget choice); results
    are still validated and still carry `structuredContent`.

    `authorization` (a `mcpfusion.authorization.ProtectedResource`) makes the server an OAuth protected
    resource: metadata, 401/403 challenges, and the bearer check when it has `authenticate=`. Actions declaring
    `scopes=` are shown to and callable by callers granted them; `scopes_of(auth)` reads the granted scopes
    from what authenticated the request (default: its `scopes`, or the claims' `scope` / `scp`).

    `gc_tuning=True` gives the garbage collector its serving profile once the app has started (the start-up heap
    frozen, a larger young generation: `mcpfusion.collector`; default `MCPFUSION_GC_TUNING`, which
    `mcpfusion serve` sets).
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        instructions: str | None = None,
        title: str | None = None,
        tools: Iterable[Tool] = (),
        middleware: Iterable[Middleware] = (),
        settings: TransportSettings | None = None,
        telemetry: Telemetry | bool | None = None,
        cursor_scope: Callable[..., Any] | None = None,
        cursor_ttl: float = 3600.0,
        output_schemas: bool = True,
        authorization: ProtectedResource | None = None,
        scopes_of: ScopesOf | None = None,
        gc_tuning: bool | None = None,
        **transport: Any,
    ) -> None:
        unknown = set(transport) - _SETTING_NAMES
        if unknown:
            raise TypeError(f"unknown MCPFusion argument(s): {', '.join(sorted(unknown))}")
        self.name = name
        self.version = version
        self.title = title
        self.instructions = instructions
        self.settings = settings or TransportSettings(**transport)
        self.cursor_scope = cursor_scope
        self.cursor_ttl = checked_ttl(cursor_ttl)  # refused here: a cursor of ttl <= 0 would be born expired
        self.resources = ResourceRegistry()
        self.prompts = PromptRegistry()
        # Resources and prompts declared with scopes exist for callers holding them, as actions do.
        self.resources.granted = self.prompts.granted = self._granted
        self.resources.limits = self.prompts.limits = self  # their reads count against the app's rate limits
        self.completions: dict[tuple[str, str, str], Callable[..., Any]] = {}
        self.raw_tools: dict[str, RawTool] = {}
        self.output_schemas = output_schemas  # False: tools/list advertises no outputSchema (saves tokens)
        self.authorization = authorization
        self.scopes_of = scopes_of or (authorization.scopes_of if authorization is not None else None)
        self._registry: ToolRegistry | None = None
        # Registered on first use: a tool's actions may be declared after `MCPFusion(tools=[...])`.
        self._pending_tools: list[Tool] = list(tools)
        self.middleware = tuple(middleware)  # around every action, outside the tools' own (mcpfusion.middleware)
        self._transport: McpHttpTransport | None = None
        self.app: FastAPI | None = None  # the app it was last mounted on (`ToolTester(fusion)` calls through it)
        self.readiness = Readiness()
        if telemetry is True:
            from .telemetry import Telemetry

            telemetry = Telemetry()
        self.telemetry: Telemetry | None = telemetry or None
        self.gc_tuning = gc_tuning  # None: MCPFUSION_GC_TUNING (mcpfusion.collector)

    # -- tools ----------------------------------------------------------------------------------------

    @property
    def registry(self) -> ToolRegistry:
        """The core's `ToolRegistry` holding every `Tool` of this server."""
        if self._registry is None:
            scope = {"scope": self.cursor_scope} if self.cursor_scope is not None else {}
            paging = Paging(self.settings.signing_key, ttl=self.cursor_ttl, **scope)
            self._registry = ToolRegistry(self._pending_tools, paging=paging, output_schemas=self.output_schemas,
                                          middleware=self.middleware, signing_key=self.settings.signing_key)
            self._registry.telemetry = self.telemetry
            if self.scopes_of is not None:
                self._registry.scopes_of = self.scopes_of
            self._registry.authorization = self.authorization
            self._pending_tools = []
        return self._registry

    def _declared_scopes(self) -> set[str]:
        """The scopes the resources and prompts declare (advertised with the actions')."""
        found = {s for r in self.resources.resources.values() for s in r.scopes}
        found.update(s for t in self.resources.templates for s in t.scopes)
        found.update(s for p in self.prompts.prompts.values() for s in p.scopes)
        return found

    def _granted(self, request: Request) -> frozenset[str] | None:
        return self.registry.granted(request)  # (the registry is made on first use: looked up per call)

    def readiness_check(self, name: str) -> Callable[[C], C]:
        """Register a check for `/readyz` (raise, or return False, while the dependency is down): an `async def`,
        or a plain `def`, which runs off the event loop (as FastAPI runs a plain `def` dependency)."""

        def register(check: C) -> C:
            self.readiness.add(name, check)
            return check

        return register

    def add_tool(self, tool: Tool) -> None:
        """Register a `Tool`; connected clients learn about it from `notify_tools_changed()`."""
        clash = sorted({e.name for e in exposed(tool)} & set(self.raw_tools))
        if clash:
            raise ValueError(f"MCP tool name(s) {clash} of tool {tool.name!r} are already raw tools")
        self.registry.add(tool)
        self._tools_changed()

    def raw_tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        title: str | None = None,
    ) -> Callable[[F], F]:
        """Register a function as a tool that builds its own `CallToolResult` (str, content list or dict).
        Without `input_schema`, its signature is its schema, and validates its arguments as an action's do."""

        def register(fn: F) -> F:
            tool_name = name or fn.__name__
            if not TOOL_NAME.match(tool_name):  # the rule `Tool()` applies: what MCP clients accept
                raise ValueError(f"raw_tool name {tool_name!r} must match {TOOL_NAME.pattern}")
            if tool_name in self.registry.mcp_names():
                raise ValueError(f"raw_tool {tool_name!r}: an action is already served under this MCP tool name")
            if tool_name in self.raw_tools:  # as actions: a second declaration is a mistake, never a silent swap
                raise ValueError(f"duplicate raw_tool name {tool_name!r} (remove_raw_tool() it first to replace it)")
            if output_schema is not None:
                check_output_schema(output_schema, f"raw_tool {tool_name!r}")
            where = f"raw_tool {tool_name!r}"
            validator = None if input_schema is None else inputschema.input_validator(input_schema, where)
            model = RawTool.signature_model(fn, where) if input_schema is None else None
            descriptor: dict[str, Any] = {
                "name": tool_name,
                "inputSchema": input_schema if model is None else lean(model.model_json_schema()),
            }
            desc = description or (fn.__doc__ or "").strip()
            if desc:
                descriptor["description"] = desc
            for key, value in (("title", title), ("outputSchema", output_schema), ("annotations", annotations)):
                if value is not None:
                    descriptor[key] = value
            self.raw_tools[descriptor["name"]] = RawTool(fn, descriptor, validator, model)
            self.registry.raw_names.add(descriptor["name"])  # a presenter may suggest it
            self._tools_changed()
            return fn

        return register

    def remove_raw_tool(self, name: str) -> None:
        self.raw_tools.pop(name, None)
        self.registry.raw_names.discard(name)
        self._tools_changed()

    def _tools_changed(self) -> None:
        if self._transport is not None:
            self._transport.invalidate()

    # -- resources, prompts, completions ----------------------------------------------------------------

    def resource(
        self, uri: str, *, name: str | None = None, title: str | None = None, description: str | None = None,
        mime_type: str | None = None, annotations: dict[str, Any] | None = None, scopes: Iterable[str] = (),
    ) -> Callable[[F], F]:
        """A static resource at `uri`; the function returns str (text), bytes (blob) or JSON data. With
        `scopes`, only callers holding them see and read it (others are told it does not exist)."""

        def register(fn: F) -> F:
            self.resources.add(Resource(uri=uri, fn=fn, name=name or fn.__name__, title=title,
                                        description=description or _doc(fn), mime_type=mime_type,
                                        annotations=annotations, scopes=scopes))
            return fn

        return register

    def resource_template(
        self, uri_template: str, *, name: str | None = None, title: str | None = None,
        description: str | None = None, mime_type: str | None = None, scopes: Iterable[str] = (),
    ) -> Callable[[F], F]:
        """A family of resources (`users://{id}/profile`); template variables are function arguments. With
        `scopes`, only callers holding them see and read it."""

        def register(fn: F) -> F:
            self.resources.add_template(ResourceTemplate(
                uri_template=uri_template, fn=fn, name=name or fn.__name__, title=title,
                description=description or _doc(fn), mime_type=mime_type, scopes=scopes))
            return fn

        return register

    def prompt(
        self, name: str | None = None, *, description: str | None = None, title: str | None = None,
        scopes: Iterable[str] = (),
    ) -> Callable[[F], F]:
        """A prompt whose arguments are the function's parameters. With `scopes`, only callers holding them
        see and get it."""

        def register(fn: F) -> F:
            self.prompts.add(Prompt.from_function(fn, name=name, description=description, title=title,
                                                  scopes=scopes))
            return fn

        return register

    def remove_prompt(self, name: str) -> None:
        self.prompts.prompts.pop(name, None)

    def completion(
        self, *, argument: str, prompt: str | None = None, resource_template: str | None = None
    ) -> Callable[[F], F]:
        """Suggestions for one argument of a prompt or one variable of a resource template.

        The function takes `value` (what the user typed so far) and optionally `arguments` (the other
        arguments already given), and returns a list of strings (or a `{values, total, hasMore}` dict). Its
        dependencies (`Depends`, `Header`, `Context`...) are resolved per call as a prompt's are."""
        if (prompt is None) == (resource_template is None):
            raise TypeError("completion() needs exactly one of prompt= or resource_template=")
        key = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", resource_template)

        def register(fn: F) -> F:
            self.completions[(key[0], str(key[1]), argument)] = _completion_call(fn)
            return fn

        return register

    def _check_completions(self) -> None:
        """Every completion names a declared prompt argument or resource-template variable (a typo would
        otherwise never complete anything, silently)."""
        for kind, target, argument in self.completions:
            if kind == "ref/prompt":
                prompt = self.prompts.prompts.get(target)
                names = None if prompt is None else [a.get("name") for a in prompt.arguments]
                what = f"prompt {target!r}"
            else:
                template = self.resources.template(target)
                names = None if template is None else list(template.variables)
                what = f"resource template {target!r}"
            if names is None:
                raise ValueError(f"completion(argument={argument!r}): there is no {what}")
            if argument not in names:
                raise ValueError(f"completion(argument={argument!r}): the {what} takes "
                                 f"{', '.join(map(str, names)) or 'no arguments'}")

    # -- notifications ----------------------------------------------------------------------------------

    async def notify_tools_changed(self) -> None:
        self._tools_changed()
        await self._publish(notification("notifications/tools/list_changed"))

    async def notify_prompts_changed(self) -> None:
        await self._publish(notification("notifications/prompts/list_changed"))

    async def notify_resources_changed(self) -> None:
        await self._publish(notification("notifications/resources/list_changed"))

    async def notify_resource_updated(self, uri: str) -> None:
        await self._publish(notification("notifications/resources/updated", {"uri": uri}))

    async def _publish(self, message: dict[str, Any]) -> None:
        if self._transport is not None:
            await self._transport.publish(message)

    # -- serving ----------------------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        return self.transport.engine

    @property
    def transport(self) -> McpHttpTransport:
        if self._transport is None:
            settings = self.settings
            engine = Engine(
                name=self.name, version=self.version, title=self.title, instructions=self.instructions,
                tools=FusionBackend(self), resources=self.resources, prompts=self.prompts,
                completions=self.completions, make_context=_context_of,
                signer=RequestStateSigner(settings.signing_key, settings.request_state_ttl),
                cache_ttl_ms=settings.cache_ttl_ms, cache_scope=settings.cache_scope,
                observer=self.telemetry,
                max_subscriptions=settings.max_subscriptions, max_uri_length=settings.max_uri_length,
            )
            self._transport = McpHttpTransport(engine, settings, _redis_stores(settings))
        return self._transport

    def mount(self, app: FastAPI, *, rest: bool = True, docs: str | None = "/tools") -> FastAPI:
        """Add `/mcp`, `/healthz`, `/readyz`, the REST routes of every tool (`/api/{tool}/{action}`) and the
        generated tool docs (at `docs`; None to leave them out) to an existing FastAPI app. The app's own `/docs`
        and `/redoc` pages are switched to locally served assets (they work offline).

        Another `MCPFusion` may be mounted on the same app at its own `path=`: the app's one `/readyz` runs the
        checks of both; a route of this one that the app serves already (its tool docs, a REST route of a tool
        of the same name) is refused, as a shadowed route would never answer. The app records every fusion
        mounted on it in `app.state.mcpfusions` (mount order); `app.state.mcpfusion` is the last one."""
        from .swagger import serve_offline

        self._check_completions()
        path = self.settings.path
        # Every path the app routes, included routers' too (FastAPI 0.165 keeps those in one lazy entry).
        served = {getattr(route, "path", None) for route in iter_route_contexts(app.router.routes)}
        if path in served:
            raise ValueError(f"MCPFusion {self.name!r}: the app already serves MCP at {path} (another MCPFusion, or "
                             "this one mounted twice): give every tool to one MCPFusion (tools=[...]), or serve "
                             "this one at another path (MCPFusion(..., path='/mcp-other'))")
        other = getattr(getattr(app.state, "mcpfusion", None), "name", None)
        by = f"MCPFusion {other!r}" if other is not None else "another route"
        docs_path = None if docs is None else "/" + docs.strip("/")
        if docs_path is not None and {docs_path, f"{docs_path}.json"} & served:
            raise ValueError(f"MCPFusion {self.name!r}: the app already serves tool docs at {docs_path} ({by}): "
                             f"mount this one with docs of its own, fusion.mount(app, docs='/{self.name}-tools'), "
                             "or without them (docs=None)")
        routes = {f"/api/{t.name}/{a}" for t in self.registry.tools.values() for a in t.actions} if rest else set()
        shadowed = sorted(routes.intersection(served))
        if shadowed:
            raise ValueError(f"MCPFusion {self.name!r}: the app already serves the REST route(s) {', '.join(shadowed)} "
                             f"({by}): give the tools different names, or mount this one with rest=False")
        transport = self.transport
        transport.install(app)
        # One /healthz and /readyz per app: every fusion mounted on it adds its checks to the first one's.
        readiness: ReadinessGroup | None = getattr(app.state, "mcpfusion_readiness", None)
        first = readiness is None
        if readiness is None:
            readiness = app.state.mcpfusion_readiness = ReadinessGroup()
            serve_offline(app)
        readiness.include(self.name, self.readiness)
        if self.authorization is not None:
            self.authorization.scope_sources.append(self._declared_scopes)
            self.authorization.install(app, self.registry, mcp_path=self.settings.path)
        if transport.shared is not None:
            self.readiness.add("redis", transport.shared.ping)
        redis_client = getattr(transport.shared, "client", None)
        if redis_client is not None:  # replicas share Redis (mcpfusion.redis): rate-limit buckets and spent
            from .redis.buckets import RedisBuckets  # confirmations too
            from .redis.spent import RedisSpent

            self.registry.guards.buckets = RedisBuckets(redis_client)
            self.registry.guards.spent = RedisSpent(redis_client)
        if first:
            app.router.add_api_route("/healthz", healthz, methods=["GET"], tags=["health"], summary="Liveness",
                                     response_model=None, responses=HEALTHZ_RESPONSES,
                                     route_class_override=HeadServedToo)
            ready = readyz_endpoint(readiness)
            app.router.add_api_route("/readyz", ready, methods=["GET"], tags=["health"],
                                     summary="Readiness: database, Redis and the app's own checks",
                                     responses=READYZ_RESPONSES, route_class_override=HeadServedToo)
            # HEAD wherever GET is served (RFC 9110), as probes may send it; undocumented (no second operation)
            app.add_api_route("/healthz", healthz, methods=["HEAD"], include_in_schema=False, response_model=None)
            app.add_api_route("/readyz", ready, methods=["HEAD"], include_in_schema=False)
        if self.telemetry is not None:
            self.telemetry.install(app)
        if collector.wanted(self.gc_tuning):
            app.router.lifespan_context = collector.serving(app.router.lifespan_context)
        # Said at start-up when a restart would refuse what the key signed: cursors and confirmation tokens.
        if self.settings.signing_key is None and any(a.paginate or a.confirm for a in self.registry.actions()):
            app.router.lifespan_context = warning_of_a_process_key(app.router.lifespan_context, self.name)
        # Outermost: a shutdown first waits for the calls' background tasks, then the app's pools close.
        app.router.lifespan_context = draining(self.registry.background, app.router.lifespan_context)
        self.rest_routes = rest  # (what the docs export reads: no REST route, no curl example nor try-it form)
        # Added after the bearer check, so it runs first: a foreign Host is refused before a 401 names its host.
        guarded = self._guard_paths(app, transport.guard, rest=rest, docs_path=docs_path)
        if rest:
            from .rest import add_rest_routes

            # (With the guard before routing, the routes need no check of their own.)
            add_rest_routes(app, self.registry, max_body_bytes=self.settings.max_body_bytes,
                            host_check=None if guarded else transport.guard.refusal)
        if docs is not None:
            from .docs.routes import add_docs_routes

            add_docs_routes(app, self.registry, path=docs, title=self.title or self.name,
                            host_check=transport.guard.refusal, rest=rest,
                            raw_tools=lambda: [t.descriptor for t in self.raw_tools.values()])
        # `mcpfusion` is the fusion an app built by one is found by; `mcpfusions` every one, in mount order, so
        # that the CLI and the tester reach each of several by name (with the app's overrides and state).
        app.state.mcpfusion = self
        app.state.mcpfusions = [*getattr(app.state, "mcpfusions", ()), self]
        self.app = app
        return app

    def _guard_paths(self, app: FastAPI, guard: HostOriginGuard, *, rest: bool, docs_path: str | None) -> bool:
        """Install the MCP endpoint's DNS-rebinding guard (`HostGuard`) on every path this fusion serves: its
        MCP path (with a trailing slash too), its REST routes, its tool docs and its OAuth metadata. False
        when the app has started already (no middleware can be added then): the REST routes check it then."""
        if app.middleware_stack is not None:
            return False
        mcp_path = self.settings.path.rstrip("/")
        exact = {mcp_path + "/": Guarded(mcp_refusal)}
        # The MCP path itself is the hot path, and its endpoint checks first thing: guarded here only when a
        # middleware (a bearer check, whose 401 names the host) would answer before the endpoint.
        if app.user_middleware:
            exact[mcp_path or "/"] = exact[mcp_path + "/"]
        prefixes: list[tuple[str, Guarded]] = []
        if rest:
            from .rest import serves_path

            served = Guarded(_problem_refusal, serves=serves_path(self.registry, "/api"))
            exact["/api"] = served
            prefixes.append(("/api/", served))
        page = Guarded(_problem_refusal, origin=False)  # read-only pages, read cross-origin: the Host only
        if docs_path is not None:
            exact.update(dict.fromkeys((docs_path, f"{docs_path}.json", f"{docs_path}.toon"), page))
            prefixes.append((docs_path + "/", page))
        if self.authorization is not None:
            from .authorization import WELL_KNOWN

            prefixes.append((WELL_KNOWN, page))
        app.add_middleware(HostGuard, guard=guard, exact=exact, prefixes=prefixes)
        return True

    def build_app(self, **fastapi_kwargs: Any) -> FastAPI:
        """A new FastAPI application with everything mounted."""
        fastapi_kwargs.setdefault("title", self.title or self.name)
        fastapi_kwargs.setdefault("version", self.version)
        if self.instructions:
            fastapi_kwargs.setdefault("description", self.instructions)
        if self.telemetry is None:
            return self.mount(FastAPI(**fastapi_kwargs))
        fastapi_kwargs.setdefault("telemetry", self.telemetry.fastapi_config(self.settings.path))
        app = FusionApp(**fastapi_kwargs)
        app.mcp_path = self.settings.path
        return self.mount(app)


class FusionApp(FastAPI):
    """What `build_app()` makes when telemetry is on: a FastAPI app whose MCP endpoint is kept out of FastAPI's
    own telemetry before FastAPI looks at the request (it skips a request whose scope already says), rather
    than by its `exclude` hook, which walks the middleware stack and switches the context on every request.
    The MCP spans stand for FastAPI's there; every other route keeps FastAPI's telemetry."""

    mcp_path: str | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("path") == self.mcp_path:
            scope.setdefault("fastapi.telemetry", None)
        await super().__call__(scope, receive, send)


def _problem_refusal(scope: Scope, status: int, reason: str) -> Response:
    """The Host guard's refusal (421 or 403) as problem details, as REST answers every error."""
    return http_problem_response(HTTPException(status, reason), Request(scope).url.path)


def _redis_stores(settings: TransportSettings) -> RedisStores | None:
    """The Redis stores of `settings.redis_url`, or None (imported lazily: in-memory servers never load redis)."""
    if not settings.redis_url:
        return None
    from .redis import from_url

    if settings.signing_key is None:
        logger.warning("MCPFUSION_REDIS_URL is set but MCPFUSION_SIGNING_KEY is not: each replica signs "
                       "2026-07-28 requestState with its own random key, so input-required rounds cannot "
                       "continue on another replica")
    try:
        return from_url(settings.redis_url, idle_timeout=settings.session_idle_timeout,
                        limits=settings.session_limits())
    except ValueError as exc:  # (redis-py's words; the URL itself is not repeated: it may hold a password)
        raise ValueError(f"MCPFUSION_REDIS_URL (redis_url) is not a Redis URL: {exc}") from None


def _context_of(call: Call) -> Context:
    """The handlers' `Context` for one MCP request."""
    meta = call.params.get("_meta")
    return Context(
        call.channel,
        request_id=call.id,
        session_id=call.session.id if call.session else None,
        protocol_version=call.protocol_version,
        client_capabilities=call.client_capabilities,
        client_info=call.client_info,
        meta=meta if isinstance(meta, dict) else None,
        transport="mcp",
    )


def _completion_call(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The engine's call of a completion function: `value` and `arguments` by name, its dependencies solved
    against the MCP request (`request`, None outside a transport) by the machinery prompts use."""
    injected = Injected(fn)
    # Only `value` and `arguments` are ever given: any other required argument would fail every call.
    missing = [p.name for p in injected.arguments
               if p.name not in ("value", "arguments") and p.default is inspect.Parameter.empty]
    if missing:
        raise TypeError(f"completion function {getattr(fn, '__name__', fn)!r}: {', '.join(missing)} is neither "
                        "`value`, `arguments` nor a dependency (Depends, Header, Context...): give it a default")

    async def call(value: str, arguments: dict[str, Any], request: Request | None = None) -> Any:
        return await call_injected(injected, {"value": value, "arguments": arguments}, None, request, _same)

    return call


def _same(value: Any) -> Any:
    return value


def _doc(fn: Callable[..., Any]) -> str | None:
    doc = (fn.__doc__ or "").strip()
    return doc or None
