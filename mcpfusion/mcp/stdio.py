"""MCP over stdin/stdout, served by the same FastAPI application as `/mcp`.

Each JSON-RPC line read from stdin is sent through the app in-process as an ASGI `POST /mcp` (a direct
ASGI call, no socket; to the MCP path of the `MCPFusion` the app serves, `path=` of its own included), so
FastAPI dependencies, middleware and `dependency_overrides` apply exactly as over HTTP. An app serving several
`MCPFusion` servers is served one at a time: `mcpfusion stdio APP --server NAME`. JSON and SSE answers are
written back as lines on stdout, as they arrive; after `initialize` the session's GET stream is followed too,
so server notifications reach the client.

Headers that dependencies need come from the environment:
  MCPFUSION_AUTHORIZATION   value of the Authorization header (e.g. "Bearer ...")
  MCPFUSION_STDIO_HEADERS   a JSON object of extra headers ({"X-Tenant": "acme"})
(checked at start-up: a header HTTP cannot carry is refused there, naming the variable).

stdout carries UTF-8 JSON-RPC lines only, whatever the locale: the protocol writes to a private copy of file
descriptor 1, which is pointed at stderr, so neither `print()` nor a handler's child process can corrupt it. A
stdin line longer than the endpoint's body limit is refused unread (-32600 Payload Too Large).

A notification or a response read from stdin is never answered (JSON-RPC); what the endpoint says about one
is logged. `notifications/cancelled` cancels the request it names on either wire: on the session wire the
endpoint does it; a 2026-07-28 request (sessionless, cancelled over HTTP by closing its connection) is ended
by the bridge, which hands it the disconnect; the cancelled request is not answered, not even when the server
stops or a new `initialize` replaces its session. A `_meta` naming a session version (2025-11-25) keeps a
request on the session wire. Before `initialize`, a
message without the 2026-07-28 envelope whose `params` is null or whose `_meta` is no object gets that wire's
answer (which names the envelope), as does a response (taken, never answered).

The server stops at the end of stdin, once the calls still running are answered (a request it sent the client
is answered "connection closed" in its place); a call still running 30 s later is cancelled and answered with
an error (exit status 1). On SIGTERM (exit status 143) and Ctrl-C (SIGINT, 130) it stops at once: running calls
are answered and cancelled, and after `CANCEL_GRACE` seconds the app's lifespan shutdown runs (a call slower to
wind down still winding down). When the client closes stdout, the server stops
starting calls, logs one line and exits (status 1). Answers are written by a thread of their own, so a client
that stops reading never blocks the loop; one that leaves `OUTPUT_LIMIT` bytes unread and takes nothing for
`OUTPUT_STALL` seconds is dropped likewise. A signal while the server is already stopping (stdin closed) lets the
lifespan shutdown finish; a second one cuts it short. A second `initialize` answers the calls still running on
the session it replaces (-32603), then deletes that session.

    python -m mcpfusion.mcp.stdio package.module:app      # an ASGI app (`mcpfusion stdio` takes an MCPFusion too)
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from ..body import DEFAULT_MAX_BODY_BYTES, InvalidJSON, parse_json
from . import jsonrpc, protocol
from .jsonrpc import HTTP_ERROR, error, is_valid_id
from .wire import TRANSPORT_SCOPE_KEY

logger = logging.getLogger("mcpfusion.stdio")

_NAME_KEYS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_CONNECTION_CLOSED = -32000  # the SDKs' code for a request whose peer went away
DRAIN_TIMEOUT = 30.0  # seconds the calls still running at the end of stdin get to answer
# Exit statuses (the shell's 128 + signal for the signals): every request answered, some were not (a call
# cancelled at the drain cap, stdout closed by the client), stopped by SIGTERM.
EXIT_OK, EXIT_UNANSWERED, EXIT_SIGTERM = 0, 1, 128 + signal.SIGTERM
_READ_CHUNK = 1 << 16
# Answers a client may leave unread (the pipe full, the writer thread waiting) before it is dropped as if it had
# closed stdout, once it took nothing for OUTPUT_STALL seconds: memory stays bounded, and a client that keeps
# reading is never dropped, whatever the size of an answer. At exit the unread ones get FLUSH_STALL seconds
# without progress. Output is written in _WRITE_CHUNK pieces: progress is seen as the client reads.
OUTPUT_LIMIT = 64 << 20
OUTPUT_STALL = 5.0
FLUSH_STALL = 2.0
_WRITE_CHUNK = 1 << 12  # (PIPE_BUF: a client reading a few KiB at a time lets each write complete)
# Seconds the calls cancelled at a stop get to wind down (they are answered before) before the session ends and
# the lifespan shutdown runs: MCP hosts send SIGKILL 2 s after SIGTERM, and the shutdown must run before.
CANCEL_GRACE = 0.5
_BLOCKED_HEADERS = {"host", "content-length", "content-type", "accept", "mcp-session-id"}
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")  # visible Latin-1, spaces and tabs: no CR, LF, NUL
# What a 401/403 tells the client over stdio: the Authorization header is this process's setting.
_TOKEN_HINT = ("Start this stdio server with --token TOKEN, or set MCPFUSION_AUTHORIZATION to 'Bearer TOKEN' in "
               "its environment.")


class StdioConfigError(ValueError):
    """A header setting (an environment variable, `--token`) that no HTTP request can carry."""


class StartupFailed(RuntimeError):  # noqa: N818
    """The app's lifespan start-up raised; the message is its last line (`Type: message`)."""


def check_header(name: str, value: str, source: str) -> None:
    """Refuse, naming `source` (never echoing the value: it may be a token), a header HTTP cannot carry;
    checked at start-up, else every request would be refused with a misleading error."""
    if not _HEADER_NAME.fullmatch(name):
        raise StdioConfigError(f"{source}: {name!r} is not an HTTP header name (letters, digits and "
                               "!#$%&'*+-.^_`|~ only: no spaces, colons or line breaks)")
    if not _HEADER_VALUE.fullmatch(value):
        raise StdioConfigError(f"{source}: the {name} header's value holds characters an HTTP header cannot "
                               "carry (a line break, a control character or one outside Latin-1)")


