"""HTTP building blocks shared by both MCP wires: JSON-RPC responses, Accept parsing."""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import AsyncIterable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from mcpfusion.identity import AUTH_SCOPE_KEY, caller_key_of, credential_digest, identity_of, unnamed_identity_of

from . import jsonrpc
from .jsonrpc import encode, error

SSE_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
TRANSPORT_SCOPE_KEY = "mcpfusion.transport"
"""`request.scope` key naming a transport that is not plain HTTP (`"stdio"`); telemetry reads it."""


def shown_header(value: str) -> str:
    """A header value (read as latin-1) as an error quotes it: its bytes read as the UTF-8 a client sends
    (else escaped, `\\xe2`), cut to 120 characters, control, bidi and format characters escaped
    (`visible_name`): never a raw C1 control or U+202E in the text."""
    from mcpfusion.visible import visible_name

    text = value.encode("latin-1").decode("utf-8", "backslashreplace")
    return visible_name(text if len(text) <= 120 else text[:117] + "...")


def event_source(events: AsyncIterable[Any], headers: dict[str, str], ping: float) -> Response:
    """sse-starlette's `EventSourceResponse` of `events`, imported when the server first streams: it loads
    uvicorn with it, which a server answering JSON (or run under another server) never needs."""
    from sse_starlette import EventSourceResponse

    return EventSourceResponse(events, headers=headers, ping=ping)


def header(request: Request, name: bytes) -> str | None:
    """One request header by lower-case byte name. Starlette's `Headers.get` scans and decodes the whole
    list on every lookup; the hot path does several, so the raw list is turned into a dict once."""
    scope = request.scope
    table = scope.get(_HEADERS_KEY)
    if table is None:
        table = _table(scope)
    value = table.get(name)
    return None if value is None else value.decode("latin-1")


def default_principal(request: Request) -> tuple[str | None, str | None]:
    """Who is calling, as (principal, tenant): the verified identity an authentication middleware left in
    the scope (its issuer, subject and tenant: `identity_of`, the subject read as `ActionCall` reads it),
    else a digest of the Authorization header's credentials, however its scheme is spelled (credentials are
    never stored in clear), else a digest of the whole principal (`unnamed_identity_of`: a principal that names
    no subject, authenticated by another header, is never bound to "nobody in its tenant", and a warning says
    how it is bound). (None, None) only for a request that names nobody at all (no principal, `ANONYMOUS`)."""
    auth = request.scope.get(AUTH_SCOPE_KEY)
    verified = identity_of(auth)
    if verified is not None:
        return verified
    credentials = header(request, b"authorization")
    if credentials:
        return credential_digest(credentials), None
    return unnamed_identity_of(auth) or (None, None)


def caller_key(request: Request) -> str:
    """`default_principal` as one string (what per-caller state is bound to): [tenant, principal] as JSON,
    one encoding whatever the names hold (`caller_key_of`)."""
    principal, tenant = default_principal(request)
    return caller_key_of(tenant, principal)


def repeated(request: Request, name: bytes) -> bool:
    """Whether header `name` (lower-case bytes) appears more than once: a request whose headers are all
    distinct (the dict `header` made holds as many as the list) is answered without counting."""
    scope = request.scope
    raw = scope["headers"]
    return len(_table(scope)) < len(raw) and sum(1 for n, _ in raw if n == name) > 1


def any_repeated(request: Request) -> bool:
    """Whether some header name comes more than once (the dict `header` made holds fewer than the list)."""
    scope = request.scope
    return len(_table(scope)) < len(scope["headers"])


def _table(scope: MutableMapping[str, Any]) -> dict[bytes, bytes]:
    """The request's headers as a dict, made once per request (a repeated name keeps its last value)."""
    table: dict[bytes, bytes] | None = scope.get(_HEADERS_KEY)
    if table is None:
        table = scope[_HEADERS_KEY] = dict(scope["headers"])
    return table


_HEADERS_KEY = "mcpfusion.headers"  # the scope's key of the request's headers as a dict (`_table`)


