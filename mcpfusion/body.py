"""Request bodies of every HTTP adapter (`/mcp` and REST): a size limit enforced while reading, JSON parsing
that turns hostile input (deep nesting, huge numbers, lone surrogates) into a refusal instead of a crash, and
`Connection: close` on an answer sent before the body was read to its end (`closing`, `closing_unless_read`)."""

from __future__ import annotations

import codecs
import functools
import re
import sys
from collections.abc import Callable
from typing import Any

import jiter
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
# A media type with its parameters is a few dozen bytes; anything much longer is refused (415) unparsed, so a
# megabyte-long header costs no parsing.
MAX_CONTENT_TYPE_LENGTH = 512


class BodyTooLarge(Exception):  # noqa: N818
    """More than the limit arrived (or was announced by Content-Length)."""


class InvalidJSON(ValueError):
    """The body is not JSON, nests deeper than the parser allows, holds an integer too long to read or a lone
    UTF-16 surrogate escape (no character: valid JSON syntax, but no text can carry it), or is in another
    encoding than UTF-8."""

    @property
    def reason(self) -> str:
        """What is wrong, as the client is told (the parser's own words name no case plainly)."""
        text = str(self)
        if text.startswith(_ENCODED_AS):
            encoding = text[len(_ENCODED_AS):]
            return f"the body is {encoding} (it starts with a {encoding} byte order mark); JSON is read as UTF-8 only"
        if text.startswith(_NOT_UTF8):
            return (f"the body is not UTF-8 (byte 0x{text[len(_NOT_UTF8):]}); JSON is read as UTF-8 only: encode "
                    "the body as UTF-8")
        if "recursion limit" in text:
            return "the JSON nests deeper than this server reads (about 200 levels)"
        if "number out of range" in text:  # valid JSON: Python's cap on the digits of an int it converts
            return (f"the body holds a number too large to read (more than {sys.get_int_max_str_digits()} "
                    "digits)")
        duplicate = _DUPLICATE.match(text)
        if duplicate is not None:
            # (the parser writes the key escaped as Rust does: control and bidi characters as `\u{202e}`)
            key = duplicate[1] if len(duplicate[1]) <= 64 else duplicate[1][:64] + "..."
            # Parsers disagree on which of the two counts (most keep the last, some the first, a proxy may check
            # one and the server read the other): refused, as the repeated headers that carry the same names are.
            return (f'the body holds the key "{key}" twice in one object; send each key once (which one would '
                    "count is not defined by JSON)")
        if text.startswith(_LONE_SURROGATE):
            escape = text[len(_LONE_SURROGATE):] or _ANY_SURROGATE
            # Valid JSON syntax (RFC 8259 allows the escape), but no Unicode text: nothing could carry it on.
            return (f"the body holds a lone UTF-16 surrogate ({escape} without its pair), which is no character "
                    "and cannot be carried: send the character itself, or its complete surrogate pair")
        return "the body is not valid JSON"


def announces_body(scope: Scope) -> bool:
    """Whether an HTTP/1 request says it carries a body: a Content-Length above 0, or a Transfer-Encoding."""
    if scope.get("http_version") not in _HTTP1:
        return False
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip(b" \t0")):
            return True
    return False


def may_stay_unread(scope: Scope) -> bool:
    """Whether an HTTP/1 request's body may still be on the connection when an answer is sent before it was read:
    one sent in chunks, or longer than `SMALL_BODY`. A shorter one the server has taken off the socket with the
    request's head (uvicorn reads up to 64 KiB at a time): an early answer leaves the connection usable, with no
    draining to set up on every request (`closing_unless_read`)."""
    if scope.get("http_version") not in _HTTP1:
        return False
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return not value.isdigit() or int(value) > SMALL_BODY
    return False


SMALL_BODY = 32 * 1024
_HTTP1 = ("1.1", "1.0", None)  # (HTTP/2 and 3 frame each request: no connection header there, nothing to lose)
CONNECTION_CLOSE = (b"connection", b"close")
UNREAD_KEY = "mcpfusion.body_unread"
"""Set in the ASGI scope when a refused body was left unread (`read_body`): its answer says `Connection: close`."""


def left_unread(scope: Scope) -> bool:
    """Whether `read_body` refused this request's body without reading it to its end."""
    return bool(scope.get(UNREAD_KEY))


async def drain(receive: Receive, limit: int) -> bool:
    """Read and drop the rest of a request body, up to about `limit` bytes: True once its end arrived (or the
    client left), False when more remains. A request answered before its body was read leaves the rest on the
    connection: read to its end, the connection carries the client's next request; left there, it must close."""
    size = 0
    while size <= limit:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return True
        size += len(message.get("body", b""))
    return False


