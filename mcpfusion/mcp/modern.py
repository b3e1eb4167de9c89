"""The sessionless wire (2026-07-28): every POST is self-contained.

Checks per request, in this order: the `_meta` envelope, the `MCP-Protocol-Version` / `Mcp-Method` /
`Mcp-Name` headers against the body, the version, then `Mcp-Param-*` headers of tools whose schema declares
`x-mcp-header`. The ladder itself is the SDK's pure `mcp.shared.inbound` module, so both ends read the rules
from one place. A refused request is told every problem of the ladder at once, in that order: the answer's
code (and HTTP status) is the first one's, its message names them all (see `_every_problem`).

A notification is checked the same way, except that its `_meta` is optional and needs no envelope keys (the
revision's `NotificationMetaObject`): what it carries must agree with the headers. A refused one is a 400
with the JSON-RPC error (id null); an accepted one is a 202. So is a JSON-RPC response (this wire never sends
the client a request: nothing waits for one), as on the session wire.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import logging
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive

from ..visible import visible_name
from . import jsonrpc, protocol
from .broker import BoundedQueue, Broker
from .channel import Channel, InputResponsesChannel
from .engine import Call, Engine, check_params
from .jsonrpc import McpError, notification
from .params import ACCEPTED_SIZE, envelope_key
from .pipeline import WirePipeline, invalid_request
from .settings import TransportSettings
from .streams import SSEBody, encode_message, is_response, sse_event
from .wire import (
    SSE_HEADERS,
    Releasing,
    accepts,
    caller_key,
    error_response,
    event_source,
    http_error,
    not_acceptable,
    retry_later,
)

# Set in the ASGI scope by in-process transports (stdio) whose routing headers are derived from the body.
TRUSTED_HEADERS_KEY = "mcpfusion.trusted_headers"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
_DONE = object()
_ROUTING = frozenset({b"mcp-protocol-version", b"mcp-method", b"mcp-name"})
# notifications/... method -> the SubscriptionFilter flag that opts in to it
_FILTER_OF = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}


LADDER_MODULE = "mcp.shared.inbound"


@functools.cache
def _ladder() -> ModuleType:
    """The SDK's `mcp.shared.inbound`, loaded on the first request of this wire.

    It is a pure module (the standard library and `mcp_types`), but importing it by name first runs the SDK
    package's `__init__`, which imports the SDK's client and server: about 0.16 s of CPU on the first request,
    even under uvicorn, for code an mcpfusion server never runs. So its own file is executed as the import
    system would, without the package's `__init__`. Once the SDK package is loaded (the app uses it), or
    when anything is unexpected (the file moved, it imports the package itself), it is the ordinary import.
    """
    if "mcp" in sys.modules:  # the SDK package is loaded already: nothing to save
        return importlib.import_module(LADDER_MODULE)
    try:
        package = importlib.util.find_spec(LADDER_MODULE.partition(".")[0])  # finds `mcp`, does not run it
        if package is None or not package.submodule_search_locations:
            raise ImportError(LADDER_MODULE)
        path = Path(package.submodule_search_locations[0], *LADDER_MODULE.split(".")[1:]).with_suffix(".py")
        spec = importlib.util.spec_from_file_location(LADDER_MODULE, path)
        if spec is None or spec.loader is None:
            raise ImportError(LADDER_MODULE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[LADDER_MODULE] = module  # while it runs, as the import system does (dataclasses look)
        try:
            spec.loader.exec_module(module)
        finally:
            # Not left in place: the SDK's own import of it, if any, makes its own (its package then set).
            if sys.modules.get(LADDER_MODULE) is module:
                del sys.modules[LADDER_MODULE]
        if "mcp" in sys.modules:  # it imported the package after all: the SDK's own copy, then
            return importlib.import_module(LADDER_MODULE)
        return module
    except Exception:  # noqa: BLE001 - whatever failed, the ordinary import decides (and raises its own error)
        return importlib.import_module(LADDER_MODULE)


def _routing_headers(request: Request) -> dict[str, str] | str:
    """The routing headers of `request` (name -> value without surrounding whitespace, RFC 9110 optional
    whitespace), or the name of one sent more than once. Only these are decoded: the rest is read only for
    tools declaring x-mcp-header."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in request.scope["headers"]:
        if raw_name in _ROUTING:
            name: str = raw_name.decode("latin-1")
            if name in headers:
                return name
            headers[name] = raw_value.decode("latin-1").strip(" \t")
    return headers


