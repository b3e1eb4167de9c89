"""MCP over stdin/stdout, served by the same FastAPI application as `/mcp`.

Each JSON-RPC line read from stdin is sent through the app in-process as an ASGI `POST /mcp` (a direct
ASGI call, no socket), so FastAPI dependencies, middleware and `dependency_overrides` apply exactly as
over HTTP. JSON and SSE answers are written back as lines on stdout, as they arrive; after `initialize`
the session's GET stream is followed too, so server notifications reach the client.

Headers that dependencies need come from the environment:
  MCPFUSION_AUTHORIZATION   value of the Authorization header (e.g. "Bearer ...")
  MCPFUSION_STDIO_HEADERS   a JSON object of extra headers ({"X-Tenant": "acme"})

    python -m mcpfusion.mcp.stdio package.module:app      # an ASGI app (`mcpfusion stdio` takes an MCPFusion too)
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from ..body import InvalidJSON, parse_json
from . import jsonrpc, protocol
from .jsonrpc import HTTP_ERROR, error
from .wire import TRANSPORT_SCOPE_KEY

logger = logging.getLogger("mcpfusion.stdio")

_NAME_KEYS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_BLOCKED_HEADERS = {"host", "content-length", "content-type", "accept", "mcp-session-id"}


def env_headers(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The extra request headers configured through the environment."""
    environ = dict(os.environ if environ is None else environ)
    headers: dict[str, str] = {}
    raw = environ.get("MCPFUSION_STDIO_HEADERS")
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            raise SystemExit("MCPFUSION_STDIO_HEADERS must be a JSON object of header names to values") from None
        if not isinstance(parsed, dict):
            raise SystemExit("MCPFUSION_STDIO_HEADERS must be a JSON object of header names to values")
        headers.update({str(k): str(v) for k, v in parsed.items() if str(k).lower() not in _BLOCKED_HEADERS})
    if environ.get("MCPFUSION_AUTHORIZATION"):
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
        self, app: Any, write: Callable[[str], None], *, path: str = "/mcp", headers: dict[str, str] | None = None
    ) -> None:
        self.app = app
        self.write = write
        self.last_http_error: Any = None
        self.path = path
        self.headers = headers if headers is not None else env_headers()
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.state: dict[str, Any] = {}
        self._get_stream: asyncio.Task[Any] | None = None
        self._lifespan: asyncio.Task[Any] | None = None
        self._lifespan_queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._lifespan_events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

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
            raise RuntimeError(f"application startup failed: {event.get('message', '')}")

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
        task.add_done_callback(self.tasks.discard)

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
        try:
            headers = self._headers_for(message)
            status, response_headers, messages = await self._request("POST", headers, raw)
        except UnicodeEncodeError:  # a routing value (method, protocol version) no HTTP header can carry
            if msg_id is not None:
                self._emit(error(msg_id, jsonrpc.INVALID_REQUEST, "Invalid request: the method and the protocol "
                                 "version are ASCII names"))
            return
        if isinstance(message, dict) and message.get("method") == "initialize" and status == 200:
            self.session_id = response_headers.get("mcp-session-id", self.session_id)
            for reply in messages:
                version = (reply.get("result") or {}).get("protocolVersion") if isinstance(reply, dict) else None
                if version:
                    self.protocol_version = version
            if self.session_id and self._get_stream is None:
                self._get_stream = asyncio.create_task(self._follow_get_stream())
        # A request gets its answer; so does a line that is no message at all (an array, a string: JSON-RPC
        # answers it with a null id); a notification gets none.
        if status >= 400 and not messages and (msg_id is not None or not isinstance(message, dict)):
            self._emit(self._http_error(msg_id, status))

    def _http_error(self, msg_id: Any, status: int) -> dict[str, Any]:
        """The JSON-RPC error for an HTTP-level refusal (stdout carries JSON-RPC only)."""
        detail = self.last_http_error.get("detail") if isinstance(self.last_http_error, dict) else None
        self.last_http_error = None
        message = f"HTTP {status} from the MCP endpoint" + (f": {detail}" if isinstance(detail, str) else "")
        message = message.rstrip(".") + "."
        if status in (401, 403):
            message += (" Start this stdio server with --token TOKEN, or set MCPFUSION_AUTHORIZATION "
                        "to 'Bearer TOKEN' in its environment.")
        return error(msg_id, HTTP_ERROR, message, {"status": status, "detail": detail})

    def _headers_for(self, message: Any) -> dict[str, str]:
        headers = {**self.headers, "content-type": "application/json",
                   "accept": "application/json, text/event-stream"}
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(protocol.PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str):
            # 2026-07-28: the routing headers mirror the body; over stdio the body is their only source.
            headers["mcp-protocol-version"] = version
            method = message.get("method")
            if isinstance(method, str):
                headers["mcp-method"] = method
                name = params.get(_NAME_KEYS.get(method, "")) if isinstance(params, dict) else None
                if isinstance(name, str):
                    headers["mcp-name"] = name if _plain_header(name) else _header_safe(name)
            return headers
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    async def _follow_get_stream(self) -> None:
        headers = {**self.headers, "accept": "text/event-stream", "mcp-session-id": self.session_id or ""}
        if self.protocol_version:
            headers["mcp-protocol-version"] = self.protocol_version
        await self._request("GET", headers, b"")

    # -- ASGI -----------------------------------------------------------------------------------------

    async def _request(self, method: str, headers: dict[str, str], body: bytes
                       ) -> tuple[int, dict[str, str], list[Any]]:
        """One in-process HTTP exchange; SSE events are written out as they arrive."""
        raw_headers = [(b"host", b"localhost")] + [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
        ]
        raw_headers.append((b"content-length", str(len(body)).encode()))
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
        done = asyncio.Event()
        status = 500
        response_headers: dict[str, str] = {}
        parser: _SSEParser | None = None
        chunks: list[bytes] = []
        written: list[Any] = []

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
                        written.append(item)
                        self._emit(item)
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
                    written.append(item)
                    self._emit(item)
                elif item is not None:
                    self.last_http_error = item  # e.g. FastAPI's {"detail": ...} for a 401
        return status, response_headers, written

    def _emit(self, message: Any) -> None:
        self.write(json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n")

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        if self._get_stream is not None:
            self._get_stream.cancel()
        if self.session_id:
            with contextlib.suppress(Exception):
                await self._request("DELETE", {**self.headers, "mcp-session-id": self.session_id}, b"")
        await self.shutdown()


async def serve_stdio(app: Any, *, path: str = "/mcp", headers: dict[str, str] | None = None) -> None:
    """Serve `app`'s MCP endpoint on this process's stdin/stdout until stdin closes."""
    out = sys.stdout
    # stdout carries the protocol only: a stray print() in user code goes to stderr instead.
    sys.stdout = sys.stderr

    def write(text: str) -> None:
        out.write(text)
        out.flush()

    bridge = StdioBridge(app, write, path=path, headers=headers)
    loop = asyncio.get_running_loop()
    try:
        await bridge.startup()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            bridge.submit(line)
        # Let answers to the last lines finish before closing.
        if bridge.tasks:
            await asyncio.wait(list(bridge.tasks), timeout=30)
    finally:
        await bridge.close()
        sys.stdout = out


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
    # stdout carries the protocol: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    sys.path.insert(0, os.getcwd())
    asyncio.run(serve_stdio(load_app(args[0])))


if __name__ == "__main__":
    main()

