"""Resumable SSE streams of the session wire.

Every message written to a stream is first stored in the `EventStore` (that gives it its id), then
handed to the live response if it is still open, and published on the broker topic `stream:{id}` for
a client that resumed the stream with `Last-Event-ID` (possibly on another replica).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_core import to_json
from starlette.responses import Response

from .channel import Channel, NoBackChannel
from .jsonrpc import INTERNAL_ERROR, REQUEST_TIMEOUT, McpError, dumps, notification, request

if TYPE_CHECKING:
    from .broker import Broker
    from .events import EventStore
    from .sessions import Session
    from .settings import TransportSettings


class StreamHost(Protocol):
    """What a `SessionChannel` needs of its wire (the session wire, which imports this module)."""

    broker: Broker
    events: EventStore
    settings: TransportSettings
    local_stores: bool  # the in-process event store and broker: they neither block nor fail

CLOSE = object()
_STREAM_PREFIX = secrets.token_hex(6)  # this process's; with a counter, stream ids unique across replicas
_stream_numbers = itertools.count(1)
HELD = object()  # `first_event` waited long enough


def new_stream_id(session_id: str) -> str:
    """A new POST stream id of `session_id` (`{session}~{hex}`; `Last-Event-ID` finds its session by it)."""
    return f"{session_id}~{_STREAM_PREFIX}{next(_stream_numbers):x}"


logger = logging.getLogger("mcpfusion.mcp")


def is_response(message: Any) -> bool:
    return isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message)


def sse_event(event_id: str | None, message: dict[str, Any]) -> dict[str, Any]:
    event = {"event": "message", "data": dumps(message)}
    if event_id is not None:
        event["id"] = event_id
    return event


class SessionChannel(Channel):
    """Back channel of one request on the session wire.

    With a stream (SSE mode) messages go on the request's own stream; without one (JSON mode) they go to
    the session's GET stream, and a server request fails when no GET stream listens.
    """

    kind = "session"

    def __init__(self, wire: StreamHost, session: Session, stream_id: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wire = wire
        self.session = session
        self.stream_id = stream_id
        self.queue: asyncio.Queue[Any] | None = None  # the live stream's, made when first needed
        self.first: asyncio.Future[Any] | None = None  # set by `first_event` while it waits
        self.closed = False

    def _deliver(self, item: Any) -> None:
        """Hand an item to the POST's response: to `first_event` while it waits, else to the live stream."""
        first = self.first
        if first is not None and not first.done():
            first.set_result(item)
        else:
            self.live_queue().put_nowait(item)

    def live_queue(self) -> asyncio.Queue[Any]:
        if self.queue is None:
            self.queue = asyncio.Queue()
        return self.queue

    async def emit(self, message: dict[str, Any]) -> None:
        wire = self.wire
        # Stored and published in one step: subscribers see a stream's events in id order, and GET-stream
        # events survive a gap between two GET connections.
        if self.stream_id is None:
            topic = f"session:{self.session.id}"
            is_request = "method" in message and "id" in message
            event_id, receivers = await wire.broker.publish_event(
                wire.events, f"{self.session.id}~get", topic, message
            )
            if is_request and not receivers:
                # A client opens its GET stream in the background after initialize: a request (which needs
                # it) waits a moment for it, publishing the stored event again; notifications are best effort.
                for delay in (0.05, 0.1, 0.2, 0.4, 0.8):
                    await asyncio.sleep(delay)
                    receivers = await wire.broker.publish(topic, (event_id, message))
                    if receivers:
                        return
                raise NoBackChannel("no stream to send the request on: open a GET stream or use SSE mode")
            return
        event_id, _ = await wire.broker.publish_event(wire.events, self.stream_id, f"stream:{self.stream_id}", message)
        if not self.closed:
            self._deliver((event_id, message))

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.emit(notification(method, params))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        rid = f"s-{secrets.token_hex(8)}"
        timeout = self.wire.settings.client_request_timeout
        async with self.wire.broker.subscribe(f"resp:{self.session.id}:{rid}") as sub:
            await self.emit(request(rid, method, params))
            try:
                reply = await asyncio.wait_for(sub.get(), timeout)
            except TimeoutError:
                raise McpError(REQUEST_TIMEOUT, f"The client did not answer {method} within {timeout:g} s") from None
        if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
            err = reply["error"]
            code, message = int(err.get("code", INTERNAL_ERROR)), str(err.get("message", "client error"))
            raise McpError(code, message, err.get("data"))
        result = reply.get("result") if isinstance(reply, dict) else None
        return result if isinstance(result, dict) else {}

    async def finish(self, reply: dict[str, Any]) -> None:
        """Emit the reply that ends this request's stream, whatever the event store does.

        A store that fails (Redis restarting) is retried for `settings.reply_store_timeout` seconds, so the
        reply is stored and resumable once it is back; after that (or if it hangs, frozen) the reply goes to
        the open response unstored: the stream always ends with its result, only resuming it is lost."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wire.settings.reply_store_timeout
        delay = 0.05
        local = self.wire.local_stores
        while True:
            try:
                if local:  # nothing can hang: no asyncio timer per reply
                    await self.emit(reply)
                else:
                    async with asyncio.timeout(max(0.0, deadline - loop.time())):
                        await self.emit(reply)
                return
            except Exception as exc:  # noqa: BLE001 - any store failure; the reply must still be delivered
                failure = exc
            if loop.time() + delay >= deadline:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        logger.warning("could not store the reply to %s (%r); sent unstored on the open stream",
                       reply.get("id"), failure)
        if self.stream_id is not None and not self.closed:
            self._deliver((None, reply))

    def close_stream(self) -> None:
        if self.stream_id is not None and not self.closed:
            self.closed = True
            self._deliver(CLOSE)


def encode_message(event_id: str | None, message: dict[str, Any]) -> bytes:
    """`sse_event(event_id, message)` as the bytes sse-starlette's encoder writes for it. Written directly:
    neither field can hold a line break (event ids are `{session}~{hex}#{n}`; compact JSON escapes them), so
    the encoder's line splitting has nothing to do."""
    head = b"event: message\r\ndata: " if event_id is None else \
        b"id: " + event_id.encode() + b"\r\nevent: message\r\ndata: "
    data: bytes = to_json(message, fallback=str)
    return head + data + b"\r\n\r\n"