def _shown(value: str) -> str:
    """A value from the body or a header, as a problem quotes it: cut, its control, bidi and format
    characters escaped (`visible_name`)."""
    return visible_name(value if len(value) <= 120 else value[:120] + "…")


NAME_NOT_TEXT = "(the name-bearing param is no string)"  # `_assume_fixed`'s mark for `_every_problem`


def _assume_fixed(message: dict[str, Any], headers: dict[str, str], refused: Any
                  ) -> tuple[dict[str, Any], dict[str, str], str] | None:
    """Which rung refused `message` (the ladder's order), what to tell the client of it, and the message
    and headers with that problem fixed as the body says (the body is what the client meant); None when
    the refusal is the ladder's last rungs (the version itself), after which nothing is left to find."""
    ladder = _ladder()
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    version_key, caps_key = protocol.PROTOCOL_VERSION_META_KEY, protocol.CLIENT_CAPABILITIES_META_KEY
    if not isinstance(meta, dict) or version_key not in meta or caps_key not in meta:
        sent = headers.get("mcp-protocol-version") or protocol.MODERN_PROTOCOL_VERSIONS[-1]
        meta = {version_key: sent, caps_key: {}, **(meta if isinstance(meta, dict) else {})}
        return {**message, "params": {**params, "_meta": meta}}, headers, refused.message
    version, method = meta[version_key], message.get("method")
    if headers.get("mcp-protocol-version") != version:
        if not isinstance(version, str):  # no header can carry it: the client must fix the envelope first
            return None
        if "mcp-protocol-version" in headers:
            return message, {**headers, "mcp-protocol-version": version}, refused.message
        return message, {**headers, "mcp-protocol-version": version}, (
            f"the MCP-Protocol-Version header is missing: send MCP-Protocol-Version: {_shown(version)}")
    if headers.get("mcp-method") != method:
        if not isinstance(method, str):
            return None
        if "mcp-method" in headers:
            return message, {**headers, "mcp-method": method}, refused.message
        return message, {**headers, "mcp-method": method}, (
            f"the Mcp-Method header is missing: send Mcp-Method: {_shown(method)} with this request")
    key = ladder.NAME_BEARING_METHODS.get(method, "")
    name = params.get(key)
    if name is not None and not isinstance(name, str):  # no header can carry it: the body itself is wrong
        return {**message, "params": {k: v for k, v in params.items() if k != key}}, headers, NAME_NOT_TEXT
    if isinstance(name, str) and ladder.decode_header_value(headers.get("mcp-name")) != name:
        text = refused.message if "mcp-name" in headers else (
            f"the Mcp-Name header is missing: send Mcp-Name: {_shown(ladder.encode_header_value(name))}")
        return message, {**headers, "mcp-name": ladder.encode_header_value(name)}, text
    return None


def served_versions_data(requested: Any) -> dict[str, Any]:
    """The data of an unsupported-protocol-version error (-32022): the version asked for and every version
    this server serves, on either wire, as `server/discover` lists them (the SDK's ladder names the
    2026-07-28 wire's alone: a client that also speaks 2025-11-25 could not learn it would be served)."""
    if isinstance(requested, str) and len(requested) > 120:  # (cut as the message quotes it: an answer never
        requested = requested[:120] + "…"                     # grows with what the client sent)
    return {"supported": list(protocol.SERVED_PROTOCOL_VERSIONS), "requested": requested}


def unsupported_version_text(shown: str, where: str) -> str:
    """The message of an unsupported-protocol-version error: the version (`shown`: as an error may quote it),
    where it was read, what is served."""
    return (f"Unsupported protocol version {shown} in {where}: this server serves "
            f"{', '.join(protocol.SERVED_PROTOCOL_VERSIONS)}")


ENVELOPE = "the envelope (params._meta)"


def _unsupported(refused: Any, first: bool) -> str:
    """The text of the ladder's last rungs: the SDK's "Unsupported protocol version" names neither the version
    nor where it was read (and after other problems its data, the first problem's, is not sent)."""
    data = refused.data
    if refused.code != jsonrpc.UNSUPPORTED_PROTOCOL_VERSION or not isinstance(data, dict):
        return str(refused.message)
    text = unsupported_version_text(_shown(str(data.get("requested"))), ENVELOPE)
    return text if first else text[0].lower() + text[1:]


