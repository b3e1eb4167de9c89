"""RFC 9457 problem details: the one shape of every REST error (`application/problem+json`).

A problem carries exactly what the agent's self-healing error carries (code, message, recovery hint,
available actions, details, retry delay, invalid fields), as plain JSON without markup:

    {"type": "urn:mcpfusion:error:NOT_FOUND", "title": "Not Found", "status": 404,
     "detail": "Invoice \"inv_9\" was not found.", "code": "NOT_FOUND",
     "recovery": "Call billing with action list_invoices first.", "available_actions": ["billing.list_invoices"]}

Errors raised by tools, by dependencies (`HTTPException`), by routing (unknown tool or action, wrong method)
and by middleware (`RequireBearer`) all come through `problem_response`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import Response

from .errors import (
    CONFLICT,
    FORBIDDEN,
    INTERNAL_ERROR,
    NOT_FOUND,
    RATE_LIMITED,
    UNAUTHORIZED,
    VALIDATION_ERROR,
    ToolError,
    ValidationFailed,
    http_status,
    shortened,
)
from .mcp.jsonrpc import http_detail as http_detail  # one wording of an HTTP error, on every transport
from .mcp.security import INVALID_ORIGIN
from .response import ToolResponse
from .serializer import dumps
from .visible import visible_path

logger = logging.getLogger("mcpfusion")

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:mcpfusion:error:"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"

BEARER_RECOVERY = "Send the header Authorization: Bearer TOKEN, with a valid token."
# HTTP-level failures (raised by dependencies, routing or middleware) as tool error codes, with a recovery.
_HTTP_CODES: dict[int, tuple[str, str]] = {
    400: ("BAD_REQUEST", "Fix the request and send it again."),
    401: (UNAUTHORIZED, BEARER_RECOVERY),
    403: (FORBIDDEN, "Use credentials that are allowed to call this action."),
    404: (NOT_FOUND, "Check the identifiers you sent; list the available items first if you are unsure."),
    405: (METHOD_NOT_ALLOWED, "Use one of the methods listed in the Allow header."),
    406: ("NOT_ACCEPTABLE", "Send an Accept header that allows a media type the action answers (named in detail), "
                            "or send no Accept header at all."),
    409: (CONFLICT, "Read the object's current state, then call again if the change still applies."),
    413: ("PAYLOAD_TOO_LARGE", "Send a smaller request body."),
    415: ("UNSUPPORTED_MEDIA_TYPE", "Send the parameters as application/json: UTF-8, uncompressed."),
    421: ("MISDIRECTED_REQUEST", "Send the request with the server's own host name in the URL (the Host header); "
                                 "to serve another name, its operator adds it to MCPFUSION_ALLOWED_HOSTS."),
    429: (RATE_LIMITED, "Wait for the time given in Retry-After, then call again."),
}
INTERNAL_RECOVERY = "This is a server problem, not your call; retry later."
# The DNS-rebinding guard's 403 is about the Origin header, not the credentials: 403's recovery would mislead.
ORIGIN_RECOVERY = ("Send no Origin header (a client that is not a browser has none to send), or add this origin "
                   "to MCPFUSION_ALLOWED_ORIGINS (the allowed_origins setting) on the server.")
# The agent's recovery of a validation error points at the fields listed above it; REST lists them in `errors`.
REST_VALIDATION_RECOVERY = "Fix the fields listed in errors and send the request again."
# The `errors` entry of a validation error that names no one field (as ValidationFailed names a whole body).
ARGUMENTS_FIELD = "(arguments)"

# Every status a REST operation may answer with a problem, for OpenAPI (`HEADERS`: the headers sent with it).
DOCUMENTED = {
    400: "The action refused the call (a handler-specific code: read code, detail and recovery), it asks the "
         "user, which needs an MCP client (NO_BACK_CHANNEL), or the cursor sent is not valid or has expired "
         "(INVALID_CURSOR, CURSOR_EXPIRED: call again without it)",
    401: "Missing or bad credentials",
    403: "The credentials may not call this action, or the request's Origin is not allowed",
    404: "Unknown tool or action, or the object does not exist for this caller",
    405: "The path does not serve this method (see Allow)",
    408: "The request body stopped arriving (`mcpfusion serve` waits its header timeout, 10 s by default)",
    409: "The object is not in a state that allows the call",
    413: "Request body too large",
    415: "The body is not UTF-8 JSON (another media type, charset or content encoding)",
    421: "The Host header names another server",
    422: "Invalid parameters (errors lists every invalid field)",
    428: "The action needs the caller's confirmation first (recovery says how to confirm)",
    429: "Rate limited (see Retry-After)",
    500: "Server error (never a traceback)",
    503: "Busy, or a credential or service the action needs is unavailable (see Retry-After, when sent)",
    504: "The action took longer than its time limit (TIMEOUT)",
}

# Required where every such answer carries it; Retry-After only where calling again later can succeed (BUSY,
# RATE_LIMITED, AUTH_UNAVAILABLE), not on a missing credential's 503 or a dependency's bare 429/503.
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before calling again (when sent)",
                                "required": False, "schema": {"type": "integer"}}}
HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "The bearer challenge (RFC 6750)", "required": True,
                               "schema": {"type": "string"}}},
    405: {"Allow": {"description": "The methods the path serves", "required": True, "schema": {"type": "string"}}},
    429: _RETRY_AFTER,
    503: _RETRY_AFTER,
}

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details, carrying the agent's self-healing error without markup.",
    "properties": {
        "type": {"type": "string", "description": "urn:mcpfusion:error:{code}"},
        "title": {"type": "string", "description": "The HTTP status phrase."},
        "status": {"type": "integer"},
        "detail": {"type": "string", "description": "What went wrong (the <message> the agent reads)."},
        "instance": {"type": "string", "description": "The request path."},
        "code": {"type": "string", "description": "The tool error code, e.g. NOT_FOUND or VALIDATION_ERROR."},
        "severity": {"type": "string"},
        "recovery": {"type": "string", "description": "How to fix the call."},
        "available_actions": {"type": "array", "items": {"type": "string"}},
        "errors": {
            "type": "array",
            "description": "Invalid fields (validation errors).",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "detail": {"type": "string"}},
                "required": ["field", "detail"],
            },
        },
        "details": {"type": "object"},
        "retry_after": {"type": "number", "description": "Seconds to wait before calling again."},
    },
    "required": ["type", "title", "status", "detail", "code"],
}


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def problem(
    status: int,
    code: str,
    message: str,
    *,
    recovery: str | None = None,
    available_actions: Sequence[str] = (),
    details: Mapping[str, Any] | None = None,
    retry_after: float | None = None,
    errors: Sequence[tuple[str, str]] = (),
    severity: str | None = None,
    instance: str | None = None,
) -> dict[str, Any]:
    """A problem details object (members without a value are left out)."""
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + code, "title": _title(status), "status": status, "detail": message, "code": code,
    }
    if instance:
        body["instance"] = visible_path(instance)  # (its tool or action name is the caller's)
    if severity and severity != "error":
        body["severity"] = severity
    if recovery:
        body["recovery"] = recovery
    if available_actions:
        body["available_actions"] = list(available_actions)
    if not errors and code == VALIDATION_ERROR and status == 422:
        # Clients read the invalid fields from `errors` whatever raised the error (a handler's own check too).
        errors = [(ARGUMENTS_FIELD, message)]
    if errors:
        body["errors"] = [{"field": name, "detail": text} for name, text in errors]
    if details:
        body["details"] = dict(details)
    if retry_after is not None:
        body["retry_after"] = retry_after
    return body


def problem_of(error: ToolError | ValidationFailed, *, status: int | None = None, instance: str | None = None
               ) -> dict[str, Any]:
    """The problem for a self-healing error: the same code, message, recovery and actions."""
    return problem(
        status or http_status(error.code), error.code, error.message, recovery=error.recovery,
        available_actions=error.available_actions, details=error.details, retry_after=error.retry_after,
        errors=error.fields if isinstance(error, ValidationFailed) else _named_field(error), severity=error.severity,
        instance=instance,
    )


def _named_field(error: ToolError) -> list[tuple[str, str]]:
    """The `errors` of a handler's VALIDATION_ERROR naming its field in `details` (`{"field": "due_date"}`);
    none for another code or without a field name (`problem` then lists the arguments as a whole)."""
    field = error.details.get("field") if error.code == VALIDATION_ERROR else None
    return [(shortened(field), error.message)] if isinstance(field, str) and field else []


def problem_of_result(response: ToolResponse, *, instance: str | None = None) -> dict[str, Any]:
    """The problem for an error result (a hand-made `error(...)` has only its code and text)."""
    if response.view.error is not None:
        return problem_of(response.view.error, instance=instance)
    code = response.error_code or "ERROR"
    return problem(http_status(code), code, response.text, instance=instance)


def is_error_status(status: object) -> bool:
    """Whether an `HTTPException`'s status is one an error can be answered with (4xx, 5xx). Anything else (1xx
    to 3xx, 600, 0, -1) is a server bug: HTTP cannot carry it as an error, so it is answered as one (500)."""
    return isinstance(status, int) and 400 <= status <= 599


def http_code(status: int) -> tuple[str, str]:
    """(tool error code, recovery) of an HTTP status raised as an `HTTPException`: REST and MCP name it alike."""
    return _HTTP_CODES.get(status, (INTERNAL_ERROR, INTERNAL_RECOVERY) if status >= 500 else (f"HTTP_{status}", ""))


def retry_after_of(exc: HTTPException) -> float | None:
    """The seconds a 429's or a 503's `Retry-After` asks to wait (None: none, or a date rather than seconds)."""
    retry = (exc.headers or {}).get("Retry-After")
    return float(retry) if exc.status_code in (429, 503) and retry and retry.isdigit() else None


def waited(recovery: str, retry_after: float | None) -> str:
    """`recovery`, or how long to wait first when the error says it (`retry_after_of`)."""
    return recovery if retry_after is None else f"Wait {math.ceil(retry_after)} s, then call again."


_KEY_PLACES = {"header": "the header", "cookie": "the cookie", "query": "the query parameter"}


def unauthorized_recovery(challenge: str | None, schemes: Iterable[Mapping[str, Any]] = ()) -> str:
    """The recovery of a 401 with this `WWW-Authenticate` challenge: what to send, named after the scheme that
    asked. FastAPI's API key schemes challenge `APIKey` without saying where the key goes: `schemes` (the OpenAPI
    security schemes of the action's dependencies) say which header, cookie or query parameter."""
    words = (challenge or "").replace(",", " ").split()
    kind = words[0].lower() if words else "bearer"  # (no challenge: the 401's default, Bearer)
    if kind == "apikey":
        places = [f"{_KEY_PLACES[s['in']]} {s['name']}" for s in schemes
                  if s.get("type") == "apiKey" and s.get("in") in _KEY_PLACES and s.get("name")]
        return f"Send {' or '.join(dict.fromkeys(places))}, with a valid key." if places else \
            "Send the API key the operation's security scheme names (see the OpenAPI document), with a valid key."
    if kind == "basic":
        return "Send the header Authorization: Basic CREDENTIALS (base64 of user:password), with valid credentials."
    if kind == "bearer":
        return BEARER_RECOVERY
    return "Send the credentials the WWW-Authenticate header asks for."


