"""`/mcp` as plain FastAPI routes (POST, GET, DELETE): middleware, exception handlers and
`app.dependency_overrides` apply to MCP exactly as to REST.

One endpoint serves every revision. A request goes to the sessionless 2026-07-28 wire when its
`MCP-Protocol-Version` header names a 2026 version, or an unknown one with the 2026 `_meta` envelope and no
session (the ladder tells a header and envelope that disagree), or when it has no such header but carries the
envelope and no session; everything else is the handshake-era session wire. An unknown version in the header
of a request with neither a session nor an envelope is answered here: the structured -32022, naming the
header and every version served (`unsupported_header`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Protocol

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

try:  # FastAPI's own route wrapping for a route's `max_body_size` (a private module: should it move, the
    # route keeps FastAPI's whole wrapping)
    from fastapi._body_limit import wrap_app_with_body_limit
except ImportError:  # pragma: no cover - present in every FastAPI the package allows
    wrap_app_with_body_limit = None  # type: ignore[assignment]

from mcpfusion.body import (
    BodyTooLarge,
    InvalidJSON,
    announces_body,
    charset_not_utf8,
    closing,
    drain,
    expects_continue,
    is_identity_encoding,
    is_json_media_type,
    left_unread,
    parse_json,
    read_body,
)

from . import jsonrpc, protocol
from .broker import Broker, InMemoryBroker, publish_best_effort
from .engine import Engine
from .events import EventStore, InMemoryEventStore
from .modern import ModernWire, served_versions_data, unsupported_version_text
from .pipeline import invalid_request
from .security import HostOriginGuard
from .session_wire import SessionWire
from .sessions import InMemorySessionStore, SessionStore
from .settings import TransportSettings
from .streams import is_response
from .wire import (
    TRANSPORT_SCOPE_KEY,
    any_repeated,
    error_response,
    header,
    http_error,
    repeated,
    shown_header,
)


class McpRoute(APIRoute):
    """An `APIRoute` whose endpoint takes only the `Request`.

    When the app declares no route dependencies (`FastAPI(dependencies=[...])`), there is nothing for
    FastAPI's per-request parameter solving to do, and skipping it saves a third of the MCP round trip;
    with route dependencies the regular handler runs them. Middleware, exception handlers and
    `dependency_overrides` (used by the tools' own dependencies) apply either way.

    Without route dependencies the endpoint is also served as a plain ASGI app within the route's body limit,
    without the two exit stacks FastAPI opens around every request for the dependencies it solves (the tools'
    dependencies are solved on a stack of their own: `mcpfusion.dependencies.resolve`) nor the exception
    wrapper Starlette puts around each route (`_served`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.dependant.dependencies and wrap_app_with_body_limit is not None:
            self.app = wrap_app_with_body_limit(_served(self.endpoint), self.max_body_size)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        if self.dependant.dependencies:
            return super().get_route_handler()
        return self.endpoint


def _served(endpoint: Callable[[Request], Coroutine[Any, Any, Response]]) -> Callable[..., Any]:
    """`endpoint` as an ASGI app. What it raises reaches the app's `ExceptionMiddleware`, which answers it with
    the same handlers Starlette's per-route wrapper would (`request_response`): between the two stand only
    FastAPI's router and its exit stack middleware, whose stack this route leaves empty. Without that wrapper
    a call makes three closures, three frames and a wrapped `send` fewer."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        response = await endpoint(Request(scope, receive, send))
        await response(scope, receive, send)

    return app


def _media_type_refusal(content_type: str | None) -> Response | None:
    """The 415 for a POST whose Content-Type is not JSON, or JSON in a charset other than UTF-8."""
    if not is_json_media_type(content_type):
        return http_error(415, "Unsupported Media Type: send the JSON-RPC message as application/json")
    charset = charset_not_utf8(content_type)
    if charset is not None:
        return http_error(415, "Unsupported Media Type: send the JSON-RPC message as UTF-8 "
                               f"(charset={charset[:40]} is not read)")
    return None


def _is_modern_body(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and protocol.PROTOCOL_VERSION_META_KEY in meta


class SharedStores(Protocol):
    """Stores shared by the replicas of a server (e.g. `mcpfusion.redis.RedisStores`), closed with the app."""

    @property
    def sessions(self) -> SessionStore: ...

    @property
    def events(self) -> EventStore: ...

    @property
    def broker(self) -> Broker: ...

    async def aclose(self) -> None: ...

    async def ping(self) -> Any:
        """Readiness: raise while the shared store is unreachable."""


class McpHttpTransport:
    """The streamable HTTP transport of one `Engine`. `shared` stores serve what the settings do not set
    explicitly (`session_store`, `event_store`, `broker`) and are closed with the app's lifespan."""

    def __init__(
        self, engine: Engine, settings: TransportSettings | None = None, shared: SharedStores | None = None
    ) -> None:
        self.engine = engine
        self.settings = settings = settings or TransportSettings()
        self.shared = shared
        # Chosen by `is None`, never by truth: an in-memory session store is falsy while it holds no session.
        self.sessions: SessionStore = _first(
            settings.session_store, shared and shared.sessions,
            lambda: InMemorySessionStore(settings.session_idle_timeout, limits=settings.session_limits()))
        self.events: EventStore = _first(settings.event_store, shared and shared.events, InMemoryEventStore)
        self.broker: Broker = _first(settings.broker, shared and shared.broker, InMemoryBroker)
        self.guard = HostOriginGuard(settings.allowed_hosts, settings.allowed_origins)
        self.session_wire = SessionWire(engine, settings, self.sessions, self.events, self.broker)
        self.modern_wire = ModernWire(engine, settings, self.broker)

    def install(self, app: FastAPI) -> None:
        path = self.settings.path
        for endpoint, method in ((self.post, "POST"), (self.get, "GET"), (self.delete, "DELETE")):
            app.router.add_api_route(path, endpoint, methods=[method], include_in_schema=False,
                              name=f"mcp_{method.lower()}", route_class_override=McpRoute)
        # Any other method gets the endpoint's own refusal, naming every method it serves (Starlette's would
        # name the first route's alone, in a body that is not JSON-RPC).
        app.router.add_route(path, _method_not_allowed, methods=OTHER_METHODS, include_in_schema=False,
                             name="mcp_other")
        # The MCP endpoint is the hot path: match it before /openapi.json, /docs and the app's own routes.
        routes = app.router.routes
        mcp_routes = routes[-4:]
        del routes[-4:]
        routes[:0] = mcp_routes
        if self.shared is not None:
            app.router.lifespan_context = self._closing(app.router.lifespan_context)

    def _closing(self, inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """The app's lifespan, followed by closing the shared stores (pub/sub reader, connection pool)."""
        shared = self.shared
        assert shared is not None

        @asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[Any]:
            async with inner(app) as state:
                try:
                    yield state
                finally:
                    await shared.aclose()

        return lifespan

    def invalidate(self) -> None:
        """Forget precomputed tool data (after the tool list changed)."""
        self.engine.invalidate_tools()

    async def publish(self, message: dict[str, Any]) -> None:
        """Broadcast a server notification to every GET stream and `subscriptions/listen` stream."""
        await publish_best_effort(self.broker, "server", message)  # the action that sent it has done its work

    def _refuse(self, request: Request) -> Response | None:
        host, origin = header(request, b"host"), header(request, b"origin")
        # The stdio bridge calls in process: no network peer, nothing for DNS rebinding to reach.
        if request.scope.get(TRANSPORT_SCOPE_KEY) == "stdio" or self.guard.check(host, origin) is None:
            if repeated(request, b"authorization"):
                # Login and session check could otherwise read different credentials.
                return http_error(400, "Bad Request: send exactly one Authorization header")
            return None
        refusal = self.guard.refusal(host, origin)
        assert refusal is not None  # the same verdict, with its status
        return http_error(*refusal)

    def _unread(self, request: Request) -> Response | None:
        """The refusal of a POST decided before its body is read (Host, Origin, Authorization, media type)."""
        refusal = self._refuse(request)
        if refusal is not None:
            return refusal
        content_type = header(request, b"content-type")
        if content_type != "application/json":  # (what nearly every client sends: nothing to look into)
            refusal = _media_type_refusal(content_type)
            if refusal is not None:
                return refusal
        encoding = header(request, b"content-encoding")
        if encoding is not None and not is_identity_encoding(encoding):
            return http_error(415, "Unsupported Media Type: send the body uncompressed (no Content-Encoding)")
        return None

    async def post(self, request: Request) -> Response:
        refusal = self._unread(request)
        if refusal is not None:
            # Its body is read and dropped (up to the limit) so that the connection serves the client's next
            # request; one longer than that is left unread, and the client told not to reuse the connection (so is
            # one that waits for `100 Continue`: it has sent nothing, and reading would ask it for the body).
            if announces_body(request.scope) and (
                    expects_continue(request.scope)
                    or not await drain(request.receive, self.settings.max_body_bytes)):
                return closing(refusal)
            return refusal
        try:
            body = await read_body(request, self.settings.max_body_bytes)
        except BodyTooLarge:
            refusal = http_error(413, f"Payload Too Large: the limit is {self.settings.max_body_bytes} bytes")
            return closing(refusal) if left_unread(request.scope) else refusal
        except ClientDisconnect:  # gone while sending its body: nobody to answer (and nothing to log)
            return Response(status_code=400)
        try:
            message = parse_json(body)  # pydantic-core: about 3x json.loads on request-sized bodies
        except InvalidJSON as exc:
            return error_response(None, jsonrpc.PARSE_ERROR, f"Parse error: {exc.reason}", status=400)
        version = header(request, b"mcp-protocol-version")
        if version is not None:
            version = version.strip()
            # An unknown version with a session id is a session client's: its wire says the version is
            # unsupported (the 2026 wire would ask for a _meta envelope it never heard of).
            if version not in protocol.HANDSHAKE_PROTOCOL_VERSIONS and (
                    version in protocol.MODERN_PROTOCOL_VERSIONS or header(request, b"mcp-session-id") is None):
                if version in protocol.MODERN_PROTOCOL_VERSIONS or _is_modern_body(message) \
                        or not isinstance(message, dict) or is_response(message):
                    return await self.modern_wire.post(request, message)
                # Neither wire's client for sure (no session, no envelope): the header's version is unsupported,
                # said so with every version served, whatever the rest of the request would need on either.
                return unsupported_header(message, version)
        elif _is_modern_body(message) and header(request, b"mcp-session-id") is None:
            return await self.modern_wire.post(request, message)
        if _repeats_session_headers(request):
            return http_error(400, "Bad Request: send the MCP-Protocol-Version and Mcp-Session-Id headers once each")
        return await self.session_wire.post(request, message, version)

    async def get(self, request: Request) -> Response:
        return self._session_only(request) or await self.session_wire.get(request)

    async def delete(self, request: Request) -> Response:
        return self._session_only(request) or await self.session_wire.delete(request)

    def _session_only(self, request: Request) -> Response | None:
        """GET and DELETE exist on the session wire only (2026-07-28 uses POST; subscriptions/listen
        replaces the GET stream)."""
        refusal = self._refuse(request)
        if refusal is not None:
            return refusal
        version = header(request, b"mcp-protocol-version")
        if version is not None and (version := version.strip()) not in protocol.HANDSHAKE_PROTOCOL_VERSIONS:
            if version in protocol.MODERN_PROTOCOL_VERSIONS:
                return Response(status_code=405, headers={"Allow": "POST"})
            # As POST answers it (the specification: an unsupported version is a 400).
            return error_response(None, jsonrpc.INVALID_REQUEST,
                                  f"Unsupported MCP-Protocol-Version: {shown_header(version)}", status=400)
        if _repeats_session_headers(request):
            return http_error(400, "Bad Request: send the MCP-Protocol-Version and Mcp-Session-Id headers once each")
        return None


def unsupported_header(message: dict[str, Any], version: str) -> Response:
    """The answer to a request or notification without a session whose MCP-Protocol-Version header names a
    version this server does not serve (and whose body carries no 2026 envelope): the structured -32022 of the
    2026-07-28 wire (a 400), its data naming the version sent and every version served (as `server/discover`
    does), its message saying the version was read from the header. A message that is no JSON-RPC request is
    told that first."""
    refusal = invalid_request(message)
    if refusal is not None:
        return refusal
    return error_response(message.get("id"), jsonrpc.UNSUPPORTED_PROTOCOL_VERSION,
                          unsupported_version_text(shown_header(version), "the MCP-Protocol-Version header"),
                          served_versions_data(version.encode("latin-1").decode("utf-8", "backslashreplace")))


def _first(explicit: Any, shared: Any, default: Callable[[], Any]) -> Any:
    """The store set explicitly, else the shared one, else a new `default()`."""
    if explicit is not None:
        return explicit
    return shared if shared is not None else default()


async def _method_not_allowed(request: Request) -> Response:
    response = http_error(405, f"Method Not Allowed: {request.method} (the MCP endpoint serves {ALLOWED_METHODS})")
    response.headers["Allow"] = ALLOWED_METHODS
    return response


ALLOWED_METHODS = "GET, POST, DELETE"
OTHER_METHODS = ["HEAD", "PUT", "PATCH", "OPTIONS", "TRACE", "CONNECT"]  # (FastAPI's GET route takes no HEAD)


def _repeats_session_headers(request: Request) -> bool:
    """Whether a header the session wire routes by comes more than once (which one would count is
    anybody's guess: the version checked and the session used could differ). Headers all distinct, the
    usual request, are seen at once by their count."""
    return any_repeated(request) and (repeated(request, b"mcp-protocol-version")
                                      or repeated(request, b"mcp-session-id"))