def _every_problem(message: dict[str, Any], headers: dict[str, str], refused: Any, before: Any = None) -> Any:
    """The ladder's rejection `refused` of `message` (None: it passed), naming every problem the client must
    fix rather than the first only (a client fixing what it was told must not meet the next problem on its
    retry): each problem is assumed fixed and the ladder asked again. `before`: a problem found ahead of the
    ladder. The code and data are the first problem's, so they agree with the message's first clause; a
    missing header is named missing (the ladder says "does not match" of a header never sent)."""
    ladder = _ladder()
    first = before or refused
    if first is None:
        return None
    texts = [] if before is None else [before.message]
    for _ in range(5):  # the envelope, three headers, the version: at most one problem each
        if refused is None:
            break
        fixed = _assume_fixed(message, headers, refused)
        if fixed is None:
            texts.append(_unsupported(refused, first=not texts))
            break
        if fixed[2] is NAME_NOT_TEXT:  # (an invalid param, as the params check would say of it)
            method = message.get("method")
            key = ladder.NAME_BEARING_METHODS.get(method, "")
            text = f"Invalid params for {method}: {key} must be a string"
            if not texts:
                first = ladder.InboundLadderRejection(code=jsonrpc.INVALID_PARAMS, message=text)
            fixed = (fixed[0], fixed[1], text)
        message, headers, text = fixed
        texts.append(text)
        refused = ladder.classify_inbound_request(message, headers=headers)
        if not isinstance(refused, ladder.InboundLadderRejection):
            break
    text = "; ".join(texts)
    data = first.data
    if first.code == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION and isinstance(data, dict):
        data = served_versions_data(data.get("requested"))
    return ladder.InboundLadderRejection(code=first.code, data=data,
                                         message=text[0].upper() + text[1:] if text.startswith("the ") else text)


