"""The MCP protocol engine: one method table for every wire, transport-agnostic.

A transport parses a JSON-RPC request into a `Call` and awaits `Engine.handle(call)`, which returns the
result dict or raises `McpError`. Tool calls go through the `ToolBackend`; the per-call context handed to
tools, resources and prompts is built by `make_context` (given by the composition), so the engine never
imports the layer that defines it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any, Protocol

from starlette.requests import Request

from ..visible import visible_name, visible_path
from . import jsonrpc, protocol
from .backend import PromptBackend, ResourceBackend, ToolBackend
from .callables import invoke
from .channel import LOG_RANK, Channel, InputRequired, InputResponsesChannel
from .jsonrpc import EncodedList, McpError
from .params import check_params
from .sessions import Session
from .state import RequestStateSigner, attach_round, round_of
from .wire import caller_key

# Methods each wire serves; anything else is -32601 there.
SESSION_METHODS = frozenset({
    "initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/templates/list",
    "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
    "completion/complete", "logging/setLevel",
})
MODERN_METHODS = frozenset({
    "server/discover", "tools/list", "tools/call", "resources/list", "resources/templates/list",
    "resources/read", "prompts/list", "prompts/get", "completion/complete", "subscriptions/listen",
})
LISTING_CACHE_SIZE = 64  # views of the tools kept (one per set of granted scopes seen recently)
CACHEABLE = frozenset({"tools/list", "resources/list", "resources/templates/list", "resources/read",
                       "prompts/list", "server/discover"})
YIELD_EVERY = 64  # URIs a subscriptions/listen checks between two turns of the event loop
ECHO_MAX = 120  # characters of a name the client sent that an error repeats (as unknown tool names are cut)


@functools.cache
def _notification_methods() -> frozenset[str]:
    """Every notification method of the protocol, either way and in any revision (read when a request names
    one: a method that exists, sent with an id by mistake, is told so rather than "Method not found")."""
    from mcp_types.methods import CLIENT_NOTIFICATIONS, SERVER_NOTIFICATIONS

    return frozenset(method for method, _ in (*CLIENT_NOTIFICATIONS, *SERVER_NOTIFICATIONS))


def _echoed(name: str) -> str:
    """`name` as an error may repeat it: a method name sent can be megabytes, and its control, bidi and format
    characters are escaped (`visible_name`: U+202E would show the rest of the error reversed)."""
    return visible_name(name if len(name) <= ECHO_MAX else name[:ECHO_MAX - 3] + "...")


class Call:
    """One JSON-RPC request as the engine sees it. `envelope`: `params.envelope_key(params)` when the wire
    already worked it out (the params check reuses it).

    A plain slotted class, not a dataclass: a dataclass compiles its generated methods when the module is
    imported (a cost of every process's start); a request needs only the attributes."""

    __slots__ = ("method", "params", "id", "request", "channel", "protocol_version", "session", "modern",
                 "client_capabilities", "client_info", "envelope")

    def __init__(self, method: str, params: dict[str, Any], id: Any, request: Request, channel: Channel,  # noqa: A002
                 protocol_version: str | None = None, session: Session | None = None, modern: bool = False,
                 client_capabilities: dict[str, Any] | None = None, client_info: dict[str, Any] | None = None,
                 envelope: bytes | None = None) -> None:
        self.method = method
        self.params = params
        self.id = id
        self.request = request
        self.channel = channel
        # Read on first use: the protocol constants come from `mcp_types`, loaded by the first MCP request.
        self.protocol_version: str = protocol.LATEST_HANDSHAKE_VERSION if protocol_version is None else protocol_version
        self.session = session
        self.modern = modern
        self.client_capabilities: dict[str, Any] = {} if client_capabilities is None else client_capabilities
        self.client_info: dict[str, Any] = {} if client_info is None else client_info
        self.envelope = envelope


Completion = Callable[..., Any]
Handler = Callable[["Call"], Awaitable[dict[str, Any]]]


class RequestObserver(Protocol):
    """Wraps every request the engine handles (telemetry): it must await `run(call)` and return its result."""

    async def observe_request(self, call: Call, run: Handler) -> dict[str, Any]: ...


def _no_context(call: Call) -> None:
    return None


class Engine:
    """Capabilities, method dispatch and result shaping for one MCP server."""

    def __init__(
        self,
        *,
        name: str,
        version: str,
        tools: ToolBackend,
        resources: ResourceBackend | None = None,
        prompts: PromptBackend | None = None,
        completions: dict[tuple[str, str, str], Completion] | None = None,
        instructions: str | None = None,
        title: str | None = None,
        signer: RequestStateSigner | None = None,
        cache_ttl_ms: int = 0,
        cache_scope: str = "private",
        make_context: Callable[[Call], Any] = _no_context,
        observer: RequestObserver | None = None,
        max_subscriptions: int = 100,
        max_uri_length: int = 2048,
    ) -> None:
        self.server_info: dict[str, Any] = {"name": name, "version": version}
        if title:
            self.server_info["title"] = title
        self.instructions = instructions
        self.tools = tools
        self.resources = resources
        self.prompts = prompts
        self.completions = completions if completions is not None else {}
        self.signer = signer or RequestStateSigner(None)
        self.cache_ttl_ms = cache_ttl_ms
        self.cache_scope = cache_scope
        self.make_context = make_context
        self.observer = observer
        # The cached listings of the server, one per view of the tools (a caller's OAuth scopes may hide some:
        # the backend's `listing_key(request)`), least recently used dropped first: `tools/list` entries, and
        # the input schemas of the tools that declare `x-mcp-header` (what 2026-07-28 checks `Mcp-Param-*`
        # headers against).
        self._tools_cache: OrderedDict[Hashable, tuple[list[dict[str, Any]], dict[str, Any]]] = OrderedDict()
        # Whether any tool declares `x-mcp-header` in the whole listing (None: not known yet). Every caller's
        # view is a part of it: without any, a call has no header to check and no view to look up.
        self.any_header: bool | None = None
        self.max_subscriptions = max_subscriptions
        self.max_uri_length = max_uri_length
        self._handlers: dict[str, Callable[[Call], Awaitable[dict[str, Any]]]] = {
            "ping": self._ping,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._resources_read,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "completion/complete": self._complete,
            "logging/setLevel": self._set_level,
            "server/discover": self._discover,
        }

    # -- capabilities ---------------------------------------------------------------------------------

    def capabilities(self, modern: bool = False) -> dict[str, Any]:
        caps: dict[str, Any] = {"tools": {"listChanged": True}}
        if self.resources is not None and self.resources:
            caps["resources"] = {"listChanged": True} if modern else {"subscribe": True, "listChanged": True}
        if self.prompts is not None and self.prompts:
            caps["prompts"] = {"listChanged": True}
        if self.completions:
            caps["completions"] = {}
        caps["logging"] = {}
        return caps

    def invalidate_tools(self) -> None:
        """Forget the precomputed `tools/list` (call after adding or removing tools)."""
        self._tools_cache.clear()
        self.any_header = None

    def initialize_result(self, protocol_version: str) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": protocol_version,
            "capabilities": self.capabilities(),
            "serverInfo": self.server_info,
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    @staticmethod
    def negotiate(requested: Any) -> str:
        """The handshake version to answer an `initialize` with: the client's if supported, else latest."""
        return requested if requested in protocol.HANDSHAKE_PROTOCOL_VERSIONS else protocol.LATEST_HANDSHAKE_VERSION

    # -- dispatch -------------------------------------------------------------------------------------

    async def handle(self, call: Call) -> dict[str, Any]:
        """The result of one request, through the observer when there is one (a wire with no observer to go
        through calls `dispatch` itself: one frame less per request)."""
        observer = self.observer
        if observer is not None:
            return await observer.observe_request(call, self.dispatch)
        return await self.dispatch(call)

    async def dispatch(self, call: Call) -> dict[str, Any]:
        """The result of one request from its method's handler (its params checked first), stamped as the
        2026-07-28 wire wants it; an `McpError` for a method this wire does not serve."""
        allowed = MODERN_METHODS if call.modern else SESSION_METHODS
        handler = self._handlers.get(call.method) if call.method in allowed else None
        if handler is None:
            if call.method in _notification_methods():
                raise McpError(jsonrpc.INVALID_REQUEST, f"Invalid request: {call.method} is a notification: send it "
                               "without an id (a request with an id expects an answer, which a notification has not)")
            raise McpError(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {_echoed(call.method)}")
        check_params(call.method, call.protocol_version, call.params, call.envelope)
        result = await handler(call)
        if call.modern:
            if "resultType" not in result:
                result["resultType"] = "complete"
            if call.method in CACHEABLE and result["resultType"] == "complete":
                result.setdefault("ttlMs", self.cache_ttl_ms)
                result.setdefault("cacheScope", self.cache_scope)
        return result

    # -- methods --------------------------------------------------------------------------------------

    async def _ping(self, call: Call) -> dict[str, Any]:
        return {}

    async def _discover(self, call: Call) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(protocol.SERVED_PROTOCOL_VERSIONS),
            "capabilities": self.capabilities(modern=True),
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    def _listing(self, request: Request | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        keyed = getattr(self.tools, "listing_key", None)
        key = keyed(request) if keyed is not None and request is not None else None
        cache = self._tools_cache
        cached = cache.get(key)
        if cached is None:
            # Sent as it is to every caller of this view: kept with its JSON bytes once encoded.
            tools = EncodedList(self.tools.list_tools(key) if key is not None else self.tools.list_tools())
            headers = {t["name"]: t.get("inputSchema") for t in tools if "x-mcp-header" in repr(t.get("inputSchema"))}
            cached = cache[key] = (tools, headers)
            if len(cache) > LISTING_CACHE_SIZE:
                cache.popitem(last=False)
        else:
            cache.move_to_end(key)
        return cached

    def header_schema(self, name: Any, request: Request | None = None) -> Any:
        """Input schema of tool `name` (as the caller of `request` sees it) if it declares `x-mcp-header`
        anywhere (else None: nothing to check)."""
        any_header = self.any_header
        if any_header is None:
            any_header = self.any_header = bool(self._listing(None)[1])
        if not any_header or not isinstance(name, str):
            return None
        return self._listing(request)[1].get(name)

    async def _tools_list(self, call: Call) -> dict[str, Any]:
        _one_page(call)
        return {"tools": self._listing(call.request)[0]}

    async def _tools_call(self, call: Call) -> dict[str, Any]:
        params = call.params
        name = params.get("name")
        if not isinstance(name, str) or not name:
            raise McpError(jsonrpc.INVALID_PARAMS, "tools/call needs the tool's name: a non-empty string 'name'")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            raise McpError(jsonrpc.INVALID_PARAMS, "tools/call 'arguments' must be an object")
        return await self._with_input(call, name, self.tools.call_tool, name, arguments, call.request,
                                      self.make_context(call))

    async def _with_input(
        self, call: Call, name: str, run: Callable[..., Awaitable[dict[str, Any]]], *args: Any
    ) -> dict[str, Any]:
        """Run user code (`run(*args)`). A protocol error it raised through the context wins over its result; on
        the 2026 wire, questions it could not get answered become an input-required result."""
        channel = call.channel
        inputs = channel if isinstance(channel, InputResponsesChannel) else None  # the 2026 wire's
        if inputs is not None:
            params = call.params
            sent_state = params.get("requestState")
            previous, state, carried = ({}, None, {}) if sent_state is None else \
                self.signer.verify_round(sent_state, call.method, name, caller_key(call.request))
            responses = params.get("inputResponses")
            if responses is not None and not isinstance(responses, dict):
                raise McpError(jsonrpc.INVALID_PARAMS, "'inputResponses' must be an object")
            inputs.responses = {**previous, **(responses or {})}
            inputs.previous_state = state
            if carried:  # the framework's own round data, next to the handler's state (else made on first use)
                attach_round(inputs, carried)
        try:
            result = await run(*args)
        except (InputRequired, McpError) as exc:
            # Raised by the context (not swallowed by the handler framework): the channel has it recorded.
            if isinstance(exc, McpError) and channel.failure is None:
                raise
            result = {}
        if channel.failure is not None:
            raise channel.failure
        if inputs is None or inputs.pending is None:
            return result
        # The handler asked the client something: whatever it returned after the failed ask is void.
        answered = {k: v for k, v in inputs.responses.items() if k not in inputs.pending}
        this_round = round_of(inputs)
        token = self.signer.sign(call.method, name, answered, inputs.next_state, caller_key(call.request),
                                 this_round.leaving if this_round is not None else None)
        return {"resultType": "input_required", "inputRequests": inputs.pending, "requestState": token}

    async def _resources_list(self, call: Call) -> dict[str, Any]:
        _one_page(call)
        return {"resources": self.resources.list(call.request) if self.resources is not None else []}

    async def _templates_list(self, call: Call) -> dict[str, Any]:
        _one_page(call)
        return {"resourceTemplates": self.resources.list_templates(call.request) if self.resources is not None else []}

    async def _resources_read(self, call: Call) -> dict[str, Any]:
        resources = self.resources
        if resources is None:
            raise McpError(jsonrpc.INVALID_PARAMS, "This server has no resources")
        await _charge(resources, call)
        uri = call.params.get("uri")
        if isinstance(uri, str) and len(uri) > self.max_uri_length:  # never echoed back at any length
            raise McpError(jsonrpc.INVALID_PARAMS, f"'uri' is longer than {self.max_uri_length} characters")
        try:
            return await self._with_input(
                call, uri if isinstance(uri, str) else "",
                lambda: resources.read(uri, self.make_context(call), call.request),
            )
        except McpError as exc:
            missing = _not_found(exc, call, uri, resources)
            if missing is None:
                raise
            raise missing from None

    async def _subscribe(self, call: Call) -> dict[str, Any]:
        """Subscribe the session to `uri` once the caller has read it: a subscription tells of changes to data,
        so only a caller who may read the data is told (whatever decides it: scopes, or the tenancy only the
        resource's function knows). The read answers the call's errors, as `resources/read` would."""
        uri = self._subscription_uri(call)
        resources = self.resources
        if resources is not None:  # one charge, as `resources/read`: the read below runs the app's code
            await _charge(resources, call)
        if resources is None or not resources.exists(uri, call.request):
            # The code resources/read answers for the same URI.
            raise McpError(_not_found_code(call), f"Resource not found: {visible_name(uri)}: subscribe to a listed "
                           "resource or one of its templates", {"uri": visible_path(uri)})
        try:
            await self._with_input(call, uri, lambda: resources.read(uri, self.make_context(call), call.request))
        except McpError as exc:  # the code the read answers
            missing = _not_found(exc, call, uri, resources)
            if missing is None:
                raise
            raise missing from None
        session = call.session
        if session is not None and uri not in session.subscriptions:
            if len(session.subscriptions) >= self.max_subscriptions:
                raise McpError(jsonrpc.INVALID_PARAMS, f"A session may hold at most {self.max_subscriptions} "
                               "subscriptions; unsubscribe from one first")
            session.subscriptions.append(uri)
        return {}

    async def allowed_subscriptions(self, uris: Any, call: Call) -> list[str]:
        """The resource URIs of a 2026 `subscriptions/listen` this server honours: bounded in length and
        number, and read successfully by the caller (as `resources/subscribe` checks; any failure drops the
        URI, which the acknowledgement then leaves out). The wire bounds the list's length
        (`TransportSettings.max_listen_uris`), and the event loop serves other requests every `YIELD_EVERY`
        URIs. Charged once, before any read, as `resources/read` is: -32010 over the app's rate limit, and no
        reader runs."""
        if not isinstance(uris, list) or self.resources is None:
            return []
        wanted = [u for u in dict.fromkeys(u for u in uris if isinstance(u, str)) if len(u) <= self.max_uri_length]
        if wanted:  # (the reads run the app's code: one request's worth, whatever the number of URIs)
            await _charge(self.resources, call)
        honored: list[str] = []
        for checked, uri in enumerate(wanted):
            if len(honored) >= self.max_subscriptions:
                break
            if checked and not checked % YIELD_EVERY:  # reads that never wait would hold the event loop
                await asyncio.sleep(0)
            if self.resources.exists(uri, call.request) and await self._readable(uri, call):
                honored.append(uri)
        return honored

    async def _readable(self, uri: str, call: Call) -> bool:
        """Whether the caller of `call` can read `uri` now (the contents are dropped)."""
        assert self.resources is not None
        try:
            await self.resources.read(uri, self.make_context(call), call.request)
        except Exception:  # noqa: BLE001 - whatever the read raised, this caller is not told of the URI
            return False
        return True

    async def _unsubscribe(self, call: Call) -> dict[str, Any]:
        uri = self._subscription_uri(call)
        session = call.session
        if session is not None and uri in session.subscriptions:
            session.subscriptions.remove(uri)
        return {}

    def _subscription_uri(self, call: Call) -> str:
        uri = call.params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise McpError(jsonrpc.INVALID_PARAMS, f"{call.method} needs a non-empty string 'uri'")
        if len(uri) > self.max_uri_length:
            raise McpError(jsonrpc.INVALID_PARAMS, f"'uri' is longer than {self.max_uri_length} characters")
        return uri

    async def _prompts_list(self, call: Call) -> dict[str, Any]:
        _one_page(call)
        return {"prompts": self.prompts.list(call.request) if self.prompts is not None else []}

    async def _prompts_get(self, call: Call) -> dict[str, Any]:
        prompts = self.prompts
        if prompts is None:
            raise McpError(jsonrpc.INVALID_PARAMS, "This server has no prompts")
        await _charge(prompts, call)
        name = call.params.get("name")
        return await self._with_input(
            call, name if isinstance(name, str) else "",
            lambda: prompts.get(name, call.params.get("arguments"), self.make_context(call), call.request),
        )

    async def _complete(self, call: Call) -> dict[str, Any]:
        if not self.completions:  # not among the capabilities: the method is not served
            raise McpError(jsonrpc.METHOD_NOT_FOUND, "Method not found: completion/complete (this server offers "
                           "no completions)")
        await _charge(self.prompts if self.prompts is not None else self.resources, call)  # (one app's limits)
        ref = call.params.get("ref")
        argument = call.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise McpError(jsonrpc.INVALID_PARAMS, "completion/complete needs 'ref' and 'argument' objects")
        kind = ref.get("type")
        target = ref.get("name") if kind == "ref/prompt" else ref.get("uri") if kind == "ref/resource" else None
        arg_name, value = argument.get("name"), argument.get("value", "")
        if (not isinstance(kind, str) or not isinstance(target, str) or not isinstance(arg_name, str)
                or not isinstance(value, str)):
            raise McpError(jsonrpc.INVALID_PARAMS, "completion/complete: ref needs a type ref/prompt (name) or "
                           "ref/resource (uri), and argument needs string 'name' and 'value'")
        self._check_completion_target(kind, target, call.request)
        context = call.params.get("context")
        context_args = context.get("arguments") if isinstance(context, dict) else None
        if not isinstance(context_args, dict):
            context_args = {}
        fn = self.completions.get((kind, target, arg_name))
        values: Any = [] if fn is None else await invoke(
            fn, {"value": value, "arguments": context_args, "request": call.request})
        return {"completion": _completion(values, f"completion of {target!r} argument {_echoed(arg_name)!r}")}

    def _check_completion_target(self, kind: str, target: str, request: Any) -> None:
        if kind == "ref/prompt":
            if self.prompts is None or self.prompts.find(target, request) is None:
                raise McpError(jsonrpc.INVALID_PARAMS, f"Unknown prompt {target!r}")
        elif self.resources is None or (
            # A template by its exact text, or a static resource by its URI: never a URI that some other (visible)
            # template happens to match, which would run a hidden template's completion.
            self.resources.template(target, request) is None
            and not (target in self.resources.resources and self.resources.exists(target, request))
        ):
            raise McpError(jsonrpc.INVALID_PARAMS, f"Unknown resource template {target!r}")

    async def _set_level(self, call: Call) -> dict[str, Any]:
        level = call.params.get("level")
        if level not in LOG_RANK:
            raise McpError(jsonrpc.INVALID_PARAMS, f"Unknown log level {level!r}; use one of " + ", ".join(LOG_RANK))
        if call.session is not None:
            call.session.log_level = level
        return {}


__all__ = ["Call", "Engine", "check_params"]


def _completion(values: Any, where: str) -> dict[str, Any]:
    """What a completion function returned as MCP's `Completion` (at most 100 values): a list of values, or a
    `{values, total, hasMore}` dict checked against `mcp_types` (a client's SDK would refuse anything else, so
    it is logged, where it is wrong but never its values, and answered -32603)."""
    from mcp_types import CompleteResult
    from pydantic import ValidationError

    if values is None:
        values = []
    if isinstance(values, Iterable) and not isinstance(values, dict | str | bytes):
        items = [str(v) for v in values]
        return {"values": items[:100], "total": len(items), "hasMore": len(items) > 100}
    try:  # (a str is refused too: never sent as its characters)
        completion = CompleteResult.model_validate({"completion": values}).completion
    except ValidationError as exc:
        wrong = sorted({".".join(map(str, e["loc"][:3])) for e in exc.errors()})
        logging.getLogger("mcpfusion").error("%s returned a result MCP cannot carry at %s", where, wrong)
        raise McpError(jsonrpc.INTERNAL_ERROR, f"The {where} returned a result MCP cannot carry: a completion "
                       "returns a list of strings or a {values, total, hasMore} dict") from None
    if len(completion.values) > 100:
        completion.values = completion.values[:100]
        completion.has_more = True if completion.has_more is None else completion.has_more
    return completion.model_dump(mode="json", by_alias=True, exclude_none=True)


def _not_found_code(call: Call) -> int:
    """The JSON-RPC code of an unknown resource URI: -32602 (with data.uri) on 2026-07-28 (SEP-2164), -32002
    on the handshake revisions (2025-11-25 and older: "Resource not found: -32002")."""
    return jsonrpc.INVALID_PARAMS if call.modern else jsonrpc.RESOURCE_NOT_FOUND


def _not_found(exc: McpError, call: Call, uri: Any, resources: ResourceBackend) -> McpError | None:
    """The error a read's -32602 `exc` becomes when it says `uri` was not found, with the code the call's
    revision gives a missing resource (else None: `exc` stands). Either the URI is unknown (told apart from
    the resource's own -32602 by the lookup), or the template's function found nothing (a NOT_FOUND
    `ToolError`): the same -32002 on the handshake revisions. Either way `data.uri` names it (on 2026-07-28 too,
    where the code is already -32602)."""
    if exc.code != jsonrpc.INVALID_PARAMS or not isinstance(uri, str) or not uri:
        return None
    code = _not_found_code(call)
    if not resources.exists(uri, call.request):
        return None if code == exc.code else McpError(code, exc.message, exc.data)
    data = exc.data  # (`mcpfusion.errors.NOT_FOUND`, as `call_injected` puts it)
    if isinstance(data, dict) and data.get("code") == "NOT_FOUND":
        return McpError(code, exc.message, {**data, "uri": visible_path(uri)})
    return None


async def _charge(backend: Any, call: Call) -> None:
    """Count `call` against the app's rate limits as a tool call is counted (the backend's `charge`, when it
    has one): reading a resource or a prompt runs the app's code too. -32010 (status 429) over the limit."""
    charge = getattr(backend, "charge", None)
    if charge is not None:
        await charge(call.request, call.method)


def _one_page(call: Call) -> None:
    """A listing answers everything in one page and never gives a `nextCursor`: any cursor sent is one this
    server did not issue (-32602, as the specification asks for an invalid cursor)."""
    cursor = call.params.get("cursor")
    if cursor is not None:
        raise McpError(jsonrpc.INVALID_PARAMS, "Invalid cursor: this server lists everything in one page and "
                       "never issues one. Call again without cursor.")
