"""HTTP building blocks shared by both MCP wires: JSON-RPC responses, body limit, Accept parsing."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .jsonrpc import HTTP_STATUS, INVALID_REQUEST, dumps, error

SSE_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}


class BodyTooLarge(Exception):  # noqa: N818
    pass


def json_response(message: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(message), status_code=status, media_type="application/json", headers=headers)


def error_response(
    request_id: Any, code: int, message: str, data: Any = None, status: int | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """A JSON-RPC error with the HTTP status the spec's table gives its code (unless `status` is set)."""
    if status is None:
        status = HTTP_STATUS.get(code, 200)
    return json_response(error(request_id, code, message, data), status, headers)


def http_error(status: int, message: str, code: int = INVALID_REQUEST) -> Response:
    """An HTTP-level refusal, still with a JSON-RPC error body so clients can show the reason."""
    return json_response(error(None, code, message), status)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or `BodyTooLarge` as soon as more than `limit` bytes arrive."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise BodyTooLarge
        except ValueError:
            pass
        else:
            # The server reads at most Content-Length bytes, so the declared size bounds the body.
            return await request.body()
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def accepts(request: Request) -> tuple[bool, bool]:
    """(accepts JSON, accepts SSE). A missing Accept header or a wildcard accepts both."""
    accept = request.headers.get("accept")
    if not accept:
        return True, True
    accept = accept.lower()
    if "*/*" in accept:
        return True, True
    return ("application/json" in accept or "application/*" in accept), "text/event-stream" in accept