def _version_not_text(params: Any) -> str | None:
    """The invalid-params text of an envelope whose protocol version is there but not a string (the ladder
    compares it with the header and calls it a header mismatch: the body is what is wrong, as a missing one is)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or protocol.PROTOCOL_VERSION_META_KEY not in meta:
        return None
    if isinstance(meta[protocol.PROTOCOL_VERSION_META_KEY], str):
        return None
    key = protocol.PROTOCOL_VERSION_META_KEY
    return f'Invalid params: params._meta["{key}"] must be a string (e.g. "2026-07-28")'


# Envelopes that passed the ladder: (method, routing headers, params without arguments as JSON).
_PASSED: dict[tuple[Any, ...], None] = {}


def _classify(message: dict[str, Any], headers: dict[str, str], envelope: bytes | None) -> Any:
    """The SDK ladder's verdict on `message` and its routing `headers`: a rejection, or (protocol version,
    client info, client capabilities). A client sends the same envelope and headers with every request, and
    the ladder reads nothing else (never `arguments`), so what passed is remembered by the `envelope`
    (`params.envelope_key` of its params) and the headers (a bounded set); a request seen passing costs one
    lookup, its values read from its own `_meta`, exactly where the ladder reads them."""
    key = None if envelope is None else (message.get("method"), tuple(headers.items()), envelope)
    if key is not None and key in _PASSED:
        meta = message["params"]["_meta"]
        return (meta[protocol.PROTOCOL_VERSION_META_KEY], meta.get(protocol.CLIENT_INFO_META_KEY),
                meta[protocol.CLIENT_CAPABILITIES_META_KEY])
    ladder = _ladder()
    verdict = ladder.classify_inbound_request(message, headers=headers)
    if isinstance(verdict, ladder.InboundLadderRejection):
        return verdict
    if key is not None:
        if len(_PASSED) >= ACCEPTED_SIZE:
            _PASSED.clear()  # a burst of new envelopes: start again rather than track ages
        _PASSED[key] = None
    return verdict.protocol_version, verdict.client_info, verdict.client_capabilities


def _notification_problems(message: dict[str, Any], headers: dict[str, str]) -> Any:
    """The request ladder's rejection of a notification (None when it passes), asked of the envelope the
    notification implies: its `_meta` is optional and carries no required keys, so a version it does not
    state is the header's (or, with no header either, the server's, for the ladder to ask the header for),
    and capabilities (it has no use for any) are none. A `_meta` that is not an object comes first, as on a
    request."""
    ladder = _ladder()
    params = message.get("params") or {}
    meta = params.get("_meta", {})
    before = None
    if not isinstance(meta, dict):
        before = ladder.InboundLadderRejection(code=jsonrpc.INVALID_PARAMS, message="params._meta must be an object")
        meta = {}
    implied = {protocol.PROTOCOL_VERSION_META_KEY: headers.get("mcp-protocol-version")
               or protocol.MODERN_PROTOCOL_VERSIONS[-1], protocol.CLIENT_CAPABILITIES_META_KEY: {}, **meta}
    probe = {**message, "params": {**params, "_meta": implied}}
    verdict = ladder.classify_inbound_request(probe, headers=headers)
    return _every_problem(probe, headers, verdict if isinstance(verdict, ladder.InboundLadderRejection) else None,
                          before)


CLIENT_CLOSED = 499
"""The status logged for a call whose client closed the connection before its answer (nothing is sent)."""


HANGUP_WATCH_AFTER = 0.5
"""Seconds between a wire's looks at its running calls: a call still running at two looks in a row (so for
at least this long) has its connection watched for a hang-up. A watch is a task reading the connection (about
a tenth of a short call's CPU), and a call that answers sooner has nothing to cancel."""


class HangupWatch:
    """The running calls of one wire, each cancelled when its client closes the connection before the answer
    starts (on this wire closing is how a client cancels). One timer looks at them all every
    `HANGUP_WATCH_AFTER` seconds, while any runs: a timer per call cost more than the rest of the watch (~2 µs
    under uvloop, a few percent of a short tools/call); a call ending sooner costs a dict entry, no task."""

    __slots__ = ("_young", "_timer", "_loop")

    def __init__(self) -> None:
        self._young: dict[Hangup, None] = {}  # calls not watched yet, in the order they started
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self, receive: Receive, channel: Channel, task: asyncio.Task[Any] | None) -> Hangup:
        """Watch the call running in `task` (its `stop()` once its answer is ready)."""
        hangup = Hangup(self, receive, channel, task)
        # (The task's loop: `get_running_loop()` makes a getpid() system call on Python 3.11.)
        loop = task.get_loop() if task is not None else asyncio.get_running_loop()
        if loop is not self._loop:  # the first call, or an app served again on another loop (tests)
            if self._timer is not None:
                self._timer.cancel()
            self._young.clear()  # (calls of a loop that is gone: nothing of theirs can run any more)
            self._loop, self._timer = loop, None
        self._young[hangup] = None
        if self._timer is None:
            self._timer = loop.call_later(HANGUP_WATCH_AFTER, self._look)
        return hangup

    def _look(self) -> None:
        self._timer = None
        for hangup in [*self._young]:
            if hangup.seen:  # running at the previous look too
                del self._young[hangup]
                hangup.start()
            else:
                hangup.seen = True
        if self._young and self._loop is not None:
            self._timer = self._loop.call_later(HANGUP_WATCH_AFTER, self._look)


class Hangup:
    """One call's watch (see `HangupWatch`)."""

    __slots__ = ("_owner", "_receive", "_channel", "_task", "_watcher", "_fired", "seen")

    def __init__(self, owner: HangupWatch, receive: Receive, channel: Channel, task: asyncio.Task[Any] | None
                 ) -> None:
        self._owner = owner
        self._receive = receive
        self._channel = channel
        self._task = task
        self._watcher: asyncio.Task[None] | None = None
        self._fired = False
        self.seen = False

    def start(self) -> None:
        self._watcher = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        # The body is read already: the server's next message is the disconnect (anything else: stop).
        if (await self._receive())["type"] == "http.disconnect" and self._task is not None:
            self._fired = True
            self._channel.cancel("the client closed the connection")
            self._task.cancel()

    def stop(self) -> None:
        """Stop watching (the answer is ready, or another part now watches the connection)."""
        if self._watcher is None:
            self._owner._young.pop(self, None)  # (not watched yet: its owner forgets it)
        else:
            self._watcher.cancel()
        task = self._task
        if self._fired and task is not None and task is asyncio.current_task() and task.cancelling():
            task.uncancel()  # a handler that swallowed the cancellation: its task goes on (to send nothing)


