"""The handshake-era wire (2025-06-18, 2025-11-25): initialize, `Mcp-Session-Id`, SSE, GET, DELETE."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from . import jsonrpc, protocol
from .broker import (
    REFUSED,
    RESUBSCRIBED,
    Broker,
    InMemoryBroker,
    QueueSubscription,
    Subscription,
    publish_best_effort,
)
from .engine import Call, Engine, check_params
from .events import EventStore, InMemoryEventStore, NotIssued, parse_event_id
from .events import event_id as nth_event_id
from .jsonrpc import McpError, is_valid_id, result
from .pipeline import WirePipeline, invalid_request
from .sessions import (
    MAX_CLIENT_FIELD_BYTES,
    Session,
    SessionLimitError,
    SessionQuotaError,
    SessionStore,
    new_session_id,
    oversized_client_field,
)
from .settings import TransportSettings
from .streams import (
    STREAM_END,
    STREAM_LOST,
    Holds,
    PostStream,
    SessionChannel,
    SSEBody,
    answer_box,
    answer_topic,
    encode_message,
    encode_priming,
    is_response,
    is_stream_end,
    is_stream_lost,
    keeps_answer,
    new_stream_id,
    sse_event,
)
from .wire import (
    SSE_HEADERS,
    Releasing,
    accepts,
    default_principal,
    error_response,
    event_source,
    header,
    http_error,
    json_response,
    not_acceptable,
    retry_later,
    shown_header,
)

logger = logging.getLogger("mcpfusion.mcp")
DEFAULT_LOG_LEVEL = "info"
_STATE_METHODS = frozenset({"logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
_GET_STREAM_KEY = "mcpfusion/getStream"
"""A control message on a session's GET-stream topic: None probes for a stream, a token takes over."""
_RUNNING_KEY = "mcpfusion/running"
"""A control message on a request stream's topic: the replica running the request answers a probe."""
PROBE_WAIT = 5.0
"""Seconds a resumed request stream waits for the replica running its request to answer a probe before it
ends the stream as lost (that replica died)."""
_LOST = object()  # what `_live` yields once nothing runs the request any more
_STORE_DOWN = "Service Unavailable: the session store cannot save the change now; retry later"
_BROKER_DOWN = "Service Unavailable: the message broker is unreachable; retry later"


MAX_REASON = 256
"""Characters of a `notifications/cancelled` reason sent to other replicas (and kept): a reason is for a log."""
MAX_MARKED_ID = 200
"""Characters (as JSON) of the longest request id marked running in Redis (see `RunningMarks`)."""
MARK_AFTER = 0.05
"""Seconds a call runs before it is marked running in Redis, with every other call started meanwhile (one round
trip for all; a call that ends sooner costs none)."""
MARK_SECONDS = 600.0
"""How long a running mark lasts; renewed while its call runs (a replica that dies stops renewing)."""


class Undelivered(Exception):
    """A client's message that must reach another request (a cancellation) could not be sent or kept: 503."""