class JSONMessage(Response):
    """A JSON-RPC message as an HTTP body, its two headers set directly (every MCP reply goes through here)."""

    media_type = "application/json"

    def __init__(self, message: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> None:
        self.status_code = status_code
        self.background = None
        self.body = encode(message)  # same bytes as jsonrpc.dumps, without a str round trip
        self.raw_headers = [(b"content-length", str(len(self.body)).encode()), (b"content-type", b"application/json")]
        if headers:  # (the session id on every 2025-11-25 reply: Starlette's `init_headers` costs ~1 µs more)
            for name, value in headers.items():
                key = name.lower().encode("latin-1")
                if key == b"content-type" or key == b"content-length":
                    self.raw_headers = [pair for pair in self.raw_headers if pair[0] != key]
                self.raw_headers.append((key, value.encode("latin-1")))


class Releasing(Response):
    """`response`, then `release()` once it has been sent, cut short, or dropped unsent (garbage-collected):
    a slot taken for it is always given back, once."""

    def __init__(self, response: Response, release: Callable[[], None]) -> None:
        self.response = response
        self.status_code = response.status_code
        self.background = None
        self.raw_headers = response.raw_headers
        # Holds `release`, never this response: a response nobody sends is still collected and released.
        self._release = weakref.finalize(self, release)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.response(scope, receive, send)
        finally:
            self._release()


def json_response(message: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return JSONMessage(message, status, headers)


def error_response(
    request_id: Any, code: int, message: str, data: Any = None, status: int | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """A JSON-RPC error with the HTTP status the spec's table gives its code (unless `status` is set)."""
    if status is None:
        status = jsonrpc.http_status(code)
    return json_response(error(request_id, code, message, data), status, headers)


def http_error(status: int, message: str, code: int | None = None, request_id: Any = None) -> Response:
    """An HTTP-level refusal, still with a JSON-RPC error body so clients can show the reason (`code`:
    invalid request unless given; `request_id` when the request's is known)."""
    return json_response(error(request_id, jsonrpc.INVALID_REQUEST if code is None else code, message), status)


def retry_later(status: int, message: str, seconds: int = 5, request_id: Any = None) -> Response:
    """A refusal the client should retry after `seconds` (503 overload or outage, 429 quota), carrying the
    request's id when known so the client can tell which request to send again."""
    response = http_error(status, message, jsonrpc.INTERNAL_ERROR if status >= 500 else None, request_id)
    response.headers["Retry-After"] = str(seconds)
    return response


def accepts(request: Request) -> tuple[bool, bool]:
    """(accepts JSON, accepts SSE): whether the Accept header gives `application/json` and
    `text/event-stream` a q-value above 0. A missing or empty Accept header accepts both."""
    accept = header(request, b"accept")
    if not accept:
        return True, True
    return _acceptable(accept)


def not_acceptable(wants_json: bool, wants_sse: bool, request_id: Any) -> Response | None:
    """The 406 for a request whose answer the client can read in neither form, else None."""
    if wants_json or wants_sse:
        return None
    return http_error(406, "Not Acceptable: accept application/json or text/event-stream (with a q-value above 0)",
                      request_id=request_id)


_MEDIA_RANGE = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+)/([!#$%&'*+\-.^_`|~0-9A-Za-z]+)")  # RFC 9110 tokens
_QVALUE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")


@functools.lru_cache(maxsize=64)  # clients send the same header with every request
def _acceptable(accept: str) -> tuple[bool, bool]:
    ranges = media_ranges(accept)
    return quality(ranges, "application", "json") > 0, quality(ranges, "text", "event-stream") > 0


def media_ranges(accept: str) -> list[tuple[str, str, float]]:
    """The Accept header's media ranges as (type, subtype, q), lower-case (RFC 9110 section 12.5.1); a range
    that is not `type/subtype` (or `*/*`, `type/*`) or whose q is not a qvalue is left out."""
    ranges = []
    for item in accept.split(","):
        media, *params = item.split(";")
        match = _MEDIA_RANGE.fullmatch(media.strip())
        if match is None:
            continue
        kind, sub = match.group(1).lower(), match.group(2).lower()
        if kind == "*" and sub != "*":
            continue
        q: float | None = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                q = float(value.strip()) if _QVALUE.fullmatch(value.strip()) else None
                break  # what follows q is accept-ext, not media type parameters
        if q is not None:
            ranges.append((kind, sub, q))
    return ranges


def quality(ranges: list[tuple[str, str, float]], kind: str, sub: str) -> float:
    """The q-value `ranges` give `kind/sub`: the most specific range that matches it decides (0 if none)."""
    best, quality = -1, 0.0
    for range_kind, range_sub, q in ranges:
        if range_kind == kind and range_sub == sub:
            specificity = 2
        elif range_kind == kind and range_sub == "*":
            specificity = 1
        elif range_kind == "*":
            specificity = 0
        else:
            continue
        if specificity > best:
            best, quality = specificity, q
        elif specificity == best:
            quality = max(quality, q)
    return quality
