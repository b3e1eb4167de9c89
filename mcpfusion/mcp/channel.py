"""What a request handler can send back to the client while it runs.

A transport gives every request a `Channel`. The session wire writes notifications and server-initiated
requests on the request's SSE stream; the 2026-07-28 wire has no back channel for requests, so `ask`
answers from the client's `inputResponses` or records the missing requests, which the engine turns into
an input-required result once the handler returns or raises.
"""

from __future__ import annotations

import asyncio
from typing import Any

from . import jsonrpc
from .jsonrpc import McpError, ProtocolSignal, notification

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOG_RANK = {level: i for i, level in enumerate(LOG_LEVELS)}


class NoBackChannel(RuntimeError):
    """The client cannot be asked anything on this transport (REST, tests, JSON mode)."""


class InputRequired(ProtocolSignal):
    """The handler needs answers the client has not sent yet (2026-07-28)."""

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__(", ".join(requests))
        self.requests = requests


class Channel:
    """Base channel: drops notifications, refuses requests. Transports subclass it.

    `failure` holds a protocol error raised through the context (e.g. a missing client capability):
    the engine re-raises it after the handler returns, so a handler framework that turns exceptions
    into tool errors cannot swallow it.
    """

    kind = "detached"
    #: The last progress value sent for `progress_token` (`Context.progress` sends only greater ones).
    last_progress: float | None = None
    #: Whether the request was cancelled (`cancel`), and why.
    is_cancelled = False
    cancel_reason: str | None = None
    failure: BaseException | None = None
    task: asyncio.Task[Any] | None = None
    _cancelled: asyncio.Event | None = None  # made when something first waits for the cancellation

    def __init__(self, *, progress_token: Any = None, log_level: str | None = None) -> None:
        self.progress_token = progress_token
        self.log_level = log_level

    @property
    def cancelled(self) -> asyncio.Event:
        """An event set once the request is cancelled, to wait on. Made on first use: most requests end
        with nobody having waited (an Event per request was a few percent of a short call)."""
        event = self._cancelled
        if event is None:
            event = self._cancelled = asyncio.Event()
            if self.is_cancelled:
                event.set()
        return event

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification related to the current request (dropped here)."""

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a server-to-client request and wait for its result."""
        raise NoBackChannel(f"cannot send {method}: this transport has no channel back to the client")

    async def ask(self, requests: dict[str, dict[str, Any]], state: Any = None) -> dict[str, Any]:
        """Send several server-to-client requests (`{key: {"method", "params"}}`); answers by key."""
        return {key: await self.request(req["method"], req.get("params")) for key, req in requests.items()}

    @property
    def state(self) -> Any:
        """Handler state carried from the previous round (2026-07-28 only)."""
        return None

    def close_stream(self) -> None:
        """End the SSE response stream now; the client resumes with `Last-Event-ID` (no-op here)."""

    def fail(self, error: BaseException) -> BaseException:
        self.failure = error
        return error

    def wants_log(self, level: str) -> bool:
        if self.log_level is None:
            return False
        return LOG_RANK.get(level, 0) >= LOG_RANK.get(self.log_level, 0)

    def cancel(self, reason: str | None = None) -> None:
        self.cancel_reason = reason
        self.is_cancelled = True
        if self._cancelled is not None:
            self._cancelled.set()


class InputResponsesChannel(Channel):
    """2026-07-28 channel: server requests are answered from `inputResponses` (plus the answers carried
    by the signed `requestState`). Automatic keys (`r0`, `r1`, ...) follow call order, which is stable
    because a retried request re-runs the handler from the start."""

    kind = "modern"

    def __init__(self, *, progress_token: Any = None, log_level: str | None = None) -> None:
        # (the base's two attributes set here: one call less on every request of this wire)
        self.progress_token = progress_token
        self.log_level = log_level
        self.responses: dict[str, Any] = {}
        self.previous_state: Any = None
        self.next_state: Any = None
        self.pending: dict[str, dict[str, Any]] | None = None
        self.counter = 0
        self.sink: Any = None  # async callable(message) once the response is an SSE stream

    @property
    def state(self) -> Any:
        return self.previous_state

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        if self.sink is not None:
            await self.sink(notification(method, params))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        key = f"r{self.counter}"
        self.counter += 1
        req: dict[str, Any] = {"method": method}
        if params is not None:
            req["params"] = params
        answer: dict[str, Any] = (await self.ask({key: req}))[key]
        return answer

    async def ask(self, requests: dict[str, dict[str, Any]], state: Any = None) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        missing: dict[str, dict[str, Any]] = {}
        for key, req in requests.items():
            answer = self.responses.get(key)
            if answer is None:
                missing[key] = req
            elif not isinstance(answer, dict):
                raise self.fail(McpError(jsonrpc.INVALID_PARAMS, f"inputResponses[{key!r}] must be a result object"))
            else:
                answers[key] = answer
        if missing:
            self.pending = {**(self.pending or {}), **missing}
            self.next_state = state
            raise InputRequired(missing)
        return answers
