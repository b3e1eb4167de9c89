"""Resumable SSE streams of the session wire.

Every message written to a stream is first stored in the `EventStore` (that gives it its id), then
handed to the live response if it is still open, and published on the broker topic `stream:{id}` for
a client that resumed the stream with `Last-Event-ID` (possibly on another replica).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from . import jsonrpc
from .broker import RESUBSCRIBED, QueueSubscription
from .channel import Channel, NoBackChannel
from .events import InMemoryEventStore, StoreRefused
from .jsonrpc import REQUEST_TIMEOUT, McpError, dumps, encode, error, notification, request

if TYPE_CHECKING:
    from .broker import Broker, Subscription
    from .events import EventStore
    from .sessions import Session
    from .settings import TransportSettings


class StreamHost(Protocol):
    """What a `SessionChannel` needs of its wire (the session wire, which imports this module)."""

    broker: Broker
    events: EventStore
    settings: TransportSettings
    local_stores: bool  # the in-process event store and broker: they neither block nor fail

    async def still_there(self, session_id: str) -> bool:
        """Whether the store still has the session (unreachable: assumed so)."""
        ...


STORE_PAUSE = 5.0
"""Seconds a request's notifications go to its open stream unstored after the event store failed one (a
frozen store would otherwise hold each progress or log message for its timeout)."""

def new_stream_id(session_id: str) -> str:
    """A new POST stream id of `session_id` (`{session}~{hex}`; `Last-Event-ID` finds its session by it): drawn
    at random, unique across replicas (a counter shared by every session told each client how many requests
    the others made between two of its own)."""
    return f"{session_id}~{secrets.token_hex(8)}"


logger = logging.getLogger("mcpfusion.mcp")


def is_response(message: Any) -> bool:
    return isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message)


STREAM_END = {"mcpfusion/streamEnd": True}
"""Stored (never sent) as the last event of a request's stream that ends without a response (the request
was cancelled): a client resuming that stream is ended at once."""

STREAM_LOST = {"mcpfusion/streamEnd": True, "mcpfusion/lost": True}
"""`STREAM_END` of a request that nothing runs any more (the replica running it died): a client resuming the
stream is told 404, so it sends the request again rather than resume for ever."""


CANCELLED_AT_SHUTDOWN = "Request cancelled: the server is shutting down"
"""The error (-32603) of a request whose call the server cancelled while its stream was open."""


def is_stream_end(message: Any) -> bool:
    return isinstance(message, dict) and message.get("mcpfusion/streamEnd") is True


def is_stream_lost(message: Any) -> bool:
    return isinstance(message, dict) and message.get("mcpfusion/lost") is True


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
        self.stream: PostStream | None = None  # the POST's SSE answer (SSE mode), set before the call runs
        self.closed = False
        self.refusal: Response | None = None  # the HTTP answer instead of the reply, while none has started
        self._unstored_until = 0.0  # loop time until which notifications skip a failing store
        self.asking = 0  # server requests awaiting the client's answer (`request`)
        self.lost = False  # a wait ended because the session is gone: the call fails -32001 on its own

    async def _deliver(self, event_id: str | None, message: dict[str, Any]) -> None:
        if self.stream is not None:
            events = self.wire.events
            data = events.encoded(message) if isinstance(events, InMemoryEventStore) else None
            await self.stream.put(event_id, message, data)

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
            await self._deliver(event_id, message)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification, best effort: one the store or broker cannot take now goes to the open stream
        unstored (not resumable), or is dropped; the call goes on, since its work is done or under way."""
        message = notification(method, params)
        now = asyncio.get_running_loop().time()
        if now >= self._unstored_until:
            try:
                await self.emit(message)
                return
            except Exception as exc:  # noqa: BLE001 - any store or broker failure
                if self._unstored_until == 0.0:  # one line per request, not one per progress step
                    logger.warning("could not store or publish %s (%r); sent unstored on the open stream, if "
                                   "any", method, exc)
                self._unstored_until = now + STORE_PAUSE
        if self.stream_id is not None and not self.closed:
            await self._deliver(None, message)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        rid = f"s-{secrets.token_hex(8)}"
        topic = answer_topic(self.session.id, rid)
        broker = self.wire.broker
        keeps = hasattr(broker, "expect")
        async with broker.subscribe(topic) as sub:
            if keeps:
                if isinstance(sub, QueueSubscription):
                    sub.recovers = True  # told when a reconnection may have lost the answer: it is kept for us
                # Awaited in Redis until our wait ends (a margin past it): only then is an answer kept, so a
                # client stores no answer the server did not ask for, nor one it no longer waits for.
                await broker.expect(  # type: ignore[attr-defined]
                    [(self.session.id, answer_box(rid), self.wire.settings.client_request_timeout + 5.0)])
            self.asking += 1
            try:
                await self.emit(request(rid, method, params))
                reply = await self._answer(sub, rid, method)
            finally:
                self.asking -= 1
                if keeps:
                    await self._forget(rid)
        if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
            # The client's own error, told back in a few words under the server's code (the client's -32601
            # would say the call's own method does not exist): its code named, its message cut short, its
            # data left out (whatever the client sent is not the server's answer to repeat).
            err = reply["error"]
            code = err.get("code")
            said = err.get("message")
            raise jsonrpc.ClientAnswerError(jsonrpc.INTERNAL_ERROR,
                                            f"The client answered {method} with an error"
                                            f"{f' ({code})' if code.__class__ is int else ''}: "
                                            f"{said[:200] if isinstance(said, str) else 'no message'}")
        result = reply.get("result") if isinstance(reply, dict) else None
        return result if isinstance(result, dict) else {}

    async def _answer(self, sub: Subscription, rid: str, method: str) -> Any:
        """The client's answer on `sub`, or -32001 once `client_request_timeout` has passed or the session is
        gone (lost with its store: nobody ends this wait). Looked for in its box too (a broker that keeps
        it) when the broker has subscribed again, and whenever the wait is quiet as long as a GET stream's."""
        wire = self.wire
        timeout = wire.settings.client_request_timeout
        check = wire.settings.sse_ping_seconds or 15.0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise McpError(REQUEST_TIMEOUT, f"The client did not answer {method} within {timeout:g} s")
            try:
                async with asyncio.timeout(min(check, left)):
                    reply = await sub.get()
            except TimeoutError:
                reply = RESUBSCRIBED  # quiet: look at the session and the box
            if reply is not RESUBSCRIBED:
                return reply
            if not await wire.still_there(self.session.id):
                self.lost = True
                raise McpError(REQUEST_TIMEOUT, f"The session ended (lost with the session store, or deleted) "
                                                f"before the client answered {method}")
            reply = await self._kept(rid)
            if reply is not None:
                return reply

    async def _kept(self, rid: str, forget: bool = False) -> Any:
        """The answer to `rid` kept by a broker that keeps them (None: none, or the broker cannot say); `forget`:
        and no longer await one."""
        collect = getattr(self.wire.broker, "collect", None)
        if collect is None:
            return None
        try:
            return (await collect([(self.session.id, answer_box(rid))], forget=forget))[0]
        except Exception as exc:  # noqa: BLE001 - unreachable now: looked at again later (or expires)
            logger.warning("could not look for a kept answer (%r)", exc)
            return None

    async def _forget(self, rid: str) -> None:
        """The wait for `rid` is over (answered, timed out, cancelled): a later answer is not kept, and one kept
        meanwhile (the answer came live too) goes now rather than when the wait's deadline passes."""
        await self._kept(rid, forget=True)

    async def finish(self, reply: dict[str, Any]) -> None:
        """Emit the reply that ends this request's stream, whatever the event store does.

        A store that fails (Redis restarting) is retried for `settings.reply_store_timeout` seconds, so the
        reply is stored and resumable once it is back; after that (or if it hangs, frozen) the reply goes to
        the open response unstored: the stream always ends with its result, only resuming it is lost."""
        failure: Exception | None
        if self.wire.local_stores:  # the in-process stores: nothing to wait for, no timer, no retry
            try:
                await self.emit(reply)
                return
            except Exception as exc:  # noqa: BLE001 - the reply must still be delivered
                failure = exc
        else:
            failure = await self._emit_retrying(reply)
            if failure is None:
                return
        logger.warning("could not store the reply to %s (%r); sent unstored on the open stream",
                       reply.get("id"), failure)
        if self.stream_id is not None and not self.closed:
            await self._deliver(None, reply)

    async def _emit_retrying(self, reply: dict[str, Any]) -> Exception | None:
        """Emit `reply` within `reply_store_timeout`, retrying a failing store; the last failure, or None."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wire.settings.reply_store_timeout
        delay = 0.05
        while True:
            try:
                async with asyncio.timeout(max(0.0, deadline - loop.time())):
                    await self.emit(reply)
                return None
            except StoreRefused as exc:  # refused, not unreachable (full, read-only): waiting will not help
                return exc
            except Exception as exc:  # noqa: BLE001 - any store failure; the reply must still be delivered
                failure = exc
            if loop.time() + delay >= deadline:
                return failure
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    def close_stream(self) -> None:
        if self.stream_id is not None and not self.closed:
            self.closed = True
            if self.stream is not None:
                self.stream.close()


def answer_topic(session_id: str, request_id: Any) -> str:
    """The broker topic of the client's answer to server request `request_id`."""
    return f"resp:{session_id}:{request_id}"


