"""The request pipeline both MCP wires share: validate the JSON-RPC request, run it through the engine with
every failure wrapped into the JSON-RPC reply, and answer that reply as JSON.

The wires are its strategies (`SessionWire` for 2025-11-25, `ModernWire` for 2026-07-28). Each adds only
what is its own: how a call finds its session or checks its headers, what is done with a result before it
goes out (`finish`), whether an error's code sets the HTTP status (`status_for_errors`), and its streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from starlette.responses import Response

from . import jsonrpc
from .engine import Call, Engine
from .jsonrpc import McpError, failure, is_overlong_id, is_valid_id, result
from .settings import TransportSettings
from .wire import JSONMessage, error_response


def check_request_shape(message: Any) -> str | None:
    """Why `message` is not a JSON-RPC request or notification, or None when it is one."""
    if not isinstance(message, dict):
        return "a JSON-RPC message must be an object"
    if message.get("jsonrpc") != "2.0":
        return "'jsonrpc' must be \"2.0\""
    if not isinstance(message.get("method"), str):
        return "'method' must be a string"
    if "result" in message or "error" in message:  # half request, half response: neither can be trusted
        return "a request or notification carries no 'result' or 'error' member"
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return "'params' must be an object"
    if "id" in message and not is_valid_id(message["id"]):
        if is_overlong_id(message["id"]):
            return (f"'id' is too long: a string id has at most {jsonrpc.MAX_ID_LENGTH} characters, an integer id "
                    "fits in 64 bits")
        return "'id' must be a string or an integer"
    return None


def invalid_request(message: dict[str, Any]) -> Response | None:
    """The -32600 answer to a message that is no valid request or notification (None when it is one)."""
    problem = check_request_shape(message)
    if problem is None:
        return None
    msg_id = message.get("id")
    return error_response(msg_id if is_valid_id(msg_id) else None, jsonrpc.INVALID_REQUEST, problem)


class WirePipeline:
    """The shared steps; a wire subclasses it and overrides the hooks below."""

    status_for_errors = False
    """Whether a JSON-RPC error's code sets the HTTP status (`jsonrpc.HTTP_STATUS`); else errors are 200."""

    def __init__(self, engine: Engine, settings: TransportSettings) -> None:
        self.engine = engine
        self.settings = settings

    async def finish(self, call: Call, value: dict[str, Any]) -> dict[str, Any]:
        """Hook: what the wire does with a method's result before it is sent."""
        return value

    async def run(self, call: Call, inline: bool | Callable[[], bool] = True) -> dict[str, Any] | None:
        """The JSON-RPC reply to `call`, or None when the client cancelled it. `inline`: the HTTP response
        has not started, so an HTTPException can still become an HTTP status (see `jsonrpc.failure`); a
        callable is asked when the call fails (a streamed response may still be unstarted then)."""
        try:
            engine = self.engine
            value = await (engine.dispatch(call) if engine.observer is None else engine.handle(call))
            reply = result(call.id, await self.finish(call, value))
        except McpError as exc:
            reply = exc.reply(call.id)
        except asyncio.CancelledError as cancelled:
            task = asyncio.current_task()
            if not call.channel.is_cancelled:
                if task is None or task.cancelling():
                    raise  # this request's own cancellation (a closed connection, shutdown): passed on
                # A resource, prompt or completion function awaited something cancelled elsewhere: a failure of
                # its code like any other (the server would answer a bare 500, stdio nothing at all).
                stray = RuntimeError(f"{call.method} awaited something that was cancelled elsewhere")
                stray.__cause__ = cancelled
                return failure(call.id, call.method, stray, inline=False)
            if task is not None:
                task.uncancel()
            return None
        except Exception as exc:
            # (a cancelled call's HTTPException is not raised either: nobody waits for its status)
            unstarted = not call.channel.is_cancelled and (inline if isinstance(inline, bool) else inline())
            reply = failure(call.id, call.method, exc, inline=unstarted)
        # MCP: a cancelled request is not answered, also when its handler saw the cancel and returned (or failed)
        # rather than letting the cancellation through: its answer would name an id the client has let go.
        return None if call.channel.is_cancelled else reply

    def respond(self, reply: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
        """A reply as one JSON response."""
        err = reply.get("error")
        status = jsonrpc.http_status(err["code"]) if err is not None and self.status_for_errors else 200
        return JSONMessage(reply, status, headers)  # (`json_response`'s own, a call less on every reply)