def encode_priming(priming: dict[str, Any]) -> bytes:
    """A priming event (`{"id", "data": "", "retry"?}`) as sse-starlette writes it."""
    retry = priming.get("retry")
    tail = b"\r\n" if retry is None else b"retry: %d\r\n\r\n" % retry
    event_id: str = priming["id"]
    return b"id: " + event_id.encode() + b"\r\ndata: \r\n" + tail


class SSEBody(Response):
    """A complete SSE stream sent as one HTTP body: for a POST whose reply came before any other message.

    The bytes `EventSourceResponse` would write event by event, without its streaming machinery (a send
    task, a disconnect watcher and a ping task per response). Headers are set directly (hot path)."""

    def __init__(self, body: bytes, session_id: str | None = None) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        self.raw_headers = [
            (b"content-length", str(len(body)).encode()), (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache, no-transform"), (b"x-accel-buffering", b"no"),
        ]
        if session_id is not None:
            self.raw_headers.append((b"mcp-session-id", session_id.encode()))


async def first_event(channel: SessionChannel, hold: float) -> Any:
    """The first thing the call puts on its stream (`(event_id, message)` or `CLOSE`) or, after `hold`
    seconds without one, `HELD`. A future and a timer: no queue round trip or extra task on the hot path."""
    loop = asyncio.get_running_loop()
    first = channel.first = loop.create_future()

    def held() -> None:
        if not first.done():
            first.set_result(HELD)

    timer = loop.call_later(hold, held)
    try:
        return await first
    finally:
        timer.cancel()
        channel.first = None


async def live_events(
    channel: SessionChannel, priming: dict[str, Any] | None, first: Any = None,
) -> AsyncIterator[dict[str, Any]]:
    """SSE events of a POST stream: priming event, then messages until the response (or close).

    `first` is an item already taken off the channel's queue (see `first_event`)."""
    if priming is not None:
        yield priming
    queue = channel.live_queue()
    item = first if first is not None and first is not HELD else await queue.get()
    while True:
        if item is CLOSE:
            return
        event_id, message = item
        yield sse_event(event_id, message)
        if is_response(message):
            return
        item = await queue.get()
