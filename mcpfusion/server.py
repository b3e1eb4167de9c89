"""uvicorn as `mcpfusion serve` runs it: idle and slow (slowloris) connections are closed.

uvicorn closes a connection idle *between* requests after `timeout_keep_alive`, but has no limit on how
long a request's headers may take, nor on the pauses inside its body: a client that opens a socket and sends
nothing, one header byte a second, or a Content-Length of 100 and then 4 bytes, holds it forever.
`HeaderTimeoutProtocol` closes a connection `header_timeout` seconds after it opened (or after the previous
response) when no complete request head has arrived by then, and answers 408 (then closes) when a request's
body sends nothing for `header_timeout` seconds (a pause between chunks, like nginx's `client_body_timeout`:
a large upload that keeps coming is never cut). A request head (request line and headers) larger than
`max_head_bytes` (64 KiB, as common servers allow) is answered 431 and the connection closed: uvicorn's
httptools parser sets no limit, and a head of megabytes costs seconds of CPU before any token is checked.
Behind another server (gunicorn, nginx, a cloud load balancer), set the same limits there.

A request still running when a graceful shutdown's `timeout_graceful_shutdown` ends is cancelled by uvicorn,
which would log the `CancelledError` as an application error with its traceback and answer 500: the
protocol ends it quietly instead (a response not started is a closed connection; a streamed one ends itself
first, see `mcp.streams.PostStream`), also one whose client had already left (uvicorn's one line counts them).
The access log writes a query string's values `REDACTED` (`AccessFormatter`).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import socket
from typing import Any

from starlette._utils import get_route_path
from uvicorn.logging import AccessFormatter as UvicornAccessFormatter

from .problem import PROBLEM_MEDIA_TYPE, problem
from .serializer import json_bytes
from .telemetry import redact_query

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_KEEP_ALIVE_TIMEOUT = 5.0
DEFAULT_GRACEFUL_TIMEOUT = 20.0  # under the 30 s a container orchestrator gives before it kills
DEFAULT_MAX_HEAD_BYTES = 64 * 1024
_HEAD_TOO_LARGE_TEXT = b"Request Header Fields Too Large: the request line and headers exceed %d bytes"
_BODY_TIMEOUT_TEXT = b"Request Timeout: the request body stopped arriving"
_BODY_TIMEOUT_HEAD = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: %s\r\ncontent-length: %d\r\n"
                      b"connection: close\r\n\r\n%s")
_BODY_TIMEOUT = _BODY_TIMEOUT_HEAD % (b"text/plain; charset=utf-8", len(_BODY_TIMEOUT_TEXT), _BODY_TIMEOUT_TEXT)
REST_PREFIX = "/api"  # where the REST routes answer every error as problem details (`mcpfusion.rest`)


def body_timeout_answer(scope: dict[str, Any] | None) -> bytes:
    """The 408 of a request whose body stopped arriving: problem details under the REST prefix, as REST answers
    every error; plain text elsewhere (the app's own routes, `/mcp`, whose format the server cannot know)."""
    if scope is None:
        return _BODY_TIMEOUT
    path = get_route_path(scope) if scope.get("root_path") else scope.get("path", "")
    if path != REST_PREFIX and not path.startswith(REST_PREFIX + "/"):
        return _BODY_TIMEOUT
    body = json_bytes(problem(408, "REQUEST_TIMEOUT", "The request body stopped arriving: the server waited too long "
                         "for the rest of it.", recovery="Send the whole body (as many bytes as its Content-Length "
                         "says) without pausing, then call again.", instance=scope.get("path")))
    return _BODY_TIMEOUT_HEAD % (PROBLEM_MEDIA_TYPE.encode(), len(body), body)


class _HeaderDeadline:
    """Mixin for uvicorn's HTTP protocols (both keep the current request cycle in `self.cycle`, and its
    `more_body`, `response_started`, `waiting_for_100_continue`; and the read side's `flow`)."""

    header_timeout = DEFAULT_HEADER_TIMEOUT
    max_head_bytes = DEFAULT_MAX_HEAD_BYTES
    max_drain_bytes = 1 << 20  # the unread body of a request answered early, read and dropped
    cycle: Any
    loop: Any
    transport: Any
    flow: Any

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._head_timer: Any = None
        self._head_cycle: Any = None
        self._body_timer: Any = None
        self._body_seen = 0.0
        self._head_bytes = 0
        self._drain_cycle: Any = None
        self._drained = 0
        self._arm()

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        done = cycle is None or cycle.response_complete
        if done:
            self._arm()  # (a request answered before its body arrived: the rest of it comes in this time too)
        super().data_received(data)  # type: ignore[misc]
        if done and cycle is not None and cycle.more_body:
            # Answered early (401, 413): these bytes are the rest of its body, not a new head. Read and dropped
            # as uvicorn does, up to a bound; past it the connection closes, with no second answer.
            self._drained = (self._drained if self._drain_cycle is cycle else 0) + len(data)
            self._drain_cycle = cycle
            if self._drained > self.max_drain_bytes and not self.transport.is_closing():
                self.transport.close()
            return
        if done and self._head_too_large(cycle, len(data)):
            return
        cycle = self.cycle
        if cycle is not None and cycle.more_body and not cycle.response_complete:  # a body is on its way
            self._body_seen = self.loop.time()
            if self._body_timer is None:
                self._body_timer = self.loop.call_later(self.header_timeout, self._body_deadline)

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None
        # A request still running once its client left (a call waiting for the answer of a client that hung
        # up): a graceful shutdown never calls `shutdown` on its connection, gone from the server's list, yet
        # cancels it when its timeout ends; nobody reads its end, so that cancellation is quiet too.
        self._quiet_cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    def shutdown(self) -> None:
        # Called once a graceful shutdown begins: the request running now is the one uvicorn may cancel.
        self._quiet_cancel()
        super().shutdown()  # type: ignore[misc]

    def _quiet_cancel(self) -> None:
        """The running request's cancellation ends it quietly (see `_CancelledQuietly`)."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not isinstance(cycle.logger, _CancelledQuietly):
            cycle.logger = _CancelledQuietly(cycle)

    def _head_too_large(self, before: Any, size: int) -> bool:
        """Count `size` bytes read while a request head was awaited (`before`: the cycle then); past
        `max_head_bytes` with no head complete, answer 431 and close (what was read is at most one read more)."""
        if self.cycle is not before:  # the head completed: the next one counts from zero
            self._head_bytes = 0
            return False
        self._head_bytes += size
        if self._head_bytes <= self.max_head_bytes:
            return False
        if not self.transport.is_closing():  # (the parser may have refused the bytes already, and answered)
            text = _HEAD_TOO_LARGE_TEXT % self.max_head_bytes
            self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; "
                                 b"charset=utf-8\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                                 % (len(text), text))
            self.transport.close()
        return True

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_cycle = self.cycle
            self._head_timer = self.loop.call_later(self.header_timeout, self._head_deadline)

    def _head_deadline(self) -> None:
        self._head_timer = None
        cycle = self.cycle
        # A new cycle means a request head completed in time; a running one is not ours to stop.
        if cycle is self._head_cycle and (cycle is None or cycle.response_complete):
            self.transport.close()

    def _body_deadline(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if cycle is None or not cycle.more_body or cycle.response_complete or cycle.disconnected:
            return  # the body arrived (or the app answered without it)
        now = self.loop.time()
        if self.flow.read_paused or cycle.waiting_for_100_continue:
            # The app is not reading yet (its buffer is full, or the client waits for `100 Continue`): the
            # pause is the server's, so the client's clock starts again.
            self._body_seen = now
        idle = now - self._body_seen
        if idle < self.header_timeout:
            self._body_timer = self.loop.call_later(self.header_timeout - idle, self._body_deadline)
            return
        if not cycle.response_started:
            self.transport.write(body_timeout_answer(cycle.scope))
        self.transport.close()  # the app's `receive()` then reads a disconnect


class _CancelledQuietly:
    """The logger of a request cycle still running when a graceful shutdown began, or when its client left.
    uvicorn cancels the request once `timeout_graceful_shutdown` has passed and logs the `CancelledError` out of
    the app as an application error (a traceback per request), then answers 500 or cuts the body: the request
    ends with its connection closed, and no record but uvicorn's one line counting the tasks it cancelled. Any
    other error is logged as before."""

    def __init__(self, cycle: Any) -> None:
        self.cycle = cycle
        self.logger = cycle.logger

    def error(self, msg: Any, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        if isinstance(exc_info, asyncio.CancelledError):
            cycle = self.cycle
            cycle.disconnected = True  # (uvicorn's 500 is then not sent)
            cycle.transport.close()
            return
        self.logger.error(msg, *args, exc_info=exc_info, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.logger, name)


def _base_protocol() -> type:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - uvicorn without the [standard] extra
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    return HttpToolsProtocol


class HeaderTimeoutProtocol(_HeaderDeadline, _base_protocol()):  # type: ignore[misc]
    """uvicorn's HTTP protocol (httptools when installed, else h11) with a request-head deadline, and a limit on
    the pauses inside a request body, of `MCPFUSION_HEADER_TIMEOUT` seconds (read at start-up, so `--workers`
    processes inherit it), and a request head of at most `max_head_bytes` (a subclass may change it)."""

    header_timeout = 0.0  # set below from the environment (a bad value is the CLI's to report)


def env_header_timeout() -> float:
    """`MCPFUSION_HEADER_TIMEOUT` in seconds (the default when unset); ValueError naming it when it is not a
    positive number."""
    text = os.environ.get("MCPFUSION_HEADER_TIMEOUT") or ""
    if not text:
        return DEFAULT_HEADER_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise ValueError(f"MCPFUSION_HEADER_TIMEOUT={text!r} is not a number of seconds above 0")
    return seconds


try:
    HeaderTimeoutProtocol.header_timeout = env_header_timeout()
except ValueError:  # a bad value: the default here; `mcpfusion serve` refuses it with its name
    HeaderTimeoutProtocol.header_timeout = DEFAULT_HEADER_TIMEOUT


def uvicorn_options(
    *, header_timeout: float | None = None, keep_alive_timeout: float = DEFAULT_KEEP_ALIVE_TIMEOUT,
    graceful_timeout: float = DEFAULT_GRACEFUL_TIMEOUT,
) -> dict[str, Any]:
    """The uvicorn settings `mcpfusion serve` adds (pass them to `uvicorn.run` / `uvicorn.Config` yourself).
    The protocol is named by import path and its timeout set in the environment, so worker processes get both.
    `graceful_timeout`: how long a shutdown waits for running requests before cancelling them (uvicorn waits
    forever by default, and a call waiting for the answer of a client that went away waits minutes)."""
    if header_timeout is not None:
        os.environ["MCPFUSION_HEADER_TIMEOUT"] = str(header_timeout)
        HeaderTimeoutProtocol.header_timeout = header_timeout
    return {"http": "mcpfusion.server:HeaderTimeoutProtocol", "timeout_keep_alive": keep_alive_timeout,
            "timeout_graceful_shutdown": graceful_timeout}


def log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's logging configuration plus mcpfusion's own loggers (the audit trail, refused content, failed
    redactions...) at `level`: without a handler, Python prints warnings only, so an INFO audit event would be
    lost. They still propagate: an app that configured the root logger (a file, a log shipper) gets them
    there, and then nothing more is written to stderr. The access log writes query values `REDACTED`."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["access"]["()"] = "mcpfusion.server.AccessFormatter"
    config["formatters"]["mcpfusion"] = {"()": "mcpfusion.server.LogFormatter"}
    config["handlers"]["mcpfusion"] = {"()": "mcpfusion.server.FallbackHandler", "formatter": "mcpfusion",
                                       "stream": "ext://sys.stderr"}
    config["loggers"]["mcpfusion"] = {"handlers": ["mcpfusion"], "level": level.upper(), "propagate": True}
    return config


class FallbackHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes a record only when the root logger has no handler of its own (the app did not configure it)."""

    def emit(self, record: logging.LogRecord) -> None:
        if not logging.getLogger().handlers:
            super().emit(record)


class LogFormatter(logging.Formatter):
    """An audit event as its JSON line alone (what log pipelines parse); other records with level and logger."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name == "mcpfusion.audit":
            return record.getMessage()
        return f"{record.levelname}:{' ' * max(1, 9 - len(record.levelname))}{record.name}: {record.getMessage()}" + (
            "\n" + self.formatException(record.exc_info) if record.exc_info else "")


def redacted_query(path: str) -> str:
    """`path` (a request target) with its query written as spans write it (`telemetry.redact_query`: values
    `REDACTED`, plain names kept, a part without one `REDACTED` whole): a REST GET's arguments are its query."""
    head, mark, query = path.partition("?")
    return f"{head}?{redact_query(query)}" if mark else path


class AccessFormatter(UvicornAccessFormatter):
    """uvicorn's access log line, its request target's query values `REDACTED` (`redacted_query`): a REST
    GET's arguments (an email, a card number, a token) are its query, which spans redact too."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and "?" in str(args[2]):
            record = copy.copy(record)
            record.args = (args[0], args[1], redacted_query(str(args[2])), args[3], args[4])
        return super().formatMessage(record)


def free_port(host: str, port: int) -> int:
    """`port`, checked free on `host` by binding it (then let go, for uvicorn to bind at once; 0: the free port
    the system chose), so that `serve` says a taken port or an unknown host in one line, before it announces
    anything. OSError when it cannot be bound (`listen_error` words it)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (as uvicorn binds it)
        sock.bind((host, port))
        return int(sock.getsockname()[1])


def listen_error(host: str, port: int, exc: OSError) -> str:
    """`cannot listen on 127.0.0.1:8000: address already in use` (the reason without its errno)."""
    reason = exc.strerror or str(exc)
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"cannot listen on {where}: {reason[:1].lower()}{reason[1:]}"