def answer_box(request_id: str) -> str:
    """The box of a session where a broker keeps the client's answer to server request `request_id`."""
    return f"resp:{request_id}"


def keeps_answer(request_id: Any) -> bool:
    """Whether `request_id` is one `SessionChannel.request` makes (`s-` and 16 hex digits): only its answer may
    be kept (if that request awaits it), a client's answer to anything else is only published."""
    return (isinstance(request_id, str) and len(request_id) == 18 and request_id.startswith("s-")
            and all(c in "0123456789abcdef" for c in request_id[2:]))


def encode_message(event_id: str | None, message: dict[str, Any], data: bytes | None = None) -> bytes:
    """`sse_event(event_id, message)` as the bytes sse-starlette's encoder writes for it (`data`: the
    message's JSON bytes when already encoded). Written directly: neither field can hold a line break (event
    ids are `{session}~{hex}#{n}`; compact JSON escapes them), so the encoder's line splitting has nothing
    to do."""
    head = b"event: message\r\ndata: " if event_id is None else \
        b"id: " + event_id.encode() + b"\r\nevent: message\r\ndata: "
    if data is None:
        data = encode(message)
    return head + data + b"\r\n\r\n"


def encode_priming(priming: dict[str, Any]) -> bytes:
    """A priming event (`{"id", "data": "", "retry"?}`) as sse-starlette writes it."""
    retry = priming.get("retry")
    tail = b"\r\n" if retry is None else b"retry: %d\r\n\r\n" % retry
    event_id: str = priming["id"]
    return b"id: " + event_id.encode() + b"\r\ndata: \r\n" + tail