def env_headers(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The extra request headers configured through the environment (`StdioConfigError` naming the variable
    when they cannot be sent)."""
    environ = dict(os.environ if environ is None else environ)
    headers: dict[str, str] = {}
    raw = environ.get("MCPFUSION_STDIO_HEADERS")
    if raw:
        shape = "MCPFUSION_STDIO_HEADERS must be a JSON object of header names to string values"
        try:
            parsed = json.loads(raw)
        except ValueError:
            raise StdioConfigError(shape) from None
        if not isinstance(parsed, dict):
            raise StdioConfigError(shape)
        for name, value in parsed.items():
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise StdioConfigError(f"{shape}; {name!r} has a {type(value).__name__}")
            check_header(name, str(value), "MCPFUSION_STDIO_HEADERS")
            if name.lower() not in _BLOCKED_HEADERS:
                headers[name] = str(value)
    if environ.get("MCPFUSION_AUTHORIZATION"):
        check_header("authorization", environ["MCPFUSION_AUTHORIZATION"], "MCPFUSION_AUTHORIZATION")
        headers["authorization"] = environ["MCPFUSION_AUTHORIZATION"]
    return headers


class _SSEParser:
    """Incremental `text/event-stream` parser yielding the JSON payload of each data event."""

    def __init__(self) -> None:
        self.buffer = ""

    def feed(self, chunk: str) -> list[Any]:
        self.buffer += chunk.replace("\r\n", "\n").replace("\r", "\n")
        messages = []
        while "\n\n" in self.buffer:
            block, self.buffer = self.buffer.split("\n\n", 1)
            data = "\n".join(line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:"))
            if data.strip():
                try:
                    messages.append(json.loads(data))
                except ValueError:
                    logger.warning("dropped a non-JSON SSE event")
        return messages


def _plain_header(value: str) -> bool:
    """Whether `value` goes into an HTTP header as it is (printable ASCII without edge spaces)."""
    return value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?")


def _header_safe(value: str) -> str:
    """`value` in the form the 2026 wire's routing headers carry what HTTP cannot (`=?base64?...?=`), which
    the server decodes before comparing it with the body (the SDK's encoder: the same sentinel both ways)."""
    from mcp.shared.inbound import encode_header_value  # the ladder's module, loaded when first needed

    return str(encode_header_value(value))


class StdioBridge:
    """Feeds JSON-RPC lines to an ASGI app's MCP endpoint and writes every answer as a line."""

    def __init__(
        self, app: Any, write: Callable[[str], None], *, path: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """`path`: the MCP endpoint to post to; by default the one of the `MCPFusion` the app serves."""
        self.app = app
        self.write = write
        self.last_http_error: Any = None
        self.path = path or endpoint_path(app)
        self.headers = headers if headers is not None else env_headers()
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.state: dict[str, Any] = {}
        self._get_stream: asyncio.Task[Any] | None = None
        self._lifespan: asyncio.Task[Any] | None = None
        self._lifespan_queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._lifespan_events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._client_requests: set[Any] = set()  # ids of the server's requests the client has not answered
        self._asked = asyncio.Event()  # set when the server sends the client a request
        self._requests: dict[asyncio.Task[Any], Any] = {}  # the client's request each running line task serves
        self._exchanges: dict[Any, _Exchange] = {}  # running 2026-07-28 requests by id (for their cancel)
        self._sessions: dict[asyncio.Task[Any], str] = {}  # the session each running session-wire line uses
        self.gone = False  # stdout is closed: nothing can be answered any more
        self._answered: set[asyncio.Task[Any]] = set()  # lines the bridge answered itself: the rest is dropped
        self.on_gone: Callable[[], None] | None = None  # called once when stdout is found closed

    # -- lifespan -------------------------------------------------------------------------------------

    async def startup(self) -> None:
        """Run the app's lifespan startup (database pools, settings) like a server would."""
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": self.state}

        async def receive() -> dict[str, Any]:
            return await self._lifespan_queue.get()

        async def send(message: dict[str, Any]) -> None:
            await self._lifespan_events.put(message)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception:  # apps without lifespan support raise on the lifespan scope
                await self._lifespan_events.put({"type": "lifespan.unsupported"})

        self._lifespan = asyncio.create_task(run())
        await self._lifespan_queue.put({"type": "lifespan.startup"})
        event = await self._lifespan_events.get()
        if event["type"] == "lifespan.startup.failed":
            # Starlette sends the whole traceback: its last line says what failed.
            lines = str(event.get("message") or "").strip().splitlines()
            raise StartupFailed(lines[-1] if lines else "the app's lifespan start-up failed")

    async def shutdown(self) -> None:
        if self._lifespan is None or self._lifespan.done():
            return
        await self._lifespan_queue.put({"type": "lifespan.shutdown"})
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._lifespan_events.get(), 5)

    # -- one line -------------------------------------------------------------------------------------

    def submit(self, line: str) -> None:
        """Handle one stdin line concurrently with the others (a call may wait for a later answer line)."""
        task = asyncio.create_task(self.handle_line(line))
        self.tasks.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        self._requests.pop(task, None)
        self._sessions.pop(task, None)
        self._answered.discard(task)

    def refuse_oversized(self, line: Oversized) -> None:
        """Answer a line the reader refused for its size, with its id when the line starts by stating it."""
        self._emit(error(_leading_id(line.head), jsonrpc.INVALID_REQUEST,
                         f"Payload Too Large: the limit is {line.limit} bytes"))

    async def handle_line(self, line: str) -> None:
        line = line.strip()
        if not line:
            return
        try:
            raw = line.encode()
            message = parse_json(raw)
        except UnicodeEncodeError:  # lone surrogates: stdin that was not UTF-8
            self._emit(error(None, jsonrpc.PARSE_ERROR, "Parse error: the line is not valid UTF-8"))
            return
        except InvalidJSON as exc:  # including nesting deeper than the parser reads (a RecursionError before)
            reason = exc.reason.replace("the body", "the line")
            self._emit(error(None, jsonrpc.PARSE_ERROR, f"Parse error: {reason}"))
            return
        msg_id = message.get("id") if isinstance(message, dict) else None
        if not is_valid_id(msg_id):  # 1.5, true, an object: no id to answer with (JSON-RPC says null)
            msg_id = None
        quiet = _unanswered(message)  # a notification or a response: never answered (JSON-RPC)
        if isinstance(message, dict) and "method" not in message:  # the client's answer to a server request
            self._client_requests.discard(msg_id)
        elif msg_id is not None and (task := asyncio.current_task()) in self.tasks:
            self._requests[task] = msg_id  # (answered at shutdown if still running)
        if quiet and message.get("method") == "notifications/cancelled" and self._cancel(message.get("params")):
            return
        if _version_not_a_string(message):
            # The SDK ladder's verdict for a transport without headers (HTTP's is a header mismatch): no
            # routing header could mirror a number or null.
            if msg_id is not None and not quiet:
                self._emit(error(msg_id, jsonrpc.INVALID_PARAMS,
                                 "Invalid params: the protocol-version envelope value must be a string"))
            return
        try:  # (only the headers: an error while the app runs or the answer is written is no bad request)
            headers = _encode_headers(self._headers_for(message))
        except UnicodeEncodeError:  # a routing value (method, protocol version) no HTTP header can carry
            if msg_id is not None and not quiet:
                self._emit(error(msg_id, jsonrpc.INVALID_REQUEST, "Invalid request: the method and the protocol "
                                 "version are ASCII names"))
            return
        modern = _modern(headers)
        if msg_id is not None and not quiet and not modern and self._before_initialize(message, msg_id):
            return
        if msg_id is not None and not quiet and self._running_elsewhere(msg_id, modern):
            # Its cancel would be ambiguous (the session wire refuses a duplicate within the session too).
            self._requests.pop(asyncio.current_task(), None)  # type: ignore[arg-type]
            self._emit(error(msg_id, jsonrpc.INVALID_REQUEST, "A request with this id is already running: "
                             "use a new id for each request"))
            return
        if not modern and self.session_id and (task := asyncio.current_task()) in self.tasks:
            self._sessions[task] = self.session_id  # (answered when a new initialize replaces the session)
        # A 2026-07-28 request is cancelled as over HTTP: its connection closes (see `_cancel`).
        exchange = _Exchange() if msg_id is not None and not quiet and modern else None
        if exchange is not None:
            self._exchanges[msg_id] = exchange
        try:
            status, response_headers, messages = await self._request(
                "POST", headers, raw, reply_id=msg_id, exchange=exchange, unanswered=message if quiet else None)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if msg_id is None or quiet or (exchange is not None and exchange.cancelled) or \
                    task is None or task.cancelling():
                raise  # this line's own cancellation (the client's cancel, shutdown): answered elsewhere, or not
            # Out of the app although nothing cancelled this request (user code awaited something cancelled
            # elsewhere): over HTTP the server answers 500; here the client would wait for an answer forever.
            method = message.get("method") if isinstance(message, dict) else None
            method = method if isinstance(method, str) else "the request"
            logger.error("%s failed: CancelledError, although nothing cancelled the request", method, exc_info=exc)
            self._emit(error(msg_id, jsonrpc.INTERNAL_ERROR, f"Internal error while handling {method}"))
            return
        finally:
            if exchange is not None and self._exchanges.get(msg_id) is exchange:
                del self._exchanges[msg_id]
        if exchange is not None and exchange.cancelled:  # the client gave up on it: nothing is answered
            return
        if isinstance(message, dict) and message.get("method") == "initialize" and status == 200:
            await self._initialized(response_headers.get("mcp-session-id"), messages)
        # A request gets its answer; so does a line that is no message at all (an array, a string: JSON-RPC
        # answers it with a null id); a notification or a response gets none.
        if status >= 400 and not messages:
            if quiet:
                _log_unanswered(message, self._http_error(None, status))
            else:
                self._emit(self._http_error(msg_id, status))

    def _running_elsewhere(self, msg_id: Any, modern: bool) -> bool:
        """Whether a request with this id is still running where the bridge must tell them apart: a 2026-07-28
        one (either wire's new request), or a session-wire one (a new 2026-07-28 request)."""
        if msg_id in self._exchanges:
            return True
        return modern and any(self._requests.get(task) == msg_id for task in self._sessions)

    def _before_initialize(self, message: dict[str, Any], msg_id: Any) -> bool:
        """Answer a session-wire request sent before `initialize` (whether it was): `ping` gets `{}` (the MCP
        lifecycle allows it), anything else an error that speaks of stdio, not of the HTTP session header."""
        method = message.get("method")
        if self.session_id is not None or not isinstance(method, str) or method == "initialize":
            return False
        from .pipeline import check_request_shape  # (the endpoint's own check, which this answer skips)

        if (why := check_request_shape(message)) is not None:
            self._emit(error(msg_id, jsonrpc.INVALID_REQUEST, why))
        elif method == "ping":
            self._emit({"jsonrpc": "2.0", "id": msg_id, "result": {}})
        else:
            from .engine import _echoed  # (the method quoted as "Method not found" quotes it: cut, escaped)

            self._emit(error(msg_id, jsonrpc.INVALID_REQUEST, f"Invalid request: send initialize first "
                             f"({_echoed(method)} needs the session it starts)"))
        return True

    async def _initialized(self, session_id: str | None, messages: list[Any]) -> None:
        """Follow the session an `initialize` started; one a second `initialize` replaced ends (its stream
        stopped, the session deleted): its notifications would reach nobody."""
        old, old_version = self.session_id, self.protocol_version
        self.session_id = session_id or old
        for reply in messages:
            version = (reply.get("result") or {}).get("protocolVersion") if isinstance(reply, dict) else None
            if version:
                self.protocol_version = version
        if old is not None and self.session_id != old:
            if self._get_stream is not None:
                self._get_stream.cancel()
                self._get_stream = None
            # The old session's requests to the client can no longer be answered (their answers would go to
            # the new session); its calls still running are answered here, before the session is deleted.
            self._client_requests.clear()
            me = asyncio.current_task()
            stale = [task for task, used in self._sessions.items() if used == old and task is not me]
            await self.cancel_calls("the session was replaced by a new initialize", stale)
            await self._end_session(old, old_version)
        if self.session_id and self._get_stream is None:
            self._get_stream = asyncio.create_task(self._follow_get_stream())

    async def _end_session(self, session_id: str, version: str | None) -> None:
        headers = {**self.headers, "mcp-session-id": session_id}
        if version:
            headers["mcp-protocol-version"] = version
        with contextlib.suppress(Exception):
            await self._request("DELETE", _encode_headers(headers), b"")

    def _cancel(self, params: Any) -> bool:
        """Forget the request a `notifications/cancelled` names, on either wire: the client gave up on it, so
        no stop (SIGTERM, the end of the session) answers it later. A running 2026-07-28 one is ended here (its
        exchange reads the disconnect, the wire's cancellation); on the session wire the endpoint cancels
        (False: the notification goes on to it)."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if not is_valid_id(request_id):
            return False
        for task, served in list(self._requests.items()):  # not answered by `cancel_calls` either
            if served == request_id:
                del self._requests[task]
        exchange = self._exchanges.pop(request_id, None)
        if exchange is None:
            return False
        exchange.cancel()
        return True

    def _http_error(self, msg_id: Any, status: int) -> dict[str, Any]:
        """The JSON-RPC error for an HTTP-level refusal (stdout carries JSON-RPC only)."""
        detail = self.last_http_error.get("detail") if isinstance(self.last_http_error, dict) else None
        self.last_http_error = None
        message = f"HTTP {status} from the MCP endpoint" + (f": {detail}" if isinstance(detail, str) else "")
        message = message.rstrip(".") + "."
        if status in (401, 403):
            message += " " + _TOKEN_HINT
        return error(msg_id, HTTP_ERROR, message, {"status": status, "detail": detail})

    def _headers_for(self, message: Any) -> dict[str, str]:
        headers = {**self.headers, "content-type": "application/json",
                   "accept": "application/json, text/event-stream"}
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(protocol.PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        # As over HTTP: a 2026-07-28 version goes to that wire; so does another version the session wire does
        # not speak while there is no session (that wire says it is unsupported). A session version (the
        # envelope key set by a 2025-11-25 client) is the session wire's, with the session header.
        if isinstance(version, str) and (version in protocol.MODERN_PROTOCOL_VERSIONS or not self.session_id
                                         and version not in protocol.HANDSHAKE_PROTOCOL_VERSIONS):
            return _routing_headers(headers, message, version)
        if self.session_id:
            # (a second `initialize` starts a new session, which replaces this one: sent without its id, which the
            # session wire refuses on an initialize)
            if not (isinstance(message, dict) and message.get("method") == "initialize"):
                headers["mcp-session-id"] = self.session_id
        elif _sessionless(message):
            # No session for the session wire to take it: the 2026-07-28 wire answers, as over HTTP (naming
            # the envelope it needs, never an HTTP header).
            return _routing_headers(headers, message, protocol.MODERN_PROTOCOL_VERSIONS[-1])
        if self.protocol_version:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    async def _follow_get_stream(self) -> None:
        headers = {**self.headers, "accept": "text/event-stream", "mcp-session-id": self.session_id or ""}
        if self.protocol_version:
            headers["mcp-protocol-version"] = self.protocol_version
        await self._request("GET", _encode_headers(headers), b"")

    # -- ASGI -----------------------------------------------------------------------------------------

    async def _request(self, method: str, headers: list[tuple[bytes, bytes]], body: bytes, *,
                       reply_id: Any = None, exchange: _Exchange | None = None, unanswered: Any = None
                       ) -> tuple[int, dict[str, str], list[Any]]:
        """One in-process HTTP exchange; SSE events are written out as they arrive. An error the endpoint
        answered with a null id (it refused the body unread: too large) gets `reply_id`, the id of the request
        this bridge did read, so the client is not left waiting. `exchange`: cancelled, the connection closes
        and nothing more is written; `unanswered`: the body's notification or response, about which what the
        endpoint answers is logged, never written."""
        raw_headers = [(b"host", b"localhost"), *headers, (b"content-length", str(len(body)).encode())]
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
            "scheme": "http", "path": self.path, "raw_path": self.path.encode(), "query_string": b"",
            "root_path": "", "headers": raw_headers, "client": ("127.0.0.1", 0), "server": ("localhost", 80),
            "state": dict(self.state),
            # The routing headers were derived from the body here: nothing for the server to cross-check.
            "mcpfusion.trusted_headers": True,
            TRANSPORT_SCOPE_KEY: "stdio",
        }
        sent = False
        line = asyncio.current_task()  # (the line task when called by `handle_line`)
        done = exchange.over if exchange is not None else asyncio.Event()
        status = 500
        response_headers: dict[str, str] = {}
        parser: _SSEParser | None = None
        chunks: list[bytes] = []
        written: list[Any] = []

        def deliver(item: Any) -> None:
            written.append(item)
            if exchange is not None and exchange.cancelled:  # a cancelled request's answer is omitted
                return
            if unanswered is not None:
                _log_unanswered(unanswered, item)
                return
            if line in self._answered:  # the bridge answered this request itself (see `cancel_calls`)
                return
            answer = reply_id is not None and isinstance(item, dict) and "method" not in item \
                and item.get("id") == reply_id
            self._emit(item)
            if answer and line is not None:
                self._requests.pop(line, None)  # (answered: `cancel_calls` leaves it alone)
            if answer and exchange is not None and self._exchanges.get(reply_id) is exchange:
                # Answered: its id is free again at once, though its stream is still closing (a cancel of it
                # has nothing left to end).
                del self._exchanges[reply_id]

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status, parser
            if message["type"] == "http.response.start":
                status = message["status"]
                response_headers.update({k.decode("latin-1").lower(): v.decode("latin-1")
                                         for k, v in message.get("headers", [])})
                if response_headers.get("content-type", "").startswith("text/event-stream"):
                    parser = _SSEParser()
            elif message["type"] == "http.response.body":
                data = message.get("body", b"")
                if parser is not None:
                    for item in parser.feed(data.decode("utf-8", "replace")):
                        deliver(item)
                else:
                    chunks.append(data)
                if not message.get("more_body", False):
                    done.set()

        try:
            await self.app(scope, receive, send)
        finally:
            done.set()
        if parser is None and chunks:
            text = b"".join(chunks).decode("utf-8", "replace").strip()
            media = response_headers.get("content-type", "").partition(";")[0].strip()
            if text and (media == "application/json" or media.endswith("+json")):  # problem+json refusals too
                try:
                    item = json.loads(text)
                except ValueError:
                    item = None
                if isinstance(item, dict) and item.get("jsonrpc") == "2.0":
                    if item.get("id") is None and "error" in item and reply_id is not None:
                        item["id"] = reply_id
                    deliver(item)
                elif item is not None:
                    self.last_http_error = item  # e.g. FastAPI's {"detail": ...} for a 401
        return status, response_headers, written

    def _emit(self, message: Any) -> None:
        if self.gone:
            return
        if isinstance(message, dict) and "method" in message and message.get("id") is not None:
            self._client_requests.add(message["id"])  # (elicitation, sampling, roots: the client must answer)
            self._asked.set()
        _hint_token(message)
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n"
        try:
            self.write(line)
        except _Unread as exc:
            self._output_closed(str(exc))
        except (OSError, ValueError):  # EPIPE, or the file object closed: the client stopped reading
            self._output_closed()

    def _output_closed(self, why: str = "stdout was closed by the client") -> None:
        if self.gone:  # (the writer thread and a later write may both find it)
            return
        self.gone = True
        logger.warning("%s: stopping (no more calls are started)", why)
        if self.on_gone is not None:
            self.on_gone()

    async def drain(self, timeout: float = DRAIN_TIMEOUT) -> None:
        """After stdin closed: let the calls still running finish (for at most `timeout` seconds). The requests
        the server sent the client and still waits for (elicitation, sampling) are answered here with an
        error, since the client can no longer answer: the call that asked goes on instead of waiting."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.tasks and loop.time() < deadline and not self.gone:
            unanswered, self._client_requests = self._client_requests, set()
            for request_id in unanswered:
                self.submit(json.dumps(error(request_id, _CONNECTION_CLOSED, "Connection closed: the client "
                                             "closed stdin")))
            self._asked.clear()
            asked = asyncio.ensure_future(self._asked.wait())
            try:
                await asyncio.wait([*self.tasks, asked], timeout=deadline - loop.time(),
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                asked.cancel()

    async def cancel_calls(self, reason: str, tasks: list[asyncio.Task[Any]] | None = None,
                           wait: float = CANCEL_GRACE) -> int:
        """Cancel the lines still being handled (all, or `tasks`): each request among them not answered yet is
        answered at once with an error saying `reason` (the client would otherwise wait for it forever), before
        any wait, so a signal cutting the wait short leaves nothing unanswered; whatever the line writes later
        is dropped (one answer per id). Then waits up to `wait` seconds for them to wind down. A line another
        `cancel_calls` already took is left to it. Returns how many requests were answered so."""
        running = [task for task in (self.tasks if tasks is None else tasks) if not task.done()]
        abandoned = 0
        for task in running:
            if task in self._answered:  # answered by the bridge already (a nested or concurrent cancel_calls)
                continue
            self._answered.add(task)
            request_id = self._requests.pop(task, None)
            if request_id is not None:
                self._emit(error(request_id, jsonrpc.INTERNAL_ERROR, f"Request cancelled: {reason}"))
                abandoned += 1
            task.cancel()
        if running and wait > 0:
            await asyncio.wait(running, timeout=wait)
        return abandoned

    def cut_short(self) -> None:
        """End the lifespan shutdown under way (a second signal): its cancellation, not an app failure."""
        if self._lifespan is not None:
            self._lifespan.cancel()

    async def close(self, reason: str = "the server is stopping") -> int:
        """Cancel what still runs (see `cancel_calls`), end the session, run the lifespan shutdown; returns
        the number of requests answered as cancelled."""
        abandoned = await self.cancel_calls(reason)
        if self._get_stream is not None:
            self._get_stream.cancel()
        if self.session_id:
            await self._end_session(self.session_id, self.protocol_version)
        await self.shutdown()
        return abandoned


class _Exchange:
    """A 2026-07-28 request's in-process connection: `cancel` closes it (its receive reads the disconnect)."""

    __slots__ = ("over", "cancelled")

    def __init__(self) -> None:
        self.over = asyncio.Event()
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self.over.set()


def _unanswered(message: Any) -> bool:
    """Whether `message` is a notification (a method, no id) or a response (a result or an error, no
    method; with or without an id, as the endpoint takes one): JSON-RPC never answers either. Anything else,
    valid or not, gets an answer."""
    if not isinstance(message, dict):
        return False
    if "method" in message:
        return "id" not in message and isinstance(message["method"], str)
    return "result" in message or "error" in message


def _sessionless(message: Any) -> bool:
    """Whether `message`, read while there is no session, is for the 2026-07-28 wire although it carries no
    envelope: a response (the session wire has no session to give it to), or a message other than
    `initialize` whose `params` is null or whose `_meta` is no object (the 2026-07-28 wire says which envelope
    it needs; "send initialize first" would send a 2026-07-28 client the wrong way)."""
    if not isinstance(message, dict):
        return False
    if "method" not in message:
        return _unanswered(message)
    if not isinstance(message["method"], str) or message["method"] == "initialize":
        return False
    params = message.get("params", {})
    return params is None or isinstance(params, dict) and not isinstance(params.get("_meta", {}), dict)


def _routing_headers(headers: dict[str, str], message: dict[str, Any], version: str) -> dict[str, str]:
    """`headers` with the 2026-07-28 routing headers, which mirror the body (over stdio the body is their only
    source), for protocol `version`."""
    headers["mcp-protocol-version"] = version
    method = message.get("method")
    if isinstance(method, str):
        headers["mcp-method"] = method
        params = message.get("params")
        name = params.get(_NAME_KEYS.get(method, "")) if isinstance(params, dict) else None
        if isinstance(name, str):
            headers["mcp-name"] = name if _plain_header(name) else _header_safe(name)
    return headers


def _log_unanswered(message: dict[str, Any], answer: Any) -> None:
    """Log what the endpoint answered to a notification or a response (JSON-RPC forbids writing it)."""
    err = answer.get("error") if isinstance(answer, dict) else None
    detail = err.get("message") if isinstance(err, dict) else answer
    if "method" in message:
        logger.debug("the endpoint answered the notification %s: %s", message["method"], detail)
    else:  # a response the server did not take: the request it answers may wait on
        logger.warning("the endpoint refused the client's response to request %r: %s", message.get("id"), detail)


def _modern(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the request goes to the 2026-07-28 wire (`_headers_for` derived its method header)."""
    return any(name == b"mcp-method" for name, _ in headers)


def _hint_token(message: Any) -> None:
    """Add the `--token` hint to a 401/403 the endpoint answered as JSON-RPC -32010 (an auth dependency that
    failed once its response had started): the client's header is this process's setting."""
    err = message.get("error") if isinstance(message, dict) else None
    if not isinstance(err, dict) or err.get("code") != HTTP_ERROR:
        return
    data, text = err.get("data"), err.get("message")
    if isinstance(data, dict) and data.get("status") in (401, 403) and isinstance(text, str) \
            and _TOKEN_HINT not in text:
        err["message"] = text.rstrip(".") + ". " + _TOKEN_HINT


def _encode_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """ASGI header pairs (`UnicodeEncodeError` for a value outside Latin-1)."""
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]


def _version_not_a_string(message: Any) -> bool:
    """Whether `message` is a 2026-07-28 envelope whose protocol version is not a string."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and protocol.PROTOCOL_VERSION_META_KEY in meta \
        and not isinstance(meta[protocol.PROTOCOL_VERSION_META_KEY], str)


_SPACE = re.compile(r"[ \t\r\n]*")


def _skip_space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _leading_id(head: bytes) -> Any:
    """The `id` of the JSON object that `head` begins, when the members before it are whole (a line too large to
    read is still answered with its id, which clients put first); else None, as JSON-RPC answers an unread id."""
    text = head.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    pos = _skip_space(text, 0)
    if not text.startswith("{", pos):
        return None
    try:
        while True:  # one member a turn: "key": value,
            key, pos = decoder.raw_decode(text, _skip_space(text, pos + 1))
            pos = _skip_space(text, pos)
            if not isinstance(key, str) or not text.startswith(":", pos):
                return None
            value, pos = decoder.raw_decode(text, _skip_space(text, pos + 1))
            if key == "id":
                return value if is_valid_id(value) else None
            pos = _skip_space(text, pos)
            if not text.startswith(",", pos):
                return None
    except (ValueError, RecursionError):  # cut off inside a member (or nested too deep to scan)
        return None


@dataclass(frozen=True)
class Oversized:
    """A stdin line longer than `limit` bytes, refused unread: its first bytes and the limit."""

    head: bytes
    limit: int


def _fusions(app: Any) -> list[Any]:
    """The `MCPFusion` servers mounted on `app`, in mount order, found as `mcpfusion.testing.served_fusions`
    finds them (duck-typed: this transport does not import the core)."""
    state = getattr(app, "state", None)
    every = getattr(state, "mcpfusions", None)
    if isinstance(every, list) and every:
        return every
    one = getattr(state, "mcpfusion", None)
    return [] if one is None else [one]


def _path_of(fusion: Any) -> Any:
    return getattr(getattr(fusion, "settings", None), "path", None)


def endpoint_path(app: Any) -> str:
    """The MCP path of the `MCPFusion` the app serves (`/mcp` for an app without one). An app serving several
    is refused (`StdioConfigError` naming them): which one to bridge is never guessed."""
    fusions = _fusions(app)
    if len(fusions) > 1:
        listed = ", ".join(f"{getattr(f, 'name', '?')!r} at {_path_of(f)}" for f in fusions)
        raise StdioConfigError(f"the app serves several MCPFusion servers ({listed}): serve one with "
                               "`mcpfusion stdio APP --server NAME`")
    path = _path_of(fusions[0]) if fusions else None
    return path if isinstance(path, str) else "/mcp"


def _fusion_at(app: Any, path: str) -> Any:
    """The `MCPFusion` of `app` serving MCP at `path` (None: none does)."""
    return next((fusion for fusion in _fusions(app) if _path_of(fusion) == path), None)


def _body_limit(app: Any, path: str) -> int:
    """The body limit of the app's MCP endpoint at `path` (the `MCPFusion` serving it says), in bytes."""
    settings = getattr(_fusion_at(app, path), "settings", None)
    limit = getattr(settings, "max_body_bytes", None)
    return limit if isinstance(limit, int) and limit > 0 else DEFAULT_MAX_BODY_BYTES


def _read_lines(read: Callable[[], bytes], deliver: Callable[[bytes | Oversized | None], None], limit: int) -> None:
    """Deliver each line `read` returns (in chunks; b"" at the end of input), then None (the body of the reader
    thread). A line longer than `limit` bytes is delivered as `Oversized` as soon as it passes the limit, and
    the rest of it is skipped unread: memory stays bounded whatever the client sends."""
    pending: list[bytes] = []
    size = 0
    skipping = False  # inside a refused line: dropping bytes up to its end
    while chunk := read():
        while chunk:
            end = chunk.find(b"\n") + 1
            part, chunk = (chunk[:end], chunk[end:]) if end else (chunk, b"")
            if not skipping:
                pending.append(part)
                size += len(part) - (1 if end else 0)
                if size > limit:
                    deliver(Oversized(b"".join(pending)[:_READ_CHUNK], limit))
                    skipping = True
                elif end:
                    deliver(b"".join(pending))
            if end or skipping:
                pending, size = [], 0
            if end:
                skipping = False
    if pending:
        deliver(b"".join(pending))
    deliver(None)


def _stdin_lines(loop: asyncio.AbstractEventLoop, limit: int) -> asyncio.Queue[str | Oversized | None]:
    """stdin's lines (None at the end), read by a daemon thread: unlike the loop's default executor, which
    `asyncio.run` joins on the way out, it never holds the exit (Ctrl-C while the client keeps stdin open)."""
    queue: asyncio.Queue[str | Oversized | None] = asyncio.Queue()

    def deliver(line: bytes | Oversized | None) -> None:
        # Bytes that are not UTF-8 become lone surrogates, which `handle_line` answers as a parse error.
        item = line.decode("utf-8", "surrogateescape") if isinstance(line, bytes) else line
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server is exiting
            loop.call_soon_threadsafe(queue.put_nowait, item)

    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # a stdin replaced by an object without a descriptor
        def read() -> bytes:
            return sys.stdin.readline(_READ_CHUNK).encode("utf-8", "surrogateescape")
    else:
        # `os.read` on the descriptor, not `sys.stdin`: a thread blocked in `sys.stdin.readline` holds the
        # buffer's lock, which the interpreter needs at exit.
        def read() -> bytes:
            try:
                return os.read(fd, _READ_CHUNK)
            except OSError:  # stdin closed under us: end of input
                return b""
    threading.Thread(target=_read_lines, args=(read, deliver, limit), name="mcpfusion-stdin", daemon=True).start()
    return queue


class _Unread(OSError):
    """The client left more than `OUTPUT_LIMIT` bytes of answers unread."""


class _Output:
    """Protocol lines written to descriptor `fd` by a daemon thread, in order: a client that stops reading
    (the pipe full) blocks that thread, never the event loop, so signals and the end of stdin still stop the
    server. Calling it queues a line (`_Unread` past `OUTPUT_LIMIT` bytes; `BrokenPipeError` once a write
    failed); `on_broken` is called from the thread when a write fails."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending: deque[memoryview] = deque()
        self.size = 0  # bytes queued, not yet written
        self.written = 0  # bytes written so far (progress)
        self.progress_at = time.monotonic()  # when the client last took a chunk (or was last owed nothing)
        self.broken = False
        self.closing = False
        self.on_broken: Callable[[], None] | None = None
        self.changed = threading.Condition()
        self.delivered: bool | None = None  # set by `close`
        threading.Thread(target=self._run, name="mcpfusion-stdout", daemon=True).start()

    def __call__(self, text: str) -> None:
        # (a lone surrogate can only sit in a JSON string, where its backslash escape is valid JSON)
        data = text.encode("utf-8", "backslashreplace")
        with self.changed:
            if self.delivered is not None:  # closed by the server itself: a late line is dropped, unreported
                return
            if self.broken:
                raise BrokenPipeError("stdout is closed")
            if not self.pending:
                self.progress_at = time.monotonic()  # (owed nothing until now)
            elif self.size + len(data) > OUTPUT_LIMIT and time.monotonic() - self.progress_at > OUTPUT_STALL:
                raise _Unread(f"the client left {self.size >> 20} MiB of answers unread on stdout")
            self.pending.append(memoryview(data))
            self.size += len(data)
            self.changed.notify_all()

    def _run(self) -> None:
        while True:
            with self.changed:
                while not self.pending and not self.closing:
                    self.changed.wait()
                if not self.pending or self.broken:
                    return
                data = self.pending[0]
            try:
                written = os.write(self.fd, data[:_WRITE_CHUNK])
            except OSError:  # EPIPE, or the descriptor closed at exit: the client stopped reading
                with self.changed:
                    ours = self.delivered is not None  # (the server closed it: no client to blame)
                    self.broken = True
                    self.pending.clear()
                    self.size = 0
                    self.changed.notify_all()
                if self.on_broken is not None and not ours:
                    self.on_broken()
                return
            with self.changed:
                if written < len(data):
                    self.pending[0] = data[written:]
                else:
                    self.pending.popleft()
                self.size -= written
                self.written += written
                self.progress_at = time.monotonic()
                self.changed.notify_all()

    def close(self, stall: float) -> bool:
        """Let the thread write what is queued while it makes progress (it gives up after `stall` seconds
        without any), then stop it; whether everything was written."""
        with self.changed:
            if self.delivered is not None:
                return self.delivered
            self.closing = True
            self.changed.notify_all()
            while self.pending and not self.broken:
                written = self.written
                self.changed.wait(stall)
                if self.written == written:  # no byte written for `stall` seconds: the client is not reading
                    break
            self.delivered = not self.pending and not self.broken
            self.broken = True  # (a write in progress ends the thread when it returns)
            return self.delivered


@contextlib.contextmanager
def _protocol_output(stdout: Any) -> Iterator[Callable[[str], None]]:
    """A writer of protocol lines to `stdout`, as UTF-8 whatever its encoding (a Windows pipe's is the ANSI code
    page). When `stdout` has a descriptor, the protocol writes to a private copy of it and descriptor 1 is
    pointed at stderr meanwhile: a handler's child process (or C code) writing to fd 1 cannot corrupt it."""
    try:
        fd = stdout.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream
        fd = None
    if fd is None:
        binary = getattr(stdout, "buffer", None)

        def write(text: str) -> None:
            if binary is None:
                stdout.write(text)
                stdout.flush()
            else:
                binary.write(text.encode("utf-8", "backslashreplace"))
                binary.flush()

        yield write
        return
    with contextlib.suppress(OSError, ValueError):
        stdout.flush()  # whatever its text layer holds goes out first
    channel = os.dup(fd)
    moved = fd == 1 and _point_fd1_at_stderr()
    output = _Output(channel)
    try:
        yield output
    finally:
        delivered = output.close(FLUSH_STALL)
        if moved:
            with contextlib.suppress(OSError):
                os.dup2(channel, 1)
        if delivered:  # (else the thread may still be writing to it: the process is exiting anyway)
            with contextlib.suppress(OSError):
                os.close(channel)


@contextlib.contextmanager
def private_stdout() -> Iterator[Any]:
    """The protocol channel, taken before the app is imported: `sys.stdout` on a private copy of descriptor 1,
    which points at stderr meanwhile (and `sys.stdout` at `sys.stderr`), so what importing the app writes (a
    print, C code, a child process) cannot corrupt it. Restored on the way out."""
    protocol = sys.stdout
    try:
        fd = protocol.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream
        fd = None
    sys.stdout = sys.stderr
    if fd != 1:
        try:
            yield protocol
        finally:
            sys.stdout = protocol
        return
    with contextlib.suppress(OSError, ValueError):
        protocol.flush()
    channel = os.dup(1)
    moved = _point_fd1_at_stderr()
    stream = os.fdopen(channel, "w", encoding="utf-8")
    try:
        yield stream
    finally:
        sys.stdout = protocol
        if moved:
            with contextlib.suppress(OSError):
                os.dup2(channel, 1)
        with contextlib.suppress(OSError, ValueError):
            stream.close()


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: the server is exiting
        loop.call_soon_threadsafe(callback)


def _point_fd1_at_stderr() -> bool:
    """Point descriptor 1 at stderr (at /dev/null when there is none); whether it was moved."""
    try:
        os.dup2(2, 1)
    except OSError:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
        except OSError:
            return False
        os.dup2(null, 1)
        os.close(null)
    return True


class _Signals:
    """The stopping signals received (SIGTERM, SIGINT); `closing` once the server is shutting down anyway (the
    lifespan shutdown runs)."""

    def __init__(self) -> None:
        self.received = 0
        self.first: int | None = None  # the signal that stopped the server: its exit status is 128 + it
        self.closing = False
        self.pending = 0  # the cancellations of the server's task these signals made, not yet taken back

    def __bool__(self) -> bool:
        return self.received > 0


@contextlib.contextmanager
def _on_sigterm(task: asyncio.Task[Any]) -> Iterator[_Signals]:
    """While inside, SIGTERM and Ctrl-C (SIGINT) cancel `task`, unless the signal comes while it is already
    closing: then only a second signal does (cutting the lifespan shutdown short). SIGINT is taken from
    `asyncio.run`, whose second Ctrl-C would raise KeyboardInterrupt wherever the loop is (the answers and the
    lifespan shutdown lost). What is yielded is true once a signal came."""
    loop = asyncio.get_running_loop()
    received = _Signals()

    def stop(signum: int) -> None:
        received.received += 1
        received.first = received.first or signum
        # (MCP hosts close stdin, then send SIGTERM: the shutdown under way is let finish within its bound)
        if received.received == 1 and not received.closing or received.received == 2:
            received.pending += 1
            task.cancel()

    installed = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, stop, signum)
        except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread: the default
            continue
        installed.append(signum)
    try:
        yield received
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


async def serve_stdio(app: Any, *, path: str | None = None, headers: dict[str, str] | None = None,
                      stdout: TextIO | None = None) -> int:
    """Serve `app`'s MCP endpoint on this process's stdin/stdout until stdin closes (or the task is
    cancelled: Ctrl-C; or SIGTERM). `path`: the endpoint, by default the one of the `MCPFusion` the app serves
    (`StdioConfigError` when it serves several). `stdout`: the protocol channel when the caller already moved
    `sys.stdout` away (to keep prints made while importing the app off it); by default the current `sys.stdout`.

    Returns the exit status: `EXIT_OK`, `EXIT_UNANSWERED` (calls cancelled unanswered at the drain cap, or
    stdout closed by the client) or `EXIT_SIGTERM`."""
    path = path or endpoint_path(app)
    out = stdout or sys.stdout
    previous = sys.stdout
    # stdout carries the protocol only: a stray print() in user code goes to stderr instead.
    sys.stdout = sys.stderr
    main = asyncio.current_task()
    assert main is not None
    status, reason = EXIT_OK, "the server was interrupted"
    with _protocol_output(out) as write, _on_sigterm(main) as terminated:
        bridge = StdioBridge(app, write, path=path, headers=headers)
        if isinstance(write, _Output):  # a write that failed in its thread stops the server too
            loop = asyncio.get_running_loop()
            write.on_broken = lambda: _call_soon(loop, bridge._output_closed)
        try:
            await bridge.startup()
            lines = _stdin_lines(asyncio.get_running_loop(), _body_limit(app, path))
            bridge.on_gone = lambda: lines.put_nowait(None)  # wakes the loop below, which then stops
            while (line := await lines.get()) is not None and not bridge.gone:
                if isinstance(line, Oversized):
                    bridge.refuse_oversized(line)
                else:
                    bridge.submit(line)
            await bridge.drain(DRAIN_TIMEOUT)  # answers to the last lines, unless they wait for the client
            await _background_done(app, path)  # their background tasks, before the bridge's short shutdown
            reason = f"the server stops {DRAIN_TIMEOUT:g} s after stdin closes, and this call was still running"
        except asyncio.CancelledError:
            if not terminated:
                raise  # a cancellation from elsewhere (Ctrl-C where the signal could not be taken)
            main.uncancel()
            terminated.pending -= 1
            name = "SIGINT" if terminated.first == signal.SIGINT else "SIGTERM"
            status, reason = 128 + (terminated.first or signal.SIGTERM), f"the server was stopped ({name})"
        finally:
            terminated.closing = True
            abandoned = 0
            try:
                abandoned = await bridge.close(reason)
            except asyncio.CancelledError:
                if not terminated.pending or main.cancelling() > terminated.pending:
                    raise  # a cancellation from elsewhere
                for _ in range(terminated.pending):
                    main.uncancel()
                logger.warning("a second signal cut the shutdown short")
                bridge.cut_short()
            finally:
                sys.stdout = previous
            # Answers the client left unread once it stopped reading (for FLUSH_STALL s) were not delivered.
            undelivered = isinstance(write, _Output) and not write.close(FLUSH_STALL)
    if terminated:
        status = 128 + (terminated.first or signal.SIGTERM)
    if status == EXIT_OK and (abandoned or bridge.gone or undelivered):
        status = EXIT_UNANSWERED
    return status


async def _background_done(app: Any, path: str) -> None:
    """Wait for the background tasks of the calls `app` served at `path` (the registry's runs, found on the app:
    the engine does not import the core that owns them), as a lifespan shutdown under `serve` would."""
    fusion = _fusion_at(app, path)
    runs = getattr(getattr(fusion, "registry", None), "background", None)
    if runs is not None:
        await runs.drain(None)


def load_app(target: str) -> Any:
    """`module:attr` -> the ASGI app it names. This transport knows ASGI only; `mcpfusion stdio
    module:fusion` also accepts an `MCPFusion` object."""
    module_name, _, attr = target.partition(":")
    obj = getattr(importlib.import_module(module_name), attr or "app")
    if not callable(obj):
        raise SystemExit(f"{target} is not an ASGI app; for an MCPFusion object run `mcpfusion stdio {target}`")
    return obj


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m mcpfusion.mcp.stdio package.module:app")
    # stdout carries the protocol: every log line, and a print() while the app is imported, goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    sys.path.insert(0, os.getcwd())
    protocol, sys.stdout = sys.stdout, sys.stderr
    try:
        headers = env_headers()
        app = load_app(args[0])
        status = asyncio.run(serve_stdio(app, headers=headers, stdout=protocol))
    except (StdioConfigError, StartupFailed) as exc:
        raise SystemExit(f"mcpfusion: error: {exc}") from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    finally:
        sys.stdout = protocol
    if status:
        raise SystemExit(status)


if __name__ == "__main__":
    main()