def problem_of_http(exc: HTTPException, *, instance: str | None = None,
                    schemes: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The problem for an `HTTPException` (a dependency's 401/403, routing's 404/405, a middleware's 429); one
    raised with a status that is not an error's is a 500 INTERNAL_ERROR. `schemes` (the security schemes of
    the action called) name where a 401's API key goes."""
    status = exc.status_code
    if not is_error_status(status):
        logger.error("%s: HTTPException raised with status %r, which is not an HTTP error: answered 500",
                     instance or "request", status)
        return problem(500, INTERNAL_ERROR, _title(500), recovery=INTERNAL_RECOVERY, instance=instance)
    code, recovery = http_code(status)
    if status == 403 and exc.detail == INVALID_ORIGIN:
        recovery = ORIGIN_RECOVERY
    detail = exc.detail if status < 500 and isinstance(exc.detail, str) and exc.detail else _title(status)
    if status == 405 and exc.headers and exc.headers.get("Allow"):
        recovery = f"Use one of these methods: {exc.headers['Allow']}."
    elif status == 401:
        recovery = unauthorized_recovery((exc.headers or {}).get("WWW-Authenticate"), schemes)
    retry_after = retry_after_of(exc)
    if status == 503:
        recovery = waited(recovery, retry_after)
    details = None if status >= 500 else exc.detail if isinstance(exc.detail, dict) else \
        {"detail": exc.detail} if isinstance(exc.detail, list) else None
    return problem(status, code, detail, recovery=recovery or None, details=details, retry_after=retry_after,
                   instance=instance)


def problem_response(body: dict[str, Any], headers: Mapping[str, str] | None = None) -> Response:
    """The `application/problem+json` response; 401 always challenges, a retry delay is a Retry-After."""
    out = dict(headers or {})
    if body["status"] == 401 and not any(k.lower() == "www-authenticate" for k in out):
        out["WWW-Authenticate"] = "Bearer"
    retry_after = body.get("retry_after")
    if retry_after is not None and not any(k.lower() == "retry-after" for k in out):
        out["Retry-After"] = str(max(0, math.ceil(retry_after)))
    return Response(dumps(body), status_code=body["status"], headers=out, media_type=PROBLEM_MEDIA_TYPE)


def http_problem_response(exc: HTTPException, path: str | None = None,
                          schemes: Iterable[Mapping[str, Any]] = ()) -> Response:
    """`problem_response` for an `HTTPException`, keeping its headers (WWW-Authenticate, Allow...). A 204 or
    304 (a dependency's "nothing to send" or "not modified") is answered as itself: without a body, as
    FastAPI's own handler answers it. A redirect that says where to (a `Location` header: a dependency sending
    the caller to a login page) is answered as itself too; one that says nowhere is a server bug (500)."""
    if exc.status_code in (204, 304) or (300 <= exc.status_code < 400 and _location(exc.headers)):
        return Response(status_code=exc.status_code, headers=exc.headers)
    body = problem_of_http(exc, instance=path, schemes=schemes)
    return problem_response(body, exc.headers if body["status"] == exc.status_code else None)


def _location(headers: Mapping[str, str] | None) -> bool:
    return any(k.lower() == "location" and v for k, v in (headers or {}).items())


def validation_problem(label: str, fields: list[tuple[str, str]], path: str | None = None) -> Response:
    """The 422 for invalid parameters of a REST call."""
    found = problem_of(ValidationFailed(label, fields), instance=path)
    return problem_response({**found, "recovery": REST_VALIDATION_RECOVERY})


def openapi_errors(schema_ref: str = "#/components/schemas/Problem") -> dict[str, Any]:
    """The documented error responses of one REST operation (every one of them problem+json)."""
    content = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": schema_ref}}}
    responses: dict[str, Any] = {}
    for status, text in DOCUMENTED.items():
        responses[str(status)] = {"description": text, "content": content}
        if status in HEADERS:
            responses[str(status)]["headers"] = HEADERS[status]
    responses["default"] = {"description": "Any other error, as problem details", "content": content}
    return responses