SSE_RAW_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_PING = b": ping\r\n\r\n"  # an SSE comment: keeps proxies from closing a quiet stream


class SSEBody(Response):
    """A complete SSE stream sent as one HTTP body (the bytes `EventSourceResponse` would write event by
    event, without its streaming machinery). Headers are set directly (hot path)."""

    def __init__(self, body: bytes, session_id: str | None = None) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        self.raw_headers = [(b"content-length", str(len(body)).encode()), *SSE_RAW_HEADERS]
        if session_id is not None:
            self.raw_headers.append((b"mcp-session-id", session_id.encode()))


class Holds:
    """When the calls of one wire's SSE replies have run `settings.sse_hold_seconds` without answering: one
    asyncio timer per event loop for all of them (a timer made and cancelled per reply cost ~4% of an SSE
    reply). Each event loop (one per thread) has its own `LoopHolds`."""

    def __init__(self, settings: TransportSettings) -> None:
        self.settings = settings
        self._loops: dict[asyncio.AbstractEventLoop, LoopHolds] = {}
        self._last: LoopHolds | None = None  # the loop that held last: almost always the only one

    def add(self, stream: PostStream) -> LoopHolds:
        """Hold `stream` on the running loop; the holds to `discard` it from once its call has answered."""
        loop = asyncio.get_running_loop()
        holds = self._last
        if holds is None or holds.loop is not loop:
            holds = self._last = self._loops.get(loop) or self._new(loop)
        holds.add(stream, self.settings.sse_hold_seconds)
        return holds

    def _new(self, loop: asyncio.AbstractEventLoop) -> LoopHolds:
        for old in [old for old in list(self._loops) if old.is_closed()]:  # a snapshot: other threads add
            self._loops.pop(old, None)
        holds = self._loops[loop] = LoopHolds(loop)
        return holds


