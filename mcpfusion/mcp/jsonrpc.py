"""JSON-RPC 2.0 envelope helpers and the protocol error type of the MCP engine.

Messages stay plain dicts on the hot path: building a pydantic model per message costs more than the
whole tool call for small results. `mcp.types` is used where a shape is validated or produced once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .. import serializer
from .protocol import lazy_names

if TYPE_CHECKING:
    from mcp_types.jsonrpc import (
        HEADER_MISMATCH,
        INTERNAL_ERROR,
        INVALID_PARAMS,
        INVALID_REQUEST,
        METHOD_NOT_FOUND,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        PARSE_ERROR,
        UNSUPPORTED_PROTOCOL_VERSION,
    )

__all__ = [
    "HEADER_MISMATCH",
    "HTTP_ERROR",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "REQUEST_TIMEOUT",
    "RESOURCE_NOT_FOUND",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "McpError",
    "ProtocolSignal",
    "EncodedList",
    "dumps",
    "encode",
    "error",
    "http_status",
    "notification",
    "request",
    "result",
]

HTTP_ERROR = -32010
"""Implementation-defined: an HTTP-level refusal that cannot travel as an HTTP status (a dependency raised
an HTTPException inside a streamed response whose status was already sent, or the stdio bridge relays
one); `data` carries the status and detail."""

REQUEST_TIMEOUT = -32001
"""A server-to-client request got no answer in time (the SDKs' code for the same condition)."""

RESOURCE_NOT_FOUND = -32002
"""Spec-recommended code for `resources/read` of an unknown URI (handshake-era servers use it)."""

# The error codes of `mcp_types.jsonrpc`, read on first use (see `mcpfusion.mcp.protocol`): use them as
# `jsonrpc.NAME`; `from .jsonrpc import NAME` at module level would load `mcp_types` at import.
CODES = ("HEADER_MISMATCH", "INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "METHOD_NOT_FOUND",
         "MISSING_REQUIRED_CLIENT_CAPABILITY", "PARSE_ERROR", "UNSUPPORTED_PROTOCOL_VERSION")
__getattr__ = lazy_names(globals(), dict.fromkeys(CODES, "mcp_types.jsonrpc"))
_HTTP_STATUS: dict[int, int] = {}


def http_status(code: int) -> int:
    """The HTTP status of a JSON-RPC error on every wire (one table decides; unmapped codes are 200)."""
    if not _HTTP_STATUS:
        from mcp_types import jsonrpc as codes

        _HTTP_STATUS.update({
            codes.PARSE_ERROR: 400,
            codes.INVALID_REQUEST: 400,
            codes.INVALID_PARAMS: 400,
            codes.HEADER_MISMATCH: 400,
            codes.MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
            codes.UNSUPPORTED_PROTOCOL_VERSION: 400,
            codes.METHOD_NOT_FOUND: 404,
        })
    return _HTTP_STATUS.get(code, 200)


class ProtocolSignal(Exception):  # noqa: N818 - a control-flow signal, not always an error
    """Raised through user code for the protocol engine: a handler framework (the core's call path,
    raw tools) lets it through instead of turning it into a tool error."""


class McpError(ProtocolSignal):
    """A protocol-level failure that becomes a JSON-RPC error response."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def reply(self, request_id: Any) -> dict[str, Any]:
        """The JSON-RPC error response to request `request_id`."""
        return error(request_id, self.code, self.message, self.data)


class ClientAnswerError(McpError):
    """The client answered a request of the server's (elicitation/create, sampling/createMessage, roots/list)
    with an error: -32603 for the call that asked, unless its asker handles it (a confirmation answers as for
    a client that cannot ask the user)."""


def dumps(message: Any) -> str:
    """Compact JSON text of one message: `encode`'s bytes (a reply that cannot be written is an error)."""
    return encode(message).decode() if message.__class__ is dict else serializer.dumps(message)


class EncodedList(list[Any]):
    """A list that keeps its JSON bytes once encoded (`encode`): the engine's cached `tools/list` is sent again
    and again unchanged, and encoding its schemas anew was most of each listing's CPU (500 actions: ~120 KB).
    Shared and cached: never changed once built (the engine builds a new one when the tools change)."""

    __slots__ = ("json",)

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self.json: bytes | None = None

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A copy (copy, deepcopy, pickle) is a plain list: whoever copies a listing may change it.
        return list, (list(self),)

    def encoded(self) -> bytes:
        data = self.json
        if data is None:
            # An exact-size copy: orjson's buffer keeps several times the bytes it wrote, and this one is kept.
            data = self.json = bytes(memoryview(serializer.json_bytes(list(self))))
        return data


def encode(message: dict[str, Any]) -> bytes:
    """The JSON bytes of one message (`serializer.json_bytes`, the bytes `dumps` writes), a result's
    `tools` taken from what its `EncodedList` keeps, a tool result's content blocks and `Prewritten`
    structuredContent as `serializer.message_json` writes them.

    A reply holding what JSON cannot carry (a lone surrogate in a string, as `os.listdir` gives for a file
    name that is not UTF-8; an object of no JSON type) is written as an internal error with its id: the
    client gets an answer, never a broken response. (Writing the surrogate as the escape `\\ud800` would be
    JSON text that pydantic-core, the SDKs' parser, and orjson refuse to read.) Any other message that
    cannot be written raises, in whoever sends it."""
    try:
        result = message.get("result")
        if result.__class__ is dict:
            if result.get("tools").__class__ is EncodedList:
                return _object(message)
            return serializer.message_json(message)
        return serializer.json_bytes(message)
    except serializer.UNWRITABLE as exc:
        if "method" in message or "id" not in message or ("result" not in message and "error" not in message):
            raise
        logging.getLogger("mcpfusion.mcp").error("the reply to %r cannot be written as JSON: %s", message["id"], exc)
        from mcp_types.jsonrpc import INTERNAL_ERROR

        return serializer.json_bytes(error(message["id"], INTERNAL_ERROR, "Internal error: the result holds a value "
                                           "JSON cannot carry (e.g. text that is not valid Unicode)"))


def _object(value: dict[str, Any]) -> bytes:
    """`serializer.json_bytes(value)` of a dict of string keys, written member by member: a nested dict the
    same way, an `EncodedList` as the bytes it keeps."""
    members = []
    for key, item in value.items():
        cls = item.__class__
        data = item.encoded() if cls is EncodedList else _object(item) if cls is dict else serializer.json_bytes(item)
        members.append(serializer.json_bytes(key) + b":" + data)
    return b"{" + b",".join(members) + b"}"


def result(request_id: Any, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response (the one place that writes its envelope)."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": err}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def failure(request_id: Any, method: str, exc: Exception, *, inline: bool) -> dict[str, Any]:
    """The JSON-RPC error reply for an unexpected exception while handling `method`.

    An `HTTPException` of authentication (401, 403: a failing auth dependency) is re-raised when the HTTP
    response has not started, so FastAPI's exception handlers answer it with its challenge, like on any
    route. Any other status, or one inside a stream, is `HTTP_ERROR` with the request's id: a bare 404 on the
    MCP endpoint would tell a client its session is gone. Anything else is logged and answered as a generic
    internal error (no traceback)."""
    from starlette.exceptions import HTTPException

    if isinstance(exc, HTTPException):
        if inline and exc.status_code in (401, 403):
            raise exc
        detail = http_detail(exc)
        return error(request_id, HTTP_ERROR, f"HTTP {exc.status_code}: {detail}",
                     {"status": exc.status_code, "detail": detail})
    from mcp_types.jsonrpc import INTERNAL_ERROR

    logging.getLogger("mcpfusion.mcp").error("MCP %s failed", method, exc_info=exc)
    return error(request_id, INTERNAL_ERROR, f"Internal error while handling {method}")


def http_detail(exc: Any) -> str:
    """What an `HTTPException` tells the caller (on MCP and REST alike): its text detail, never a server
    error's (a 5xx detail is the server's business and may name what must not leave), structured details as
    JSON."""
    from http import HTTPStatus

    status, detail = exc.status_code, exc.detail
    if status >= 500 or not detail:
        try:
            return HTTPStatus(status).phrase
        except ValueError:
            return "Error"
    return detail if isinstance(detail, str) else serializer.dumps(detail)


MAX_ID_LENGTH = 256
"""Longest string id (request id, progress token) accepted: an id is echoed in replies and kept with them
(event store, in-flight table), and real ones are a counter or a UUID."""


MAX_INT_ID = 2**63 - 1
"""Largest integer id accepted (the smallest: `MIN_INT_ID`): a signed 64-bit integer, what clients' JSON-RPC ids
are (a counter); a longer one would be echoed and kept as the overlong string id would."""
MIN_INT_ID = -(2**63)


def is_valid_id(value: Any) -> bool:
    """JSON-RPC ids are strings (of at most `MAX_ID_LENGTH` characters) or 64-bit integers (MCP forbids null;
    bools are not integers)."""
    if isinstance(value, str):
        return len(value) <= MAX_ID_LENGTH
    return isinstance(value, int) and not isinstance(value, bool) and MIN_INT_ID <= value <= MAX_INT_ID


def is_overlong_id(value: Any) -> bool:
    """A string id longer than `MAX_ID_LENGTH`, or an integer beyond 64 bits (the refusal names the limit)."""
    if isinstance(value, str):
        return len(value) > MAX_ID_LENGTH
    return isinstance(value, int) and not isinstance(value, bool) and not MIN_INT_ID <= value <= MAX_INT_ID