class RunningMarks:
    """The calls running here that Redis knows of: a cancellation posted to another replica while this one's
    pub/sub connection is being re-made is kept for them, and only for them (`broker.publish_kept`), so a client
    cannot store cancellations of requests that run nowhere. Marked in batches once they have run `MARK_AFTER`
    seconds, renewed every third of `MARK_SECONDS`, unmarked (with any cancellation kept for them) when they end,
    before their reply: a later request reusing the id is never cancelled by an old one."""

    def __init__(self, broker: Any, inflight: dict[tuple[str, Any], SessionChannel]) -> None:
        self.broker = broker
        self.inflight = inflight
        self.marked: dict[tuple[str, Any], float] = {}  # call -> loop time of its mark (sent or on its way)
        self._soon: asyncio.TimerHandle | None = None  # the next round for calls started since the last
        self._renewal: asyncio.TimerHandle | None = None  # the next round for marks due to be renewed
        self._task: asyncio.Task[None] | None = None  # the marks being written
        self._again = False  # calls started while marks were being written: another round
        self._failing = False  # one log line per outage

    def started(self) -> None:
        """A call started: marked with the others at the next round (no await, no round trip now)."""
        if self._soon is None:
            self._soon = asyncio.get_running_loop().call_later(MARK_AFTER, self._fire)

    async def ended(self, key: tuple[str, Any]) -> None:
        """A marked call ended: its mark and what was kept for it go (after any write of the mark on its way)."""
        if self.marked.pop(key, None) is None:
            return
        task = self._task
        try:
            if task is not None and not task.done():
                await asyncio.shield(task)
            await self.broker.collect([(key[0], _cancel_box(key[1]))], forget=True)
        except Exception as exc:  # noqa: BLE001 - the mark expires on its own; the call is done
            logger.warning("could not unmark a finished call in the broker (%r)", exc)

    def _fire(self) -> None:
        self._soon = None
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._mark(), name="mcpfusion-running-marks")

    async def _mark(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._again = False
            now = loop.time()
            due = now - MARK_SECONDS / 3
            fresh = [key for key in self.inflight if key not in self.marked and _cancel_box(key[1]) is not None]
            renew = [key for key, at in self.marked.items() if at <= due]
            for key in fresh + renew:
                self.marked[key] = now
            try:
                for keys, is_new in ((fresh, True), (renew, False)):
                    done = await self.broker.expect(
                        [(sid, _cancel_box(rid), MARK_SECONDS) for sid, rid in keys], fresh=is_new)
                    for key, ok in zip(keys, done, strict=True):
                        if not ok:  # its session has too many marks: a cancellation of it is only published
                            self.marked.pop(key, None)
                self._failing = False
            except Exception as exc:  # noqa: BLE001 - unmarked calls lose only cancellations sent in a reconnection
                if not self._failing:
                    logger.warning("could not mark running calls in the broker (%r)", exc)
                self._failing = True
                for key in fresh + renew:
                    self.marked.pop(key, None)
            if not self._again:
                break
        if self.marked and self._renewal is None:
            self._renewal = loop.call_later(MARK_SECONDS / 3, self._renew)

    def _renew(self) -> None:
        self._renewal = None
        self._fire()


class SessionWire(WirePipeline):
    """The session wire's strategy: sessions, SSE streams that resume, GET streams, DELETE; JSON-RPC errors to
    requests travel in a 200 response, like the reference SDK."""

    def __init__(
        self, engine: Engine, settings: TransportSettings, sessions: SessionStore, events: EventStore,
        broker: Broker,
    ) -> None:
        super().__init__(engine, settings)
        self.sessions = sessions
        self.events = events
        self.broker = broker
        # Exactly the in-process store and broker (a subclass may do I/O): replies skip the store timeout.
        self.local_stores = type(events) is InMemoryEventStore and type(broker) is InMemoryBroker
        self.inflight: dict[tuple[str, Any], SessionChannel] = {}
        self.running: dict[str, int] = {}  # session id -> its requests in `inflight` (`max_inflight_per_session`)
        self.holds = Holds(settings)  # when a held SSE reply opens its live stream
        self.get_streams: dict[str, str] = {}  # session id -> the token of its GET stream in this process
        self.running_streams: set[str] = set()  # request streams whose call runs (or answers) in this process
        self._cancel_listener: asyncio.Task[Any] | None = None
        # A broker that keeps messages for what waits on them is told which calls run here (see `RunningMarks`).
        self._marks = RunningMarks(broker, self.inflight) if hasattr(broker, "expect") else None
        # The store's in-flight hooks (optional, see `SessionStore`): a session is not idle while a call runs.
        self._started: Callable[[Session], None] | None = getattr(sessions, "request_started", None)
        self._ended: Callable[[Session], None] | None = getattr(sessions, "request_ended", None)

    async def principal_of(self, request: Request) -> tuple[str | None, str | None]:
        """(principal, tenant) of the request; `settings.principal` overrides the principal."""
        principal, tenant = default_principal(request)
        resolver = self.settings.principal
        if resolver is None:
            return principal, tenant
        value = resolver(request)
        if inspect.isawaitable(value):
            value = await value
        return (None if value is None else str(value)), tenant

    # -- POST -----------------------------------------------------------------------------------------

    async def post(self, request: Request, message: Any, version: str | None) -> Response:
        if isinstance(message, list):
            return error_response(None, jsonrpc.INVALID_REQUEST, "Batch requests are not supported; send one message")
        if not isinstance(message, dict):
            return error_response(None, jsonrpc.INVALID_REQUEST, "The body must be one JSON-RPC message object")
        if is_response(message):
            return await self._client_response(request, message)
        refusal = invalid_request(message)
        if refusal is not None:
            return refusal
        msg_id = message.get("id")
        has_id = "id" in message
        wants_json = wants_sse = False
        if has_id:
            wants_json, wants_sse = accepts(request)
            refusal = not_acceptable(wants_json, wants_sse, msg_id)
            if refusal is not None:
                return refusal
        if message["method"] == "initialize":
            if not has_id:
                return error_response(None, jsonrpc.INVALID_REQUEST, "initialize must be a request (with an id)")
            if header(request, b"mcp-session-id"):
                # A session's id: an ended or unknown one is 404 as for any request (the client starts again
                # without it); a live one is initialized already (a second session would hold its quota slot).
                found, refusal = await self._session(request, msg_id)
                return refusal or error_response(
                    msg_id, jsonrpc.INVALID_REQUEST, "Bad Request: this session is initialized already; send "
                    "initialize without an Mcp-Session-Id header to start a new session", status=400)
            return await self._initialize(request, message, wants_json, wants_sse)
        session, refusal = await self._session(request, msg_id)
        if refusal is not None:
            return refusal
        assert session is not None
        if version is not None and version not in protocol.HANDSHAKE_PROTOCOL_VERSIONS:
            return error_response(msg_id, jsonrpc.INVALID_REQUEST,
                                  f"Unsupported MCP-Protocol-Version: {shown_header(version)}", status=400)
        if not has_id:
            try:
                await self._client_notification(session, message)
            except SessionLimitError:  # the store cannot save the session now: the client may send it again
                return retry_later(503, "Service Unavailable: the session store is unreachable; retry later")
            except Undelivered:
                return retry_later(503, _BROKER_DOWN)
            return Response(status_code=202)
        return await self._request(request, session, message, self._use_sse(wants_json, wants_sse))

    def _use_sse(self, wants_json: bool, wants_sse: bool) -> bool:
        """Whether a request's answer is an SSE stream: whenever the client reads SSE, unless the server
        answers JSON (`settings.json_response`) and the client reads that too."""
        return wants_sse and not (self.settings.json_response and wants_json)

    async def _initialize(self, request: Request, message: dict[str, Any], wants_json: bool, wants_sse: bool
                          ) -> Response:
        params = message.get("params") or {}
        msg_id = message["id"]
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            return error_response(msg_id, jsonrpc.INVALID_PARAMS, "initialize needs params.protocolVersion (a string)")
        try:
            check_params("initialize", self.engine.negotiate(requested), params)
        except McpError as exc:
            return error_response(msg_id, exc.code, exc.message)
        version = self.engine.negotiate(requested)
        caps = params.get("capabilities")
        info = params.get("clientInfo")
        oversized = oversized_client_field(caps, info)
        if oversized is not None:  # kept for the session's whole life: refused rather than held
            return error_response(msg_id, jsonrpc.INVALID_PARAMS, f"Invalid params for initialize: params."
                                  f"{oversized} is larger than {MAX_CLIENT_FIELD_BYTES} bytes as JSON, the most "
                                  "a session keeps")
        principal, tenant = await self.principal_of(request)
        session = Session(
            id=new_session_id(), protocol_version=version,
            client_capabilities=caps if isinstance(caps, dict) else {},
            client_info=info if isinstance(info, dict) else {},
            principal=principal, tenant=tenant,
            # an anonymous session's quota owner (never its binding: a client's address may change)
            peer=None if principal or request.client is None else request.client.host,
        )
        try:
            await self.sessions.create(session)
        except SessionQuotaError as exc:
            return retry_later(429, f"Too Many Requests: {exc}", exc.retry_after, msg_id)
        except SessionLimitError as exc:
            return retry_later(503, f"Service Unavailable: {exc}; retry later", exc.retry_after, msg_id)
        body = result(msg_id, self.engine.initialize_result(version))
        headers = {"Mcp-Session-Id": session.id}
        if not self._use_sse(wants_json, wants_sse):
            return json_response(body, headers=headers)

        return SSEBody(encode_message(None, body), session.id)

    async def _session(self, request: Request, msg_id: Any) -> tuple[Session | None, Response | None]:
        sid = header(request, b"mcp-session-id")
        if not sid:
            return None, error_response(msg_id, jsonrpc.INVALID_REQUEST, "Bad Request: Missing Mcp-Session-Id header; "
                                        "send initialize first", status=400)
        try:
            session = await self.sessions.get(sid)
        except SessionLimitError:  # the store is unreachable: the session may exist, so never 404
            return None, retry_later(503, "Service Unavailable: the session store is unreachable; retry later",
                                     request_id=msg_id)
        if session is None or (session.principal is not None
                               and session.principal != (await self.principal_of(request))[0]):
            return None, error_response(msg_id, jsonrpc.INVALID_REQUEST, "Session not found", status=404)
        return session, None

    async def _client_response(self, request: Request, message: dict[str, Any]) -> Response:
        session, refusal = await self._session(request, None)
        if refusal is not None:
            return refusal
        assert session is not None
        rid = message.get("id")
        topic = answer_topic(session.id, rid)
        ours = keeps_answer(rid)  # an id this server's requests use: someone may wait for it
        keep = getattr(self.broker, "publish_kept", None) if ours else None
        try:
            if keep is not None:
                # Kept as well as published if its request still awaits it (a waiter whose broker connection
                # is being re-made hears nothing and collects it once subscribed again: `SessionChannel.request`);
                # a late or repeated answer, or one to a request never sent, is only published.
                received, kept = await keep(topic, message, session.id, answer_box(str(rid)))
                if kept == REFUSED and not received:
                    return retry_later(503, "Service Unavailable: the answer could not be kept for its waiting "
                                            "request; retry later")
                return Response(status_code=202)
            received = await self.broker.publish(topic, message)
        except Exception:  # noqa: BLE001 - the answer did not reach its request: the client may send it again
            return retry_later(503, _BROKER_DOWN)
        if not received and ours and self.broker.distributed:
            # A broker that keeps nothing, and nobody heard it: its waiter may be between two connections.
            return retry_later(503, "Service Unavailable: the answer reached no waiting request; retry later")
        return Response(status_code=202)

    async def _client_notification(self, session: Session, message: dict[str, Any]) -> None:
        method = message["method"]
        params = message.get("params") or {}
        if method == "notifications/initialized":
            if not session.initialized:
                session.initialized = True
                await self.sessions.save(session)
        elif method == "notifications/cancelled":
            rid = params.get("requestId")
            if not is_valid_id(rid):  # none (optional in 2025-11-25), null or not an id: it names no request
                return
            reason = params.get("reason")
            if not self._cancel_local(session.id, rid, reason):
                # The request may run on another replica (shared broker); its cancel listener acts.
                await self._send_cancel(session.id, rid, reason)

    async def _send_cancel(self, session_id: str, rid: Any, reason: Any) -> None:
        """Publish a cancellation for the replica running `rid`; with a broker that keeps messages also kept if
        the request runs (marked by its replica, see `RunningMarks`), for a listener whose connection is being
        re-made (`_collect_cancels`), or `Undelivered` (503) when neither is possible."""
        cancel = {"session": session_id, "requestId": rid,
                  "reason": reason[:MAX_REASON] if isinstance(reason, str) else None}
        keep = getattr(self.broker, "publish_kept", None)
        box = _cancel_box(rid)
        if keep is None or box is None:  # (an id too long to be marked runs nowhere marked)
            await publish_best_effort(self.broker, "cancel", cancel)
            return
        try:
            received, kept = await keep("cancel", cancel, session_id, box)
        except Exception as exc:  # noqa: BLE001 - neither sent nor kept: the client may send it again
            logger.warning("could not publish a cancellation (%r)", exc)
            raise Undelivered from None
        if kept == REFUSED and not received:
            raise Undelivered

    async def _recover(self) -> None:
        """After the broker subscribed again (a lost connection loses what was published meanwhile): act on what
        may have been missed, cancellations kept for calls running here and deletions of their sessions."""
        await self._collect_cancels()
        await self._end_gone_sessions()

    async def _collect_cancels(self) -> None:
        """Cancel the calls running here whose cancellation was kept (only a marked call can have one)."""
        marks = self._marks
        if marks is None:
            return
        running = [key for key in self.inflight if key in marks.marked]
        if not running:
            return
        try:
            found = await self.broker.collect([(sid, _cancel_box(rid)) for sid, rid in running])  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - the listener must live on; the broker is failing again
            logger.warning("could not look for cancellations kept while reconnecting (%r)", exc)
            return
        for (sid, rid), cancel in zip(running, found, strict=True):
            if isinstance(cancel, dict):
                self._cancel_local(sid, rid, cancel.get("reason"))

    async def _end_gone_sessions(self) -> None:
        """Cancel the calls running here of a session deleted (or lost) meanwhile: its deletion is published only,
        so a replica between two connections never heard it."""
        sessions = list({sid for sid, _ in self.inflight})
        there = await asyncio.gather(*(self.still_there(sid) for sid in sessions))
        gone = {sid for sid, alive in zip(sessions, there, strict=True) if not alive}
        for (sid, _), channel in list(self.inflight.items()):
            # (a call waiting for the client's answer looks itself, and fails -32001: the session ended)
            if sid in gone and not (channel.asking or channel.lost) and channel.task is not None:
                channel.cancel("session terminated")
                channel.task.cancel()

    def _cancel_local(self, session_id: Any, rid: Any, reason: Any) -> bool:
        if not is_valid_id(rid):  # (a bool would find the request whose id is 1)
            return False
        channel = self.inflight.get((str(session_id), rid))
        if channel is None:
            return False
        channel.cancel(reason if isinstance(reason, str) else None)
        if channel.task is not None:
            channel.task.cancel()
        return True

    def _listen_for_cancels(self) -> None:
        """With a cross-process broker (`broker.distributed`), follow the "cancel" topic so a
        `notifications/cancelled` posted to another replica reaches the requests running here."""
        if not self.broker.distributed:
            return
        if self._cancel_listener is not None and not self._cancel_listener.done():
            return

        async def listen() -> None:
            async with self.broker.subscribe("cancel") as sub:
                if isinstance(sub, QueueSubscription) and hasattr(self.broker, "collect"):
                    sub.recovers = True  # told `RESUBSCRIBED` after a reconnection: cancellations were kept
                while True:
                    msg = await sub.get()
                    if msg is RESUBSCRIBED:
                        await self._recover()
                        continue
                    if not isinstance(msg, dict):
                        continue
                    if msg.get("deleted") is True:  # said in so many words: never inferred from a missing id
                        self._cancel_session(str(msg.get("session")))
                    elif "probe" in msg:
                        await self._answer_probe(msg["probe"])
                    else:
                        self._cancel_local(msg.get("session"), msg.get("requestId"), msg.get("reason"))

        task = self._cancel_listener = asyncio.create_task(listen(), name="mcpfusion-cancel-listener")
        # A broker outage ends the listener; the next request starts a new one.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _request(self, request: Request, session: Session, message: dict[str, Any], use_sse: bool
                       ) -> Response:
        self._listen_for_cancels()
        params = message.get("params") or {}
        meta = params.get("_meta")
        progress_token = meta.get("progressToken") if isinstance(meta, dict) else None
        headers = {"Mcp-Session-Id": session.id}
        stream_id = new_stream_id(session.id) if use_sse else None
        channel = SessionChannel(self, session, stream_id, progress_token=progress_token,
                                 log_level=session.log_level or DEFAULT_LOG_LEVEL)
        call = Call(method=message["method"], params=params, id=message["id"], request=request,
                    channel=channel, protocol_version=session.protocol_version, session=session,
                    client_capabilities=session.client_capabilities, client_info=session.client_info)
        if not use_sse:
            reply = await self.run(call)
            if channel.refusal is not None:
                return channel.refusal
            if reply is None:
                return Response(status_code=204, headers=headers)
            return self.respond(reply, headers)
        assert stream_id is not None
        priming = b""
        if self._priming_wanted(session):
            try:
                priming = encode_priming(await self._priming(stream_id))
            except Exception as exc:  # noqa: BLE001 - an unreachable store costs resumability, not the call
                logger.warning("no priming event for %s (event store: %r)", stream_id, exc)

        async def run() -> None:
            # Until the stream opens, a failing auth dependency (HTTPException 401/403) is raised out of the
            # response, whose exception handlers answer it as an HTTP status with its challenge (an MCP client
            # starts its OAuth flow on a 401, never on a JSON-RPC error); after, it is -32010 in the stream.
            self.running_streams.add(stream_id)  # until its reply is out: resumers ask (`_answer_probe`)
            try:
                reply = await self.run(call, inline=lambda: not stream.started)
                if channel.refusal is not None and not stream.started:
                    stream.refuse(channel.refusal)
                elif reply is not None:
                    await channel.finish(reply)
                else:
                    channel.close_stream()
                    await self._end_stream(stream_id)
            finally:
                self.running_streams.discard(stream_id)

        # The call runs while the response is sent: most send nothing before their reply and get one body
        # (priming event + reply, both stored for Last-Event-ID); progress, logging, a server request or a
        # slow call open the live stream (see `PostStream`).
        stream = channel.stream = PostStream(run, priming, session.id, self.holds, self.settings.sse_ping_seconds,
                                             request_id=call.id)
        return stream

    async def run(self, call: Call, inline: bool | Callable[[], bool] = True) -> dict[str, Any] | None:
        """The shared pipeline, with the call registered for `notifications/cancelled` while it runs."""
        channel = call.channel
        session = call.session
        # Keyed by the id as sent: 7 and "7" are two requests (a dict tells an int from a str).
        key = (session.id, call.id) if session else None
        if session is not None and key is not None:
            if key in self.inflight:  # an id already in flight in this session: its cancel would be ambiguous
                return jsonrpc.error(call.id, jsonrpc.INVALID_REQUEST, "A request with this id is already "
                                     "running in this session: use a new id for each request")
            running = self.running.get(session.id, 0)
            if running >= self.settings.max_inflight_per_session:
                return self._too_many(call)
            self.running[session.id] = running + 1
            self.inflight[key] = channel  # type: ignore[assignment]
            if channel.task is None:
                channel.task = asyncio.current_task()
            if self._started is not None:
                self._started(session)
            if self._marks is not None:
                self._marks.started()
        try:
            return await super().run(call, inline)
        finally:
            if session is not None and key is not None:
                self.inflight.pop(key, None)
                running = self.running.get(session.id, 1) - 1
                if running:
                    self.running[session.id] = running
                else:
                    del self.running[session.id]
                if self._ended is not None:
                    self._ended(session)
                if self._marks is not None and key in self._marks.marked:  # (most calls never are)
                    await self._marks.ended(key)

    def _too_many(self, call: Call) -> dict[str, Any]:
        """The refusal of a request past `max_inflight_per_session`: 429 + Retry-After, as the other quotas
        answer (the JSON-RPC error is what a caller gets that cannot use it)."""
        message = (f"Too Many Requests: this session already runs {self.settings.max_inflight_per_session} "
                   "requests at once (max_inflight_per_session); send it again once one has ended")
        if isinstance(call.channel, SessionChannel):
            call.channel.refusal = retry_later(429, message, request_id=call.id)
        return jsonrpc.error(call.id, jsonrpc.INVALID_REQUEST, message)

    async def _end_stream(self, stream_id: str, end: dict[str, Any] = STREAM_END) -> None:
        """Store the end of a request's stream that ends without a response (the request was cancelled, or
        `STREAM_LOST`: nothing runs it any more), so a client resuming it is told at once instead of waiting
        for a response that never comes."""
        try:
            await self.broker.publish_event(self.events, stream_id, f"stream:{stream_id}", end)
        except Exception as exc:  # noqa: BLE001 - an unreachable store: a resumer still ends with the session
            logger.warning("could not store the end of %s (%r)", stream_id, exc)

    async def finish(self, call: Call, value: dict[str, Any]) -> dict[str, Any]:
        """Methods that change the session (log level, subscriptions) save it before answering; a store that
        cannot save it makes the answer a 503 with Retry-After (the change is not kept: send it again)."""
        if call.method in _STATE_METHODS and call.session is not None:
            try:
                await self.sessions.save(call.session)
            except SessionLimitError:
                if isinstance(call.channel, SessionChannel):
                    call.channel.refusal = retry_later(503, _STORE_DOWN, request_id=call.id)
                raise McpError(jsonrpc.INTERNAL_ERROR, _STORE_DOWN) from None
        return value

    # -- GET ------------------------------------------------------------------------------------------

    async def get(self, request: Request) -> Response:
        _, wants_sse = accepts(request)
        if header(request, b"accept") is not None and not wants_sse:
            return http_error(406, "Not Acceptable: the GET stream needs Accept: text/event-stream")
        session, refusal = await self._session(request, None)
        if refusal is not None:
            return refusal
        assert session is not None
        headers = {**SSE_HEADERS, "Mcp-Session-Id": session.id}
        last = header(request, b"last-event-id")
        if last:
            parsed = parse_event_id(last)
            stream_id = parsed[0] if parsed is not None else ""
            # Never 404 here: on a request naming a session, 404 tells the client that the session is gone (it
            # must start a new one), and this session is alive; only its stream cannot be resumed.
            if not stream_id.startswith(session.id + "~"):
                return http_error(400, "Unknown Last-Event-ID for this session: open the GET stream without it")
            if stream_id.endswith("~get"):  # the GET stream itself goes on live, even once its events expired
                # Looked at here, before the stream starts (its replay comes once it listens): an event number
                # it never sent would leave the client skipping or waiting for events that never come.
                try:
                    await self.events.replay_after(last)
                except NotIssued:
                    return _not_issued()
                except Exception:  # noqa: BLE001, S110 - an unreachable store: the stream goes on live as ever
                    pass
                return self._get_stream(session, headers, last)
            # A request's stream the store no longer knows (expired, evicted, or never issued) has nothing to
            # replay and nothing will ever follow on it: say so rather than hold an empty stream open forever
            # (and store nothing under an id the client chose).
            try:
                replay = await self.events.replay_after(last)
            except NotIssued:
                return _not_issued()
            except Exception:  # noqa: BLE001 - the stream may well exist: retry, never 404
                return retry_later(503, "Service Unavailable: the event store is unreachable; retry later")
            if replay is None:
                return http_error(410, "Unknown Last-Event-ID: the stream has expired or was never issued; send "
                                       "the request again")
            if _lost(replay[1]):
                return http_error(410, "Gone: the server running this request stopped before it answered; send "
                                       "the request again")
            return event_source(_ending_cleanly(self._resume(session, stream_id, last)), headers,
                                self.settings.sse_ping_seconds)
        return await self._new_get_stream(session, headers)

    async def _new_get_stream(self, session: Session, headers: dict[str, str]) -> Response:
        """A GET stream without Last-Event-ID, or 409 while the session has one (the spec: a message goes on
        one stream only, never broadcast; the SDK refuses the same way). One that resumes with Last-Event-ID
        takes over instead (`_get_stream`): its client lost the first, which the server may not know yet."""
        if session.id in self.get_streams:
            return _get_conflict()
        self.get_streams[session.id] = token = secrets.token_hex(8)  # taken before any await: no race here
        try:
            elsewhere = self.broker.distributed and await self._listened_elsewhere(session.id)
        except Exception:  # noqa: BLE001 - the broker is unreachable: so would the stream be
            self._release_get_stream(session.id, token)
            return retry_later(503, "Service Unavailable: the message broker is unreachable; retry later")
        if elsewhere:
            self._release_get_stream(session.id, token)
            return _get_conflict()
        return self._get_stream(session, headers, None, token)

    def _get_stream(self, session: Session, headers: dict[str, str], last: str | None, token: str | None = None
                    ) -> Response:
        """The session's GET stream (`last`: resumed, taking over from any other), released when it ends."""
        if token is None:
            self.get_streams[session.id] = token = secrets.token_hex(8)
        response = event_source(_ending_cleanly(self._standalone(session, last, token)), headers,
                                self.settings.sse_ping_seconds)
        return Releasing(response, functools.partial(self._release_get_stream, session.id, token))

    def _release_get_stream(self, session_id: str, token: str) -> None:
        if self.get_streams.get(session_id) == token:  # (a stream taken over leaves its successor's alone)
            del self.get_streams[session_id]

    async def _listened_elsewhere(self, session_id: str) -> bool:
        """Whether another replica holds a GET stream of the session: the topic it listens on has receivers
        (a probe its streams ignore)."""
        return await self.broker.publish(f"session:{session_id}", {_GET_STREAM_KEY: None}) > 0

    @staticmethod
    def _priming_wanted(session: Session) -> bool:
        return _primes(session.protocol_version)

    async def _priming(self, stream_id: str) -> dict[str, Any]:
        event: dict[str, Any] = {"id": await self.events.store_event(stream_id, None), "data": ""}
        if self.settings.sse_retry_ms is not None:
            event["retry"] = self.settings.sse_retry_ms
        return event

    async def _primings(self, session: Session, stream_id: str) -> AsyncIterator[dict[str, Any]]:
        """The priming event of a stream of `session` that is going on live, if its version wants one and the
        store takes it (else none: the stream goes on, only resuming it from here is lost)."""
        if not self._priming_wanted(session):
            return
        try:
            event = await self._priming(stream_id)
        except Exception as exc:  # noqa: BLE001 - an unreachable or full store costs resumability only
            logger.warning("no priming event on a resumed or GET stream (event store: %r)", exc)
            return
        yield event

    async def _answer_probe(self, stream_id: Any) -> None:
        """Tell a client resuming `stream_id` (on any replica) that its request runs here."""
        if isinstance(stream_id, str) and stream_id in self.running_streams:
            await publish_best_effort(self.broker, f"stream:{stream_id}", {_RUNNING_KEY: True})

    async def _ask_runner(self, session_id: str, stream_id: str) -> bool:
        """Whether a probe is out for the replica running `stream_id`'s request (it answers on the stream's
        topic); False when it runs here, or the broker cannot be asked now (asked again later)."""
        if stream_id in self.running_streams:
            return False
        if not self.broker.distributed:  # no other process: nothing runs it
            return True
        try:
            await self.broker.publish("cancel", {"session": session_id, "probe": stream_id})
        except Exception:  # noqa: BLE001 - unknown, not gone
            return False
        return True

    async def still_there(self, session_id: str) -> bool:
        """Whether the store still has the session (an unreachable store: assume so, and look again later)."""
        try:
            return await self.sessions.get(session_id) is not None
        except Exception:  # noqa: BLE001 - a store outage is not the session's end
            return True

    async def _resume(self, session: Session, stream_id: str, last: str) -> AsyncGenerator[dict[str, Any], None]:
        """Replay what a client missed on a stream, then follow it live until its response, the end of a
        cancelled request, or the end of the session."""
        async with self.broker.subscribe(f"stream:{stream_id}", f"ended:{session.id}") as sub:
            # Subscribed before replaying, so nothing emitted in between is lost; duplicates are skipped. The
            # whole stream is read, not only what follows `last`: a stream that ended at or before `last`
            # (its response, or the end of a cancelled request) has nothing more to come.
            replay = await self.events.replay_after(nth_event_id(stream_id, 0))
            seen = _number(last)
            for number_id, message in (replay[1] if replay else []):
                if is_stream_lost(message):  # its request answered after all (see below)
                    continue
                if is_stream_end(message):
                    return
                if _number(number_id) > seen:
                    seen = _number(number_id)
                    yield sse_event(number_id, message)
                if is_response(message):
                    return
            # Primed after the replay: a priming id is newer than the replayed events, so a client cut right
            # after it must not resume past events it never received.
            async for priming in self._primings(session, stream_id):
                yield priming
            async for item in self._live(sub, session, stream_id):
                if item is _LOST:  # told once here; resuming again is a 404
                    await self._end_stream(stream_id, STREAM_LOST)
                    return
                number_id, message = item
                if is_stream_end(message):
                    return
                if _number(number_id) <= seen:
                    continue
                yield sse_event(number_id, message)
                if is_response(message):
                    return

    async def _live(self, sub: Subscription, session: Session, stream_id: str) -> AsyncIterator[Any]:
        """The events of `sub` until the session is gone: deleted (None published on `ended:{id}`), or lost
        with its store, which nobody announces (looked at when the stream is quiet). Then `_LOST` once no
        replica runs the request any more (it died): asked at once, then whenever the stream is quiet."""
        check = self.settings.sse_ping_seconds or 15.0
        asked = await self._ask_runner(session.id, stream_id)
        while True:
            try:
                async with asyncio.timeout(PROBE_WAIT if asked else check):
                    item = await sub.get()
            except TimeoutError:
                if asked:
                    yield _LOST
                    return
                if not await self.still_there(session.id):
                    return
                asked = await self._ask_runner(session.id, stream_id)
                continue
            if item is None:  # the session ended
                return
            asked = False  # anything on the stream says its request runs
            if not (isinstance(item, dict) and _RUNNING_KEY in item):
                yield item

    async def _standalone(self, session: Session, last: str | None, token: str
                          ) -> AsyncGenerator[dict[str, Any], None]:
        """The session's GET stream: server notifications and requests not tied to a client request. It ends
        when another stream of the session, `token` its own, takes over."""
        stream_id = f"{session.id}~get"
        async with self.broker.subscribe(f"session:{session.id}", "server") as sub:
            replayed: set[str] = set()
            if last is not None:
                # Subscribed first, so this stream hears its own announcement and what follows it.
                await self.broker.publish(f"session:{session.id}", {_GET_STREAM_KEY: token})
                replay = await self.events.replay_after(last)
                for number_id, message in (replay[1] if replay else []):
                    replayed.add(number_id)
                    yield sse_event(number_id, message)
            async for priming in self._primings(session, stream_id):  # after the replay, as in `_resume`
                yield priming
            check = self.settings.sse_ping_seconds or 15.0
            while True:
                try:
                    async with asyncio.timeout(check):
                        message = await sub.get()
                except TimeoutError:
                    # A quiet stream looks at its session now and then: one lost with its store (a Redis
                    # restart) has no one left to end it, so the stream ends here.
                    if not await self.still_there(session.id):
                        return
                    continue
                if message is None:  # the session ended
                    return
                if isinstance(message, dict) and _GET_STREAM_KEY in message:
                    taker = message[_GET_STREAM_KEY]
                    if taker is not None and taker != token:  # a resumed stream took over (None: a probe)
                        return
                    continue
                event_id: str | None
                if isinstance(message, (list, tuple)):
                    # Stored by its publisher (`broker.publish_event`); may also have been replayed above.
                    event_id, message = message
                    if event_id in replayed:
                        continue
                else:
                    if not await self._wanted(session, message):
                        continue
                    event_id = await self._store_get_event(stream_id, message)
                yield sse_event(event_id, message)

    async def _store_get_event(self, stream_id: str, message: dict[str, Any]) -> str | None:
        """The id of `message` stored on the GET stream, or None (sent unstored) when the store fails."""
        try:
            return await self.events.store_event(stream_id, message)
        except Exception as exc:  # noqa: BLE001 - an unreachable or full store costs resumability only
            logger.warning("a GET stream notification was sent unstored (event store: %r)", exc)
            return None

    async def _wanted(self, session: Session, message: dict[str, Any]) -> bool:
        if message.get("method") != "notifications/resources/updated":
            return True
        try:
            current = await self.sessions.get(session.id)
        except SessionLimitError:  # the subscriptions cannot be read now: told only what it surely asked for
            return False
        uri = (message.get("params") or {}).get("uri")
        return current is not None and uri in current.subscriptions

    # -- DELETE ---------------------------------------------------------------------------------------

    async def delete(self, request: Request) -> Response:
        session, refusal = await self._session(request, None)
        if refusal is not None:
            return refusal
        assert session is not None
        try:
            await self.sessions.delete(session.id)
        except SessionLimitError:
            return retry_later(503, "Service Unavailable: the session store is unreachable; retry later")
        drop = getattr(self.broker, "drop_kept", None)
        if drop is not None:  # what was kept for the session's requests (it would expire with them)
            try:
                await drop(session.id)
            except Exception as exc:  # noqa: BLE001 - the session is deleted; what was kept expires
                logger.warning("could not drop what was kept for a deleted session (%r)", exc)
        # Deleted: what follows tells the streams and calls of the session, best effort (a stream left behind
        # by a broker outage ends when it finds the session gone, a call when its replica subscribes again).
        await publish_best_effort(self.broker, f"session:{session.id}", None)
        self._cancel_session(session.id)
        await publish_best_effort(self.broker, f"ended:{session.id}", None)  # resumed request streams (`_resume`)
        if self.broker.distributed:  # calls of this session running on other replicas
            await publish_best_effort(self.broker, "cancel", {"session": session.id, "requestId": None,
                                                              "deleted": True, "reason": "session terminated"})
        return Response(status_code=200)

    def _cancel_session(self, session_id: str) -> None:
        for (sid, _), channel in list(self.inflight.items()):
            if sid == session_id and channel.task is not None:
                channel.cancel("session terminated")
                channel.task.cancel()