class ModernWire(WirePipeline):
    """The sessionless wire's strategy: the header ladder, results stamped with the server's info,
    input-required rounds, a JSON answer that turns into SSE once the handler notifies, and
    `subscriptions/listen`. A JSON-RPC error's code sets the HTTP status."""

    status_for_errors = True

    def __init__(self, engine: Engine, settings: TransportSettings, broker: Broker) -> None:
        super().__init__(engine, settings)
        self.broker = broker
        self.tasks: set[asyncio.Task[Any]] = set()
        self.listening: dict[str, int] = {}  # open subscriptions/listen streams by caller (see `_listen`)
        self.hangups = HangupWatch()

    async def post(self, request: Request, message: Any) -> Response:
        if not isinstance(message, dict):
            return error_response(None, jsonrpc.INVALID_REQUEST,
                                  "Body must be a single JSON-RPC request or notification")
        if is_response(message):  # a client's answer: this wire never asks the client, so nothing awaits it
            return Response(status_code=202)  # (as the session wire takes one: the wires agree)
        if "id" not in message:
            return self._notification(request, message)
        refusal = invalid_request(message)
        if refusal is not None:
            return refusal
        msg_id = message["id"]
        method = message["method"]
        wants_json, wants_sse = accepts(request)
        if method == "subscriptions/listen" and not wants_sse:
            return http_error(406, "Not Acceptable: subscriptions/listen answers with text/event-stream",
                              request_id=msg_id)
        refusal = not_acceptable(wants_json, wants_sse, msg_id)
        if refusal is not None:
            return refusal
        headers = _routing_headers(request)
        if isinstance(headers, str):
            return error_response(msg_id, jsonrpc.HEADER_MISMATCH, f"{headers} header appears more than once")
        raw_params = message.get("params")
        envelope = envelope_key(raw_params) if raw_params.__class__ is dict else None
        params = raw_params or {}
        verdict = _classify(message, headers, envelope)
        if not isinstance(verdict, tuple):
            wrong = _version_not_text(params)
            if wrong is not None:
                return error_response(msg_id, jsonrpc.INVALID_PARAMS, wrong)
            verdict = _every_problem(message, headers, verdict)
            return error_response(msg_id, verdict.code, verdict.message, verdict.data)
        version, info, caps = verdict
        # (`any_header` False: no tool declares one, nothing to look up; None: not known yet)
        if method == "tools/call" and self.engine.any_header is not False and \
                not request.scope.get(TRUSTED_HEADERS_KEY):
            schema = self.engine.header_schema(params.get("name"), request)
            if schema is not None:
                arguments = params.get("arguments")
                all_headers = {k: v.strip(" \t") for k, v in request.headers.items()}
                rejection = _ladder().validate_mcp_param_headers(
                    schema, arguments if isinstance(arguments, dict) else {}, all_headers)
                if rejection is not None:
                    return error_response(msg_id, rejection.code, rejection.message, rejection.data)
        meta = params["_meta"]
        channel = InputResponsesChannel(progress_token=meta.get("progressToken"),
                                        log_level=meta.get(protocol.LOG_LEVEL_META_KEY))
        call = Call(method=method, params=params, id=msg_id, request=request, channel=channel,
                    protocol_version=version, modern=True,
                    client_capabilities=caps if isinstance(caps, dict) else {},
                    client_info=info if isinstance(info, dict) else {}, envelope=envelope)
        if method == "subscriptions/listen":
            too_many = self._too_many_uris(params)
            if too_many is not None:  # (before the params check: it would validate every URI first)
                return error_response(msg_id, jsonrpc.INVALID_PARAMS, too_many)
            try:
                check_params(method, call.protocol_version, params)
            except McpError as exc:
                return error_response(msg_id, exc.code, exc.message)
            return await self._listen(call)
        # (json_response: JSON, unless the client reads SSE only)
        streamable = wants_sse and not (self.settings.json_response and wants_json) and (
            channel.progress_token is not None or channel.log_level is not None
        )
        if not streamable:
            hangup = self.hangups.watch(request.receive, channel, asyncio.current_task())
            try:
                reply = await self.run(call)
            finally:
                hangup.stop()
            if reply is None:  # cancelled: its client closed the connection, nobody reads an answer
                return Response(status_code=CLIENT_CLOSED)
            return self._answer(reply, sse_only=not wants_json)
        return await self._stream(call, channel, sse_only=not wants_json)

    def _answer(self, reply: dict[str, Any], sse_only: bool) -> Response:
        """The reply as JSON, or as a one-event SSE body to a client that accepts only text/event-stream (an
        error whose code sets an HTTP status stays a JSON refusal)."""
        err = reply.get("error")
        if sse_only and (err is None or jsonrpc.http_status(err["code"]) == 200):
            return SSEBody(encode_message(None, reply))
        return self.respond(reply)

    def _notification(self, request: Request, message: dict[str, Any]) -> Response:
        refusal = invalid_request(message)  # (as a request's: the answer names what is wrong)
        if refusal is not None:
            return refusal
        headers = _routing_headers(request)
        if isinstance(headers, str):
            return error_response(None, jsonrpc.HEADER_MISMATCH, f"{headers} header appears more than once")
        rejection = _notification_problems(message, headers)
        if rejection is not None:
            return error_response(None, rejection.code, rejection.message, rejection.data)
        # Nothing to act on: cancellation on this wire is closing the response stream.
        return Response(status_code=202)

    async def finish(self, call: Call, value: dict[str, Any]) -> dict[str, Any]:
        """Every result names the server in its `_meta` (there is no initialize to learn it from)."""
        meta = value.get("_meta")
        value["_meta"] = {**meta, protocol.SERVER_INFO_META_KEY: self.engine.server_info} if isinstance(meta, dict) \
            else {protocol.SERVER_INFO_META_KEY: self.engine.server_info}
        return value

    async def _stream(self, call: Call, channel: InputResponsesChannel, sse_only: bool) -> Response:
        """Answer JSON unless the handler sends a notification first (or the client reads SSE only); then
        switch to SSE."""
        def fell_behind() -> None:
            channel.cancel("the client did not read the response stream")
            task.cancel()

        # Bounded: a client that does not read its stream is dropped (the call cancelled) rather than buffered.
        queue = BoundedQueue(on_drop=fell_behind)
        streamed = False  # once the handler sent a notification, the answer is a stream

        async def sink(message: dict[str, Any]) -> None:
            nonlocal streamed
            streamed = True
            event = sse_event(None, message)  # encoded once: its size for the bound, its text for the stream
            queue.put_nowait(event, len(event["data"]))

        channel.sink = sink

        async def run() -> None:
            try:
                # Nothing sent yet: the response has not started, a 401/403 can still be its status.
                reply = await self.run(call, inline=lambda: not streamed)
            except HTTPException as exc:  # (only then) raised again in the request's task, for its handlers
                queue.put_nowait((_DONE, exc), 0)
                return
            # None: cancelled (the client closed the connection, or fell behind reading): nobody reads any more.
            queue.put_nowait((_DONE, reply), 0)

        task = asyncio.create_task(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        # Until the answer starts, nothing else notices the client leave: closing is how it cancels.
        hangup = self.hangups.watch(call.request.receive, channel, task)
        try:
            first = await queue.next()
        finally:
            hangup.stop()
        if isinstance(first, tuple) and first[0] is _DONE:
            if isinstance(first[1], HTTPException):
                raise first[1]
            if first[1] is None:
                return Response(status_code=CLIENT_CLOSED)
            return self._answer(first[1], sse_only)

        async def events() -> AsyncIterator[dict[str, Any]]:
            item = first
            try:
                while item is not None:  # None: the reader fell behind and was dropped
                    if isinstance(item, tuple) and item[0] is _DONE:
                        if item[1] is not None:
                            yield sse_event(None, item[1])
                        return
                    yield item
                    item = await queue.next()
            finally:
                # Closing the response stream is how a 2026 client cancels.
                if not task.done():
                    channel.cancel("response stream closed")
                    task.cancel()

        return event_source(events(), SSE_HEADERS, self.settings.sse_ping_seconds)

    def _too_many_uris(self, params: dict[str, Any]) -> str | None:
        """Why a `subscriptions/listen` names too many resource URIs (None: it does not). Each URI is read as
        the caller before it is honoured: a list of hundreds of thousands held the event loop for seconds, so
        one longer than `max_listen_uris` is refused whole, unread."""
        requested = params.get("notifications")
        uris = requested.get("resourceSubscriptions") if isinstance(requested, dict) else None
        limit = self.settings.max_listen_uris
        if not isinstance(uris, list) or len(uris) <= limit:
            return None
        return (f"Invalid params for subscriptions/listen: notifications.resourceSubscriptions names {len(uris)} "
                f"URIs; this server takes at most {limit} in one request (at most "
                f"{self.engine.max_subscriptions} of them are honoured): send fewer")

    async def _listen(self, call: Call) -> Response:
        requested = call.params.get("notifications")
        if not isinstance(requested, dict):
            return error_response(call.id, jsonrpc.INVALID_PARAMS,
                                  "subscriptions/listen needs a 'notifications' object")
        caps = self.engine.capabilities(modern=True)
        honored: dict[str, Any] = {}
        if requested.get("toolsListChanged") is True:
            honored["toolsListChanged"] = True
        if requested.get("promptsListChanged") is True and "prompts" in caps:
            honored["promptsListChanged"] = True
        if requested.get("resourcesListChanged") is True and "resources" in caps:
            honored["resourcesListChanged"] = True
        tag = {SUBSCRIPTION_ID_KEY: call.id}
        # Open streams per caller, in this process, capped as sessions are on the other wire. Checked before
        # the resources are read: a refused listen runs none of the app's code.
        caller = caller_key(call.request)
        cap = self.settings.max_sessions_per_principal
        open_streams = self.listening.get(caller, 0)
        if open_streams >= cap:
            return retry_later(429, f"Too Many Requests: at most {cap} open subscriptions/listen streams per "
                                    "caller; close one first")
        # The slot is taken now, not when the stream starts: requests sent together are each counted.
        self.listening[caller] = open_streams + 1

        def release() -> None:
            left = self.listening.pop(caller, 1) - 1
            if left > 0:
                self.listening[caller] = left

        uris = requested.get("resourceSubscriptions")
        if isinstance(uris, list) and "resources" in caps:
            try:
                honored["resourceSubscriptions"] = await self.engine.allowed_subscriptions(uris, call)
            except McpError as exc:  # over the app's rate limit: refused as `resources/read` is (-32010)
                release()
                return error_response(call.id, exc.code, exc.message, exc.data)
            except BaseException:
                release()
                raise

        async def events() -> AsyncGenerator[dict[str, Any], None]:
            async with self.broker.subscribe("server") as sub:
                yield sse_event(None, notification("notifications/subscriptions/acknowledged",
                                                   {"_meta": tag, "notifications": honored}))
                while True:
                    message = await sub.get()
                    if message is None:  # this reader fell behind and was dropped (see `BoundedQueue`)
                        return
                    if not isinstance(message, dict):
                        continue
                    method = message.get("method")
                    if not isinstance(method, str):
                        continue
                    params = dict(message.get("params") or {})
                    if method == "notifications/resources/updated":
                        if params.get("uri") not in honored.get("resourceSubscriptions", ()):
                            continue
                    elif not honored.get(_FILTER_OF.get(method, ""), False):
                        continue
                    params["_meta"] = {**(params.get("_meta") or {}), **tag}
                    yield sse_event(None, notification(method, params))

        stream = events()
        try:
            # Its first step subscribes and gives the acknowledgement: done before the answer starts, so a broker
            # that cannot subscribe now (Redis unreachable) is a 503 to retry, as every other request during an
            # outage, never a stream cut short. (Started, the stream is closed by the loop if never sent.)
            first = await anext(stream)
        except Exception:  # noqa: BLE001 - whatever the broker raised, the client retries
            release()
            return retry_later(503, "Service Unavailable: the message broker is unreachable; retry later",
                               request_id=call.id)
        except BaseException:
            release()
            raise

        async def listening() -> AsyncIterator[dict[str, Any]]:
            """The acknowledgement, then the notifications; a broker failing under the stream ends it with a
            JSON-RPC error for the listen request (the client listens again), never a cut connection."""
            try:
                yield first
                async for event in stream:
                    yield event
            except Exception as exc:  # noqa: BLE001 - any broker failure ends this stream, never the server
                logging.getLogger("mcpfusion.mcp").warning("a subscriptions/listen stream ended early (broker: %r)",
                                                           exc)
                yield sse_event(None, jsonrpc.error(call.id, jsonrpc.INTERNAL_ERROR, "Service Unavailable: the "
                                                    "message broker failed; listen again later"))
            finally:
                await stream.aclose()  # leaves the subscription, however this stream ends

        return Releasing(event_source(listening(), SSE_HEADERS, self.settings.sse_ping_seconds), release)