class LoopHolds:
    """The held responses of one event loop, and the timer of the first to open."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._due: dict[PostStream, float] = {}  # each held response and the loop time it opens at
        self._timer: asyncio.TimerHandle | None = None

    def add(self, stream: PostStream, seconds: float) -> None:
        at = self._due[stream] = self.loop.time() + seconds
        timer = self._timer
        if timer is None or at < timer.when():  # the same hold for every call, unless the setting changed
            if timer is not None:
                timer.cancel()
            self._timer = self.loop.call_at(at, self._fire)

    def discard(self, stream: PostStream) -> None:
        self._due.pop(stream, None)

    def _fire(self) -> None:
        self._timer = None
        now = self.loop.time()
        for stream in [stream for stream, at in self._due.items() if at <= now]:
            del self._due[stream]
            stream.open()
        if self._due:
            self._timer = self.loop.call_at(min(self._due.values()), self._fire)


async def _done() -> None:
    """What a `PostStream` runs once its call has run."""


class PostStream(Response):
    """The SSE answer of a POST on the session wire, which runs its call while it answers (in the request's
    own task: no extra task, queue or future per call).

    A call that sends nothing before its reply gets one body: the priming event and the reply (both stored
    for `Last-Event-ID`), like a JSON answer. The stream opens instead (headers and priming event at once,
    then every event as the call emits it, keep-alive comments every `ping` seconds) on the first other
    event (progress, logging, a server request), when the call is still running after `hold` seconds (so its
    client has the priming event id early), or on `close_stream()` (the call goes on; its client resumes).

    A call cancelled by the server (uvicorn cancels what still runs when a graceful shutdown times out) ends a
    started stream with its request's -32603 "Request cancelled" error (when `request_id` is known) and the
    end of the body, so its client reads a complete response rather than a cut one."""

    def __init__(
        self, run: Callable[[], Awaitable[None]], priming: bytes, session_id: str, holds: Holds, ping: float,
        request_id: Any = None,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.body = b""
        self.raw_headers = [*SSE_RAW_HEADERS, (b"mcp-session-id", session_id.encode())]
        self._run = run
        self._priming = priming
        self._holds = holds
        self._ping = ping
        self._send: Send | None = None
        self._head: asyncio.Future[None] | None = None  # headers and priming event on their way: streaming
        self._pinger: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._reply = b""  # the reply, when it came before the stream opened
        self._ended = False
        self._refusal: Response | None = None  # answered instead of the stream (see `refuse`)
        self.request_id = request_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._send = send
        held = self._holds.add(self)
        try:
            try:
                await self._run()
            except asyncio.CancelledError:  # (a client's cancel returns: see `WirePipeline.run`)
                if self._head is not None:
                    await self._cancelled()
                raise
            finally:
                held.discard(self)
                # The call's closure holds its channel, which holds this response: leaving the cycle to the
                # garbage collector would make it walk every call's objects again (a cost per SSE reply).
                self._run = _done
            if self._head is None and self._refusal is not None:
                await self._refusal(scope, receive, send)
            elif self._head is None:
                self._ended = True
                body = self._priming + self._reply
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-length", str(len(body)).encode()), *self.raw_headers]})
                await send({"type": "http.response.body", "body": body})
            else:
                await self._end()
        finally:
            # The same for the server's `send`: it holds the request's scope, whose call context holds the
            # channel, which holds this response (a cycle of ~35 objects per SSE reply under uvicorn).
            self._send = None

    def refuse(self, response: Response) -> None:
        """Answer `response` (an HTTP refusal: 503 + Retry-After) instead of the stream, which has not started;
        called by the call, which then returns without a reply."""
        assert self._head is None
        self._refusal = response

    @property
    def started(self) -> bool:
        """Whether the response has started (its headers are sent or on their way)."""
        return self._head is not None

    def open(self) -> asyncio.Future[None]:
        """Start the live stream (headers and priming event; once): the call runs on, or has to send first."""
        if self._head is None:
            self._head = asyncio.ensure_future(self._send_head())
        return self._head

    async def _send_head(self) -> None:
        assert self._send is not None
        await self._send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        if self._reply:  # the reply came before the hold timer fired: it ends the stream
            self._ended = True
            await self._send({"type": "http.response.body", "body": self._priming + self._reply})
            return
        await self._send({"type": "http.response.body", "body": self._priming, "more_body": True})
        if self._ping > 0 and not self._ended:
            self._pinger = asyncio.ensure_future(self._keep_alive())

    async def _keep_alive(self) -> None:
        assert self._send is not None
        while not self._ended:
            await asyncio.sleep(self._ping)
            if not self._ended:
                await self._send({"type": "http.response.body", "body": _PING, "more_body": True})

    async def put(self, event_id: str | None, message: dict[str, Any], encoded: bytes | None = None) -> None:
        """An event of the call (stored already; `encoded`: its JSON bytes, when known): kept for the one body
        if it is the reply, else streamed."""
        if self._ended:
            return
        data = encode_message(event_id, message, encoded)
        last = is_response(message)
        if last and self._head is None:
            self._reply = data
            return
        await self.open()
        if self._ended:
            return
        self._ended = last
        if last:
            self._stop_pinger()
        assert self._send is not None
        await self._send({"type": "http.response.body", "body": data, "more_body": not last})

    def close(self) -> None:
        """End the stream now (from the call, which goes on: later events are only stored)."""
        if not self._ended and self._closer is None:
            self.open()
            self._closer = asyncio.ensure_future(self._end())

    async def _end(self) -> None:
        await self.open()
        if self._ended:
            return
        self._ended = True
        self._stop_pinger()
        assert self._send is not None
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _cancelled(self) -> None:
        """End the started stream of a call the server cancelled: its request's error event, then the end of the
        body. Within a second: the server is stopping, and a client that reads nothing must not hold it."""
        if self._ended:
            return
        self._ended = True
        self._stop_pinger()
        body = b""
        if self.request_id is not None:
            body = encode_message(None, error(self.request_id, jsonrpc.INTERNAL_ERROR, CANCELLED_AT_SHUTDOWN))
        try:
            async with asyncio.timeout(1.0):
                await self.open()  # (its head may still be on its way)
                assert self._send is not None
                await self._send({"type": "http.response.body", "body": body, "more_body": False})
        except Exception:  # noqa: BLE001, S110 - the client went away, or does not read: nothing more to end
            pass

    def _stop_pinger(self) -> None:
        if self._pinger is not None:
            self._pinger.cancel()
            self._pinger = None