@functools.lru_cache(maxsize=16)
def _primes(version: str) -> bool:
    """Streams of this protocol version start with a priming event (2025-11-25 on)."""
    return protocol.is_version_at_least(version, "2025-11-25")


async def _ending_cleanly(events: AsyncGenerator[dict[str, Any], None]) -> AsyncIterator[dict[str, Any]]:
    """`events`, ended with one log line rather than cut mid-body with an exception when a store fails under
    them (the broker unreachable, say): its client resumes or opens the stream again."""
    async with contextlib.aclosing(events) as stream:
        try:
            async for event in stream:
                yield event
        except Exception as exc:  # noqa: BLE001 - any store or broker failure ends the stream, never the server
            logger.warning("an SSE stream ended early (store or broker: %r)", exc)


def _lost(events: list[tuple[str, dict[str, Any]]]) -> bool:
    """Whether a replayed request stream ended as lost, without a response."""
    return any(is_stream_lost(m) for _, m in events) and not any(is_response(m) for _, m in events)


def _cancel_box(request_id: Any) -> str | None:
    """The box of a session where a broker keeps the cancellation of `request_id` (7 and "7" are two requests);
    None for an id too long to be marked running (see `RunningMarks`)."""
    if isinstance(request_id, str) and len(request_id) > MAX_MARKED_ID:  # (not even encoded: it may be MBs)
        return None
    box = f"cancel:{jsonrpc.dumps(request_id)}"
    return box if len(box) <= MAX_MARKED_ID + 7 else None


def _not_issued() -> Response:
    """400 for a Last-Event-ID of this session's stream past its last event: never sent, so no place to resume
    from (400 as for a foreign id, not 410: nothing expired; never 404: the session lives)."""
    return http_error(400, "Unknown Last-Event-ID for this session: this stream never sent that event; resume "
                           "from the id of the last event received")


def _get_conflict() -> Response:
    return http_error(409, "Conflict: this session already has a GET stream open, and a session has one only; "
                           "close it first, or resume it with Last-Event-ID")


def _number(event_id: str) -> int:
    parsed = parse_event_id(event_id)
    return parsed[1] if parsed is not None else 0