def expects_continue(scope: Scope) -> bool:
    """Whether the request asks for `100 Continue` before sending its body (`Expect: 100-continue`, RFC 9110
    10.1.1): the server answers a refusal at once, unread, and closes (the client then sends no body)."""
    return any(name == b"expect" and value.strip().lower() == b"100-continue" for name, value in scope["headers"])


def closing(response: Response) -> Response:
    """`response` with `Connection: close`, for a request whose body the server did not read to its end: the
    client must not send its next request on that connection (a keep-alive client did, and lost it: the server
    closes, or reads it as the unread body's bytes). HTTP/1.1 (RFC 9112, 9.6) asks for exactly this."""
    response.headers["connection"] = "close"
    return response


def closing_unless_read(scope: Scope, receive: Receive, send: Send, limit: int = DEFAULT_MAX_BODY_BYTES
                        ) -> tuple[Receive, Send]:
    """`receive` and `send` for an app that may answer a request with a body before reading all of it (a 413
    over the size limit, a 401, a refusal decided from the headers). When its answer starts, the rest of the body
    is read and dropped (up to `limit` bytes), so that the connection serves the next request; a body longer
    than that, or one `read_body` left unread, is answered with `Connection: close` (see `closing`)."""
    read = False

    async def receiving() -> Message:
        nonlocal read
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            read = True
        return message

    async def sending(message: Message) -> None:
        nonlocal read
        if not read and message["type"] == "http.response.start":
            read = True
            # (a client waiting for `100 Continue` sends no body: reading would ask it for the one refused here)
            if scope.get(UNREAD_KEY) or expects_continue(scope) or not await drain(receive, limit):
                headers = list(message.get("headers", ()))
                if not any(name.lower() == b"connection" for name, _ in headers):
                    message = {**message, "headers": [*headers, CONNECTION_CLOSE]}
        await send(message)

    return receiving, sending


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or `BodyTooLarge` as soon as more than `limit` bytes arrive. The rest of a refused body
    is read and dropped while the whole stays within twice the limit (the connection then serves the next
    request); beyond, it is left unread and `left_unread(scope)` is true: answer with `closing`, or under
    `closing_unless_read`.

    Read straight from the ASGI channel (Starlette's stream wrapper costs more than the read on small
    bodies) and then cached where `Request.body()` looks, so dependencies can still read it."""
    scope = request.scope
    table = scope.get("mcpfusion.headers")
    declared = table.get(b"content-length") if table is not None else \
        next((v for k, v in scope["headers"] if k == b"content-length"), None)
    receive = request.receive
    if declared is not None and declared.isdigit() and int(declared) > limit:
        # Not kept, but read and dropped while within twice the limit, so the connection serves the next request
        # (a body that a client sent with a few bytes too many); beyond, unread and the connection closed. A
        # client waiting for `100 Continue` has sent nothing yet: reading would ask it for the body this refuses.
        if int(declared) > 2 * limit or expects_continue(scope) or not await drain(receive, 2 * limit):
            scope[UNREAD_KEY] = True
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnect
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:  # (the rest: as a body announced too long)
                if message.get("more_body", False) and not await drain(receive, 2 * limit - size):
                    scope[UNREAD_KEY] = True
                raise BodyTooLarge
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    request._body = body  # what Request.body() returns from now on
    return body


# The byte order marks of the encodings JSON is not read in (RFC 8259: JSON exchanged over a network is UTF-8),
# named in the refusal; UTF-32's first, as UTF-16 LE's is the start of UTF-32 LE's.
_OTHER_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
               (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))
_ENCODED_AS = "encoded as "
_NOT_UTF8 = "not UTF-8: byte 0x"


# (a partial: no Python frame of its own on every request)
_parsed: Callable[[bytes], Any] = functools.partial(jiter.from_json, allow_inf_nan=False, catch_duplicate_keys=True)


def parse_json(body: bytes) -> Any:
    """The JSON value of `body` (jiter, pydantic-core's parser: fast, and nesting is capped), or `InvalidJSON`.
    `NaN` and `Infinity` are not JSON (RFC 8259): refused like any other syntax error, and so is an object that
    holds a key twice. A leading UTF-8 byte order mark is skipped, as `json.loads` (so FastAPI's own routes)
    skips it; another encoding's is refused by name."""
    try:
        return _parsed(body)
    except (ValueError, RecursionError) as exc:
        # Not only syntax errors: huge integer literals raise ValueError, deep nesting a recursion error.
        failure: Exception = exc
    # Looked at only once the parse failed: a valid body (every call) pays nothing for it.
    if body.startswith(codecs.BOM_UTF8):  # RFC 8259 lets a parser ignore it
        body = body[len(codecs.BOM_UTF8):]
        try:
            return _parsed(body)
        except (ValueError, RecursionError) as exc:
            failure = exc
    else:
        encoding = next((name for bom, name in _OTHER_BOMS if body.startswith(bom)), None)
        if encoding is not None:
            raise InvalidJSON(_ENCODED_AS + encoding) from None
    try:  # (Latin-1's `é`, a Windows code page: its JSON may be well formed, its encoding is what is wrong)
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        raise InvalidJSON(f"{_NOT_UTF8}{body[bad.start]:02x} at offset {bad.start}") from None
    escape = _lone_surrogate(body, str(failure))
    if escape is not None:
        raise InvalidJSON(_LONE_SURROGATE + escape) from None
    raise InvalidJSON(str(failure)) from None


_LONE_SURROGATE = "lone surrogate "
_DUPLICATE = re.compile(r'Detected duplicate key "(.*)" at line \d+ column \d+$', re.DOTALL)
_ANY_SURROGATE = "an escape \\ud800 to \\udfff"  # (where the parser's position names none)
# The parser's words for a \uXXXX escape of a UTF-16 surrogate without its pair: a high one followed by no
# \u escape ("unexpected end of hex escape"), a low one alone or a high one followed by no low one
# ("lone leading surrogate"); each at a position just past the escape.
_SURROGATE_FAILURES = ("surrogate", "unexpected end of hex escape")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_AT = re.compile(r" at line (\d+) column (\d+)$")


def _lone_surrogate(body: bytes, failure: str) -> str | None:
    """The surrogate escape a failure to parse `body` is about (`\ud800`; "" when it cannot be located), or
    None when the failure is another one. Asked only once the parse failed."""
    if not any(words in failure for words in _SURROGATE_FAILURES):
        return None
    at = _AT.search(failure)
    if at is None:
        return ""
    line, column = int(at[1]), int(at[2])
    offset = 0
    for _ in range(line - 1):  # (the parser counts lines and byte columns from 1)
        offset = body.find(b"\n", offset) + 1
        if offset == 0:
            return ""
    end = offset + column
    found = [m[0] for m in _SURROGATE_ESCAPE.finditer(body, max(0, end - 13), end + 1)]
    return found[-1].decode("ascii") if found else ""


def is_json_media_type(content_type: str | None) -> bool:
    """True for `application/json`, parameters (`; charset=utf-8`) allowed; case-insensitive. A Content-Type
    longer than `MAX_CONTENT_TYPE_LENGTH` is not one."""
    if content_type is None:
        return False
    if content_type == "application/json":  # what nearly every client sends, decided without parsing
        return True
    return len(content_type) <= MAX_CONTENT_TYPE_LENGTH and \
        content_type.partition(";")[0].strip().lower() == "application/json"


def charset_not_utf8(content_type: str | None) -> str | None:
    """The charset of a JSON body's Content-Type when it is not UTF-8 (JSON is read as UTF-8 only, RFC 8259),
    else None. Every `charset` parameter counts: one that is not UTF-8 is enough to refuse the body."""
    if content_type is None or ";" not in content_type:
        return None
    for parameter in content_type[:MAX_CONTENT_TYPE_LENGTH].split(";")[1:]:  # one linear pass, bounded
        name, _, value = parameter.partition("=")
        if name.strip().lower() != "charset":
            continue
        charset = value.strip().strip('"').strip()
        try:
            if codecs.lookup(charset).name != "utf-8":
                return charset
        except (LookupError, ValueError):  # a charset Python does not know (or cannot name) is not UTF-8
            return charset
    return None


def is_json_body(content_type: str | None) -> bool:
    """Whether a body sent with `content_type` is read as JSON, as FastAPI reads a JSON body: no
    Content-Type at all, `application/json` or any `application/*+json` (parameters allowed; no longer than
    `MAX_CONTENT_TYPE_LENGTH`)."""
    if content_type is None or content_type == "application/json":
        return True
    if len(content_type) > MAX_CONTENT_TYPE_LENGTH:
        return False
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def is_identity_encoding(content_encoding: str | None) -> bool:
    """Whether a body sent with `content_encoding` is read as it is: none given, or `identity`. A compressed
    body would be parsed as garbage (or silently as its compressed bytes): it is refused (415) instead."""
    return content_encoding is None or content_encoding.strip().lower() in ("", "identity")
