"""REST adapter: `POST /api/{tool}/{action}` for every action, with the same DI, validation and presenter.

A success's body is the data exactly as the MCP data block carries it (after `_select` and redaction, with
the same serializer); every error, whether a tool's, a dependency's, routing's or a crash, is RFC 9457
problem details (`mcpfusion.problem`) with the same code, message, recovery and actions as the agent's.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import mimetypes
import re
import sys
import typing
import urllib.parse
from collections.abc import Callable, Iterator
from numbers import Number
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, HTTPException
from fastapi.dependencies.models import Dependant
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.utils import is_body_allowed_for_status_code
from pydantic import TypeAdapter, ValidationError
from starlette._utils import get_route_path, is_async_callable
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import URLPath
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import ASGIApp, Receive, Scope, Send

from .body import (
    DEFAULT_MAX_BODY_BYTES,
    BodyTooLarge,
    InvalidJSON,
    charset_not_utf8,
    closing,
    is_identity_encoding,
    is_json_body,
    left_unread,
    parse_json,
    read_body,
)
from .confirm import CONFIRM_PARAM
from .content import EmbeddedResource, ResourceLink
from .dependencies import collect_response, end_response_collection, security_schemes, takes_response
from .dispatch import ToolRegistry, _raised_errors
from .errors import (
    CURSOR_EXPIRED,
    INTERNAL_ERROR,
    INVALID_CURSOR,
    UNKNOWN_TOOL,
    VALIDATION_ERROR,
    VALIDATION_RECOVERY,
    ToolError,
    UnknownToolError,
    field_path,
)
from .mcp.wire import media_ranges, quality
from .middleware import applies
from .output import ITEMS, NEXT_CURSOR, loose_formats_out
from .problem import (
    INTERNAL_RECOVERY,
    PROBLEM_SCHEMA,
    REST_VALIDATION_RECOVERY,
    http_problem_response,
    openapi_errors,
    problem_of,
    problem_of_result,
    problem_response,
    validation_problem,
)
from .response import ToolResponse, key_path
from .schema import inline_refs, rewrite
from .select import SELECT_PARAM, select_schema
from .serializer import dumps
from .tool import Action, unknown_action


def rest_body(response: ToolResponse, request: Request | None = None, action: Action | None = None) -> Response:
    """The HTTP response for a tool response (of `action`, when known): the data block's JSON, or problem
    details."""
    if response.is_error:
        found = problem_of_result(response, instance=request.url.path if request else None)
        return problem_response(_rest_recovery(found, request, action))
    if response.content or response.view.data_left_out:
        return _content_body(response, request)
    # The data block's data (after _select and redaction), whatever other shape structuredContent has.
    view = response.view
    return Response(dumps(view.data), media_type="application/json", headers=_data_headers(view, request))


# Where a presenter's response view keeps the `limit` cuts of its embedded lists: {key path (its keys): (at most
# this many per parent item, parent items cut, entries hidden in all)}, the counts of the agent's "Embedded list
# truncated" (a path given as a string is taken as written).
EMBEDDED_CUTS = "embedded_truncated"


def _data_headers(view: Any, request: Request | None) -> dict[str, str] | None:
    """The headers of a success's data: its next page, and its cuts (said here: the agent's notices are UI
    blocks, which REST does not send). `Truncated` for the list's own cut (a `limit`, an egress limit),
    `Truncated-Embedded` for the embedded lists a child's `limit` cut (`"lines"; limit=1; items=3; hidden=7`,
    one list member per key path, written as redaction paths are: `lines.notes`, `["a.b"]`)."""
    headers = _next_page(view.next_cursor, request)
    if view.truncated is not None:
        shown, total, unit = view.truncated
        headers = {**(headers or {}), "Truncated": f"shown={shown}, total={total}, unit={unit}"}
    embedded = getattr(view, EMBEDDED_CUTS, None)
    if embedded:
        cuts = ", ".join(f"{_sf_string(path if isinstance(path, str) else key_path(path))}; limit={limit}; "
                         f"items={items}; hidden={hidden}"
                         for path, (limit, items, hidden) in embedded.items())
        headers = {**(headers or {}), "Truncated-Embedded": cuts}
    return headers


def _sf_string(text: str) -> str:
    """`text` as a structured field string (RFC 9651): quoted printable ASCII, or a Display String with its
    other characters percent-encoded as UTF-8 (a key may hold any text; a header carries ASCII only)."""
    if text.isascii() and text.isprintable():
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raw = text.encode("utf-8", "surrogatepass")
    return '%"' + "".join(chr(b) if 0x20 <= b <= 0x7E and b not in b'%"' else f"%{b:02x}" for b in raw) + '"'


def _rest_recovery(found: dict[str, Any], request: Request | None, action: Action | None = None
                   ) -> dict[str, Any]:
    """`found` with a recovery a REST client can follow where the agent's names MCP calls or markup: the one
    place REST rewrites recoveries."""
    code = found.get("code")
    if code == VALIDATION_ERROR and found.get("recovery") in (None, VALIDATION_RECOVERY):
        # The agent's words point at fields listed above them; a handler's own recovery is kept (routes named).
        found["recovery"] = REST_VALIDATION_RECOVERY
    elif request is not None and code in (INVALID_CURSOR, CURSOR_EXPIRED):
        # The agent's recovery names the MCP tool; a REST client starts over on the route it called.
        found["recovery"] = (f"Call {request.method} {request.url.path} again with the same parameters and no "
                             "cursor to start from the first page.")
    elif request is not None and action is not None and isinstance(found.get("recovery"), str):
        found["recovery"] = _route_named(found["recovery"], action, request)
    return found


def _route_named(recovery: str, action: Action, request: Request) -> str:
    """`recovery` with its "call tool.action again" (a rate limit's, a confirmation's) naming the route called.
    Only the last one: a confirmation's question, quoted before it, is the user's to read as written."""
    found = [*re.finditer(rf"\b(call) {re.escape(action.qualified_name)} again\b", recovery, re.IGNORECASE)]
    if not found:
        return recovery
    last = found[-1]
    route = f"{last.group(1)} {request.method} {request.url.path} again"
    return recovery[:last.start()] + route + recovery[last.end():]


# An HTTP field value the servers send as it is (RFC 9110: visible ASCII, inner spaces and tabs; no CR, LF, NUL,
# other control characters or text Latin-1 cannot encode, on which Starlette or the server raise).
_HEADER_VALUE = re.compile(r"[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?")


def _content_body(response: ToolResponse, request: Request | None = None) -> Response:
    """One image, clip or document alone: its own bytes and media type (with its declared charset). Anything
    mixed: a JSON envelope with the data and the content items in their MCP shapes (binary data base64, links
    as URIs), and the data's cut and next-page headers. A media type no header can carry (`check`
    refuses one before it gets here) is answered in the envelope too, never a dropped connection.
    The data left out (`attach(..., data_block=False)`): the content alone on every page, with the next page's
    headers (a page's notice, a text block for the agent, is no data block)."""
    items = response.content
    view = response.view
    if not response.data_left_out:
        return Response(dumps({"data": view.data, "content": [item.to_mcp() for item in items]}),
                        media_type="application/json", headers=_data_headers(view, request))
    page = _next_page(view.next_cursor, request)
    if len(items) == 1 and not isinstance(items[0], ResourceLink) and _HEADER_VALUE.fullmatch(items[0].media_type):
        media_type = items[0].media_type  # (Starlette adds charset=utf-8 only to a text/* type naming none)
        headers = {**_inert(media_type), "Content-Disposition": _disposition(items[0], media_type),
                   **_file_transfer(media_type), **(page or {})}
        return Response(items[0].payload(), media_type=media_type, headers=headers)
    return Response(dumps({"content": [item.to_mcp() for item in items]}), media_type="application/json",
                    headers=page)


_FILENAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _disposition(item: Any, media_type: str) -> str:
    """`inline`, with a filename when the item names its document (an embedded resource's URI: `invoice://inv_1`
    is `inv_1.pdf`): ASCII letters, digits, `.`, `_` and `-` only (nothing a header or a path could misread),
    with the media type's extension when it has none."""
    uri = item.uri if isinstance(item, EmbeddedResource) else None
    stem = ""
    if uri:
        rest = uri.split("?", 1)[0].split("#", 1)[0]
        rest = urllib.parse.unquote(rest.split("://", 1)[-1] if "://" in rest else rest.split(":", 1)[-1])
        parts = [part for part in rest.replace("\\", "/").split("/") if part]
        stem = _FILENAME_UNSAFE.sub("_", parts[-1] if parts else "").strip("._")[:100]
    if not stem:
        return "inline"
    essence = media_type.split(";", 1)[0].strip().lower()
    extension = {"application/pdf": ".pdf"}.get(essence) or mimetypes.guess_extension(essence) or ""
    if extension and not stem.lower().endswith(extension):
        stem += extension
    return f'inline; filename="{stem}"'


def _file_transfer(media_type: str) -> dict[str, str]:
    """`Content-Description: File Transfer` (RFC 2045's header, which browsers ignore) for a document no
    browser-based API console shows as text, an image or a player: Swagger UI's try-it then offers it as a
    download (named by Content-Disposition) rather than printing its bytes, while the document stays inline
    for a browser opening its URL."""
    essence = media_type.split(";", 1)[0].strip().lower()
    shown = essence.startswith(("text/", "image/", "audio/")) or "json" in essence or "xml" in essence
    return {} if shown else {"Content-Description": "File Transfer"}


def content_only(action: Action) -> bool:
    """Whether every answer of `action` is its content alone (declared: `content_only=True`, with its
    `content_types`): REST then answers the document itself, and OpenAPI documents only those types."""
    return action.content_only and bool(action.content_types)


def sendable_media_types(action: Action) -> list[str]:
    """The media types a success of `action` may be sent as: its content types alone when it answers content
    only, else JSON (and its content types)."""
    declared = sorted(action.content_types or ())
    return declared if content_only(action) else ["application/json", *declared]


def not_acceptable(request: Request, sendable: list[str]) -> Response | None:
    """The 406 problem for a request whose `Accept` gives none of `sendable` a q-value above 0 (a missing, empty
    or unreadable Accept accepts anything), else None."""
    accept = ", ".join(request.headers.getlist("accept"))  # (several Accept fields are one list, RFC 9110 5.3)
    if not accept.strip():
        return None
    ranges = media_ranges(accept)
    if len(ranges) < sum(1 for item in accept.split(",") if item.strip()):
        # A range or q-value it could not read (`*; q=.2`, Java's default; `json`): the header is disregarded, as
        # RFC 9110 12.5.1 allows, rather than every answer refused for a client's spelling.
        return None
    for media_type in sendable:
        kind, _, sub = media_type.split(";", 1)[0].strip().lower().partition("/")
        if quality(ranges, kind, sub) > 0:
            return None
    which = "it" if len(sendable) == 1 else "one of them"
    refusal = StarletteHTTPException(406, f"Not Acceptable: this action answers {', '.join(sendable)}; send an "
                                          f"Accept header that allows {which} (or none).")
    return http_problem_response(refusal, request.url.path)


_MARKUP = ("text/html", "application/xhtml+xml", "image/svg+xml", "text/xml", "application/xml")


def _inert(media_type: str) -> dict[str, str]:
    """Headers that keep a document answered from the API's origin a document: never sniffed as another type,
    and markup (an SVG, an HTML page) run with no script, as GitHub serves raw files."""
    headers = {"X-Content-Type-Options": "nosniff"}
    if media_type.split(";", 1)[0].strip().lower().startswith(_MARKUP) or "+xml" in media_type:
        headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'; sandbox"
    return headers


_ENVELOPE_SCHEMA = {
    "type": "object",
    "description": "Data with content items (images, audio, documents, links) in their MCP shapes",
    "properties": {"data": {}, "content": {"type": "array", "items": {"type": "object"}}},
    "required": ["content"],
}


def _success_content(action: Action, seen: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The 200 media types: the data as JSON, and the declared content types as themselves (those alone for an
    action that answers its content only: `attach(..., data_block=False)`)."""
    if content_only(action):
        return {media_type: {"schema": {"type": "string", "format": "binary"}}
                for media_type in sorted(action.content_types or ())}
    data = _output_schema(action, seen)
    content: dict[str, Any] = {"application/json": {"schema": data}}
    if action.content_types:
        content["application/json"] = {"schema": {"anyOf": [data, _ENVELOPE_SCHEMA]}}
        for media_type in sorted(action.content_types):
            content[media_type] = {"schema": {"type": "string", "format": "binary"}}
    return content


def _next_page(cursor: str | None, request: Request | None) -> dict[str, str] | None:
    """A paginated list's next page: `Next-Cursor` (send it back as `cursor`), and for GET the next URL."""
    if cursor is None:
        return None
    headers = {"Next-Cursor": cursor}
    if request is not None and request.method in ("GET", "HEAD"):
        url = request.url.include_query_params(cursor=cursor)
        headers["Link"] = f'<{url.path}?{url.query}>; rel="next"'
    return headers


PAGE_HEADERS = {
    "Next-Cursor": {"description": "Present when another page exists: send it back as the cursor parameter.",
                    "schema": {"type": "string"}},
    "Link": {"description": 'GET only: the next page\'s URL, rel="next" (RFC 8288).', "schema": {"type": "string"}},
}


TRUNCATED_HEADER = {
    "Truncated": {"description": "Present when the presenter's limit or an egress limit cut the data: the rows "
                                 "(or lines) sent, of how many, e.g. `shown=24, total=100, unit=rows`.",
                  "schema": {"type": "string"}},
}
EMBEDDED_HEADER = {
    "Truncated-Embedded": {"description": "Present when an embedded presenter's limit cut embedded lists: per key "
                                          "path, at most how many each parent item shows, in how many parent items "
                                          "a list was cut and how many entries were left out in all, e.g. "
                                          '`"lines"; limit=5; items=2; hidden=9`.',
                           "schema": {"type": "string"}},
}


DISPOSITION_HEADER = {
    "Content-Disposition": {"description": "`inline`, with the document's file name when it has one (from its URI), "
                                           'e.g. `inline; filename="inv_0001.pdf"`.',
                            "schema": {"type": "string"}},
}
NOT_ACCEPTABLE = "The Accept header allows none of the media types this action answers (those of its 200)"


def _success_headers(registry: ToolRegistry, action: Action) -> dict[str, Any]:
    """The headers a success of `action` may carry: a page's, `Truncated` under its presenter's `limit` or an
    `EgressLimit`, and `Truncated-Embedded` under an embedded presenter's `limit`."""
    egress = sys.modules.get("mcpfusion.egress")  # (an EgressLimit exists only once its module is loaded)
    limited = egress is not None and any(isinstance(mw, egress.EgressLimit) and applies(mw, action)
                                         for mw in registry.layers(action))
    # (A page is never cut by its presenter's limit: the page size is capped by it.)
    limited = limited or (not action.paginate and any(p.max_items is not None for p in action.presenters))
    embedded = any(_limits_embedded(p) for p in action.presenters)
    return {**(PAGE_HEADERS if action.paginate else {}), **(TRUNCATED_HEADER if limited else {}),
            **(EMBEDDED_HEADER if embedded else {})}


def _limits_embedded(presenter: Any) -> bool:
    """Whether a presenter embeds, at any depth, a child with a `limit` (`embed` refuses a cycle)."""
    return any(child.max_items is not None or _limits_embedded(child) for child in presenter.embeds.values())


def _fields_optional(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its root fields optional (also inside a root anyOf/oneOf): what `_select` may return."""
    out = {k: v for k, v in schema.items() if k != "required"}
    for key in ("anyOf", "oneOf"):
        if isinstance(out.get(key), list):
            out[key] = [_fields_optional(s) if isinstance(s, dict) else s for s in out[key]]
    return out


def _output_schema(action: Action, seen: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The 200 body: the data block's data (a presenter's items, one or a list as the handler's return
    annotation says, or the structured output). `seen` keeps each presenter's item schema for the other
    actions that return it (one per presenter, not per action). An output model (`-> Invoice`) is documented
    as a presenter is, its descriptions included.
    With `_select` (which keeps only the root fields asked for) every field is optional."""
    schemas: list[dict[str, Any]] = []
    firewall = action.output.firewall
    for p in action.presenters or ((firewall,) if firewall is not None else ()):
        if id(p) not in seen:  # as the item leaves the server: computed fields, embeds and censors included
            seen[id(p)] = loose_formats_out(p.wire_schema())  # (what MCP's outputSchema leaves out too)
        schemas.append(seen[id(p)])
    if not schemas:
        if action.output_schema is None:
            return {}
        schema = _unwrapped(inline_refs(action.output_schema))
        return _fields_optional(schema) if action.tool.select else schema
    if action.tool.select:
        schemas = [_fields_optional(s) for s in schemas]
    items = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    many = action.output.many  # from the handler's return annotation: one object, a list, or either
    if many is None:
        return {"anyOf": [items, {"type": "array", "items": items}]}
    return {"type": "array", "items": items} if many else items


def _unwrapped(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema as REST's body has it: structuredContent wraps a list as `{"items": [...]}` (with
    `next_cursor` when paginated), the body is the list itself."""
    branches = schema.get("anyOf")
    if isinstance(branches, list):
        rest = {k: v for k, v in schema.items() if k not in ("anyOf", "type")}
        return {**rest, "anyOf": [_unwrapped(b) if isinstance(b, dict) else b for b in branches]}
    properties = schema.get("properties")
    if isinstance(properties, dict) and ITEMS in properties and set(properties) <= {ITEMS, NEXT_CURSOR}:
        return dict(properties[ITEMS])
    return schema


_SCALAR_TYPES = {"string", "integer", "number", "boolean", "null"}


def _is_scalar(schema: dict[str, Any]) -> bool:
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return all(v is None or isinstance(v, str | int | float | bool) for v in values)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return all(_is_scalar(s) for s in schema[key])
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return bool(kinds) and all(k in _SCALAR_TYPES for k in kinds)


def query_parameters(action: Action) -> list[dict[str, Any]] | None:
    """OpenAPI query parameters of `GET /api/{tool}/{action}`: None unless the action is read-only and its
    parameters are scalars (`_select` is a repeated parameter)."""
    if not action.readonly:
        return None
    schema = _own_select(action, inline_refs(action.input_schema))
    required = set(schema.get("required", []))
    parameters = []
    for name, prop in schema.get("properties", {}).items():
        if name != SELECT_PARAM and not _is_scalar(prop):
            return None
        parameter: dict[str, Any] = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if prop.get("description"):
            parameter["description"] = prop["description"]
        if name == SELECT_PARAM:
            parameter.update(style="form", explode=True)
        parameters.append(parameter)
    return parameters


def cursor_scope(registry: ToolRegistry | None, action: Action) -> Dependant | None:
    """The app's `cursor_scope` dependency as it is solved with `action` (a page's, a confirmation's: a call
    of the action runs it too), else None (no registry known, or an action that pages and confirms nothing)."""
    if registry is None or not (action.paginate or action.confirm):
        return None
    return registry.paging.scope_dependant()


def request_parameters(action: Action, scope: Dependant | None = None) -> list[dict[str, Any]]:
    """OpenAPI `in: header` and `in: cookie` parameters of the action's dependencies (`Header()`, `Cookie()`),
    and of the cursor `scope` solved with them (`cursor_scope`), as FastAPI documents them for its own routes:
    generated by FastAPI for a route of the same dependencies, their schemas inlined (the document's
    components are the app's). One the action and the scope both read is listed once, as FastAPI lists it."""
    found = _route_parameters(action.dependant)
    seen = {(p["in"], p["name"]) for p in found}
    if scope is not None:
        found += [p for p in _route_parameters(scope) if (p["in"], p["name"]) not in seen]
    return found


def _route_parameters(dependant: Dependant) -> list[dict[str, Any]]:
    """The header and cookie parameters FastAPI documents for a route of `dependant`'s call."""
    call = dependant.call
    if call is None or not _reads_request(dependant):
        return []
    route = APIRoute("/", call, methods=["POST"], response_model=None)
    document = get_openapi(title="", version="", routes=[route])
    found = document["paths"]["/"]["post"].get("parameters", [])
    defs = {name: rewrite(schema, _local_ref) for name, schema in
            document.get("components", {}).get("schemas", {}).items()}
    return [{**p, "schema": inline_refs(rewrite(p["schema"], _local_ref), defs)}
            for p in found if p.get("in") in ("header", "cookie")]


def _reads_request(dependant: Dependant) -> bool:
    """Whether a dependency of the tree reads a header or a cookie."""
    return bool(dependant.header_params or dependant.cookie_params) or any(map(_reads_request, dependant.dependencies))


_COMPONENT_REF = "#/components/schemas/"


def _local_ref(node: dict[str, Any], _root: bool) -> dict[str, Any]:
    """A reference to the document's components as one to local `$defs` (what `inline_refs` replaces)."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_COMPONENT_REF):
        return {**node, "$ref": "#/$defs/" + ref[len(_COMPONENT_REF):]}
    return node


#: The most distinct query parameter names a call may send: an action declares far fewer, and the rest are
#: refused anyway (each one a field of the 422), so a flood is refused at once, before it is read.
MAX_QUERY_NAMES = 256


def _too_many_query_names(request: Request) -> list[tuple[str, str]] | None:
    """The invalid field of a query string with more than `MAX_QUERY_NAMES` names, or one that is not UTF-8
    once percent-decoded, else None."""
    count = len(request.query_params)  # distinct names
    if count > MAX_QUERY_NAMES:
        return [("(query)", f"At most {MAX_QUERY_NAMES} query parameters are read; this URL has {count}. "
                            "Send only the action's parameters.")]
    replaced = any("\ufffd" in name or "\ufffd" in value for name, value in request.query_params.multi_items())
    if replaced and not _utf8_query(request.scope.get("query_string", b"")):
        # (Starlette reads what is no UTF-8 as U+FFFD: the action would get another value than the one sent,
        # where a JSON body holding those bytes is refused)
        return [("(query)", "The query string is not UTF-8 once percent-decoded: percent-encode each value's "
                            "UTF-8 bytes (%C3%A9 for é).")]
    return None


def _utf8_query(raw: bytes) -> bool:
    """Whether every name and value of a raw query string decodes as UTF-8."""
    try:
        urllib.parse.parse_qsl(raw.decode("latin-1"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def _query_arguments(request: Request, readers: dict[str, Callable[[str], Any]]) -> dict[str, Any]:
    """Query parameters as arguments: text values, read as a JSON body carries them where the parameter's type
    takes other values than strings (`readers`), then validated like a body's; a repeated name is a list. One
    pass over the pairs (`getlist` per name scans them all: quadratic in the URL)."""
    grouped: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        grouped.setdefault(name, []).append(value)
    arguments: dict[str, Any] = {}
    for name, values in grouped.items():
        read = readers.get(name)
        arguments[name] = values if name == SELECT_PARAM or len(values) > 1 else \
            values[0] if read is None else read(values[0])
    return arguments


def _too_large(request: Request, max_body_bytes: int) -> Response:
    """The 413 of a body over the limit; with `Connection: close` when the rest of it was left unread (the
    client must not send its next request on that connection)."""
    too_large = StarletteHTTPException(413, f"The body exceeds the limit of {max_body_bytes} bytes.")
    answer = http_problem_response(too_large, request.url.path)
    return closing(answer) if left_unread(request.scope) else answer


def _repeated_scalars(request: Request, action: Action, arguments: dict[str, Any]) -> list[tuple[str, str]]:
    """The invalid fields of a GET naming one of the action's parameters more than once: every parameter a GET
    takes is a scalar (`_select` alone is repeated), so `?id=a&id=b` is a mistake to name as such, not a list
    the parameter's type refuses ("Input should be a valid string")."""
    return [(name, f"{name} was sent {len(value)} times in the query; send it once.")
            for name, value in arguments.items()
            if name != SELECT_PARAM and isinstance(value, list) and name in action.accepted_keys]


def _json_kinds(schema: dict[str, Any]) -> set[str]:
    """The JSON types a scalar parameter's schema takes ("number" for integers too: JSON has one number)."""
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return {_kind(v) for v in values}
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return set().union(*(_json_kinds(s) for s in schema[key] if isinstance(s, dict)))
    kind = schema.get("type")
    kinds = set(kind if isinstance(kind, list) else [kind] if kind else ["string"])  # (untyped: any text)
    return {"number" if k == "integer" else k for k in kinds}


def _kind(value: Any) -> str:
    """The JSON type of a scalar value, as `_json_kinds` names it."""
    return "null" if value is None else "boolean" if isinstance(value, bool) else \
        "number" if isinstance(value, int | float) else "string"


def _query_readers(action: Action, parameters: list[dict[str, Any]]) -> dict[str, Callable[[str], Any]]:
    """How the query text of each parameter whose type takes a number, a boolean or null is read: as a JSON
    body would carry it, so GET and POST hand the handler the same values (`?size=2` for `Literal[1, 2, 3]` is
    2, `?n=5` for `int | str` is 5). A parameter of strings only keeps its text, and so does every parameter
    for a quoted text (`?q="a b"` is `'"a b"'`, as POST's `{"q": "\\"a b\\""}`), and a type that reads the
    number's text itself (`Decimal`: `?amount=1.10` is `Decimal("1.10")`, never a float's `1.1`)."""
    readers: dict[str, Callable[[str], Any]] = {}
    for parameter in parameters:
        name = parameter["name"]
        kinds = _json_kinds(parameter["schema"])
        if name != SELECT_PARAM and kinds - {"string"}:
            # Taking strings too (`int | str`), the value must also be valid as a number (a bounded `int`...).
            check = _field_check(action, name) if "string" in kinds and name in action.argument_fields else None
            readers[name] = functools.partial(_read_query_value, kinds, check)
    return readers


_INVALID = object()  # what `_field_check` returns for a value the field refuses


def _field_check(action: Action, name: str) -> Callable[[Any], Any]:
    """What a value becomes in the argument field `name`, validated in lax mode as the call validates it, or
    `_INVALID` (its adapter made on first use, from the argument model's field: type and constraints)."""

    @functools.cache
    def adapter() -> TypeAdapter[Any]:
        field = action.args_model.model_fields[name]
        return TypeAdapter(Annotated[field.annotation, field])  # type: ignore[arg-type]

    def check(value: Any) -> Any:
        try:
            return adapter().validate_python(value)
        except ValidationError:
            return _INVALID

    return check


def _read_query_value(kinds: set[str], check: Callable[[Any], Any] | None, text: str) -> Any:
    """The JSON reading of `text` when it is a number, a boolean or null of a type the parameter takes (and,
    for a parameter that also takes strings, `check` accepts it), else the text itself: then the error quotes
    what was sent. A JSON string is text too: its quotes and escapes are the value's own, as in a body."""
    try:
        value = parse_json(text.encode())
    except InvalidJSON:
        return text
    kind = _kind(value)
    if kind == "string" or kind not in kinds:  # (a list or object: "string")
        return text
    if check is None:
        return value
    # A fraction read as a float may lose digits (12345678901234567.89): a type reading the text as a number
    # of its own (Decimal) gets the text, as a body's string form or a FastAPI query gives it.
    if isinstance(value, float) and isinstance(read := check(text), Number) and not isinstance(read, bool):
        return text
    return text if check(value) is _INVALID else value


def _query_on_post(request: Request, get_too: bool) -> list[tuple[str, str]]:
    """The invalid fields of a POST that has a query string: POST reads its parameters from the body only,
    and a query parameter ignored would answer another call than the one meant (a `Link: rel="next"` URL
    POSTed to would return the first page again, forever)."""
    where = " (or call GET: a GET URL, such as a Link rel=\"next\", is followed with GET)" if get_too else ""
    return [(name, f"POST takes the parameters in its JSON body, not in the query: move it to the body{where}.")
            for name in request.query_params]


def _has_body(request: Request) -> bool:
    """Whether the request says it carries a body (HTTP/1.1: a Content-Length above 0, or Transfer-Encoding)."""
    headers = request.headers
    length = headers.get("content-length")
    return (length is not None and length.strip() not in ("", "0")) or "transfer-encoding" in headers


async def _body_on_get(request: Request, action: Action, max_body_bytes: int) -> Response | None:
    """The refusal of a GET (or HEAD) with a body: it takes its parameters from the query only, and a body
    ignored would answer another call than the one meant (as a POST's query string would)."""
    if not _has_body(request):
        return None
    try:
        raw = await read_body(request, max_body_bytes)
    except BodyTooLarge:
        return _too_large(request, max_body_bytes)
    except ClientDisconnect:  # gone while sending its body: nobody to answer
        return Response(status_code=400)
    if not raw.strip():
        return None
    fields = [("(body)", f"{request.method} takes the parameters in its query string, not in a body: move them "
                         "to the query, or send this body with POST.")]
    return validation_problem(action.label, fields, request.url.path)


def _unsupported_body(content_type: str | None, content_encoding: str | None) -> StarletteHTTPException | None:
    """The 415 for a body this adapter cannot read as UTF-8 JSON, else None."""
    if not (is_json_body(content_type) and is_identity_encoding(content_encoding)):
        return StarletteHTTPException(415, "Send the action's parameters as application/json, uncompressed.")
    charset = charset_not_utf8(content_type)
    if charset is not None:
        return StarletteHTTPException(415, f"Send the body as UTF-8 JSON (application/json without a charset, or "
                                           f"charset=utf-8): charset={charset[:40]} is not read.")
    return None


HostCheck = Callable[[str | None, str | None], tuple[int, str] | None]  # (Host, Origin) -> None, or (status, why)


def _sets_response(registry: ToolRegistry, action: Action) -> bool:
    """Whether a dependency of `action`, or the app's cursor scope solved with it (a page's, a confirmation's),
    takes FastAPI's `Response` to set headers, cookies or a status on."""
    if takes_response(action.dependant):
        return True
    scope = cursor_scope(registry, action)
    return scope is not None and takes_response(scope)


async def _answer_with_response(registry: ToolRegistry, action: Action, arguments: dict[str, Any],
                                request: Request) -> Response:
    """The answer of a call whose dependencies may set headers, cookies or a status on their `Response`: the
    headers and cookies go on the answer (a problem's too), the status on a success only (a problem keeps the
    status of its error), as a FastAPI route adds them to what its endpoint returns. An `HTTPException` raised
    is answered by the exception handlers without them, as FastAPI answers it."""
    set_by_dependencies, token = collect_response()
    try:
        response = await registry.call_action(action, arguments, request, transport="rest")
    finally:
        end_response_collection(token)
    answer = rest_body(response, request, action)
    status = set_by_dependencies.status_code
    if status and not response.is_error and status != answer.status_code:
        answer.status_code = status
        if not is_body_allowed_for_status_code(status):  # a 204 or a 304: no body, as FastAPI sends it
            answer.body = b""
            del answer.headers["content-length"]
    answer.raw_headers.extend(set_by_dependencies.raw_headers)
    return answer


def _endpoint(registry: ToolRegistry, action: Action, method: str, max_body_bytes: int,
              host_check: HostCheck | None, get_too: bool = False,
              readers: dict[str, Callable[[str], Any]] | None = None) -> Any:
    # Decided once: only an action a dependency of which takes a `Response` collects it on every call (and one
    # with dependencies while the app overrides some: an override may take one).
    sets_response = _sets_response(registry, action)
    overridable = not action.dependency_free
    sendable = sendable_media_types(action)

    async def call_action(request: Request) -> Response:
        if host_check is not None:
            headers = request.headers
            refusal = host_check(headers.get("host"), headers.get("origin"))
            if refusal is not None:  # as /mcp answers: 421 for a foreign Host, 403 for a foreign Origin
                return http_problem_response(StarletteHTTPException(*refusal), request.url.path)
        refused_accept = not_acceptable(request, sendable)
        if refused_accept is not None:  # (before the call: a write is never done for an answer nobody can read)
            return refused_accept
        too_many = _too_many_query_names(request)
        if too_many is not None:
            return validation_problem(action.label, too_many, request.url.path)
        if method == "GET":
            refused = await _body_on_get(request, action, max_body_bytes)
            if refused is not None:
                return refused
            arguments: Any = _query_arguments(request, readers or {})
            repeated = _repeated_scalars(request, action, arguments)
            if repeated:
                return validation_problem(action.label, repeated, request.url.path)
        elif request.query_params:
            return validation_problem(action.label, _query_on_post(request, get_too), request.url.path)
        else:
            try:
                raw = await read_body(request, max_body_bytes)
            except BodyTooLarge:
                return _too_large(request, max_body_bytes)
            except ClientDisconnect:  # gone while sending its body: nobody to answer (and nothing to log)
                return Response(status_code=400)
            unsupported = _unsupported_body(request.headers.get("content-type"),
                                            request.headers.get("content-encoding")) if raw.strip() else None
            if unsupported is not None:
                return http_problem_response(unsupported, request.url.path)
            try:
                arguments = parse_json(raw) if raw.strip() else {}
            except InvalidJSON as exc:  # not JSON, or nested deeper than the parser allows
                fields = [("(body)", f"Send a JSON object of the action's parameters: {exc.reason}.")]
                return validation_problem(action.label, fields, request.url.path)
        if not isinstance(arguments, dict):
            fields = [("(body)", "Send a JSON object of the action's parameters.")]
            return validation_problem(action.label, fields, request.url.path)
        if sets_response or (overridable and getattr(request.scope.get("app"), "dependency_overrides", None)):
            return await _answer_with_response(registry, action, arguments, request)
        return rest_body(await registry.call_action(action, arguments, request, transport="rest"), request, action)

    call_action.__name__ = f"{action.tool.name}_{action.name}" + ("_get" if method == "GET" else "")
    setattr(call_action, _OWNER, registry)  # (whose problems its errors are: `_RestFirst.ours`)
    return call_action


def add_rest_routes(app: FastAPI, registry: ToolRegistry, *, prefix: str = "/api",
                    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, host_check: HostCheck | None = None) -> None:
    """A documented POST route per action, and GET for read-only actions with scalar parameters; every
    error under `prefix` answers problem details. Bodies above `max_body_bytes` are refused (413) unread.
    `host_check` (the MCP endpoint's DNS-rebinding guard) refuses a foreign Host or Origin as `/mcp` does:
    the REST routes serve the same data.

    The FastAPI routes of an action are made the first time its path is requested or the OpenAPI document
    is generated (`ActionRoute`): a server of hundreds of actions starts without building them all. An action
    added to a tool after this is routed (and documented) as well (`LateActions`)."""
    errors = openapi_errors()
    item_schemas: dict[int, dict[str, Any]] = {}
    schemes: dict[str, Any] = {}  # the security schemes the actions' dependencies use, filled as routes are made

    def action_route(action: Action) -> ActionRoute:
        path = f"{prefix}/{action.tool.name}/{action.name}"
        declare = functools.partial(_declare_routes, registry, action, path, errors, item_schemas, schemes,
                                    max_body_bytes, host_check)
        return ActionRoute(app.router, path, f"{action.tool.name}.{action.name}", declare)

    routes = [action_route(action) for action in registry.actions()]
    late = LateActions(app, registry, prefix, action_route, {route.path for route in routes})
    app.router.routes.extend([*routes, late])
    install_problem_handlers(app, registry, prefix)
    _document_problem(app, schemes, late)


def _own_select(action: Action, schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with a `_select` of this action's own fields: the tool's input schema lists every action's
    (MCP shows one schema per tool), but a call selecting another action's field is refused. Without any
    (an action without a declared output) it takes no `_select`."""
    properties = schema.get("properties", {})
    if SELECT_PARAM not in properties:
        return schema
    keys = action.output_keys()
    own = {**properties, SELECT_PARAM: select_schema(keys)} if keys else \
        {k: v for k, v in properties.items() if k != SELECT_PARAM}
    return {**schema, "properties": own}


def _body_schema(action: Action) -> dict[str, Any]:
    """The POST body's schema: the action's parameters, plus `_confirm` for an action that asks for the user's
    confirmation (a 428 CONFIRMATION_REQUIRED answer asks for the same body with it)."""
    schema = _own_select(action, inline_refs(action.input_schema))
    if not action.confirm:
        return schema
    token = {"type": "string", "description": "The confirm_token of a 428 CONFIRMATION_REQUIRED answer: send "
             "it with exactly the same arguments, once the user agreed."}
    return {**schema, "properties": {**schema.get("properties", {}), CONFIRM_PARAM: token}}


def _declare_routes(registry: ToolRegistry, action: Action, path: str, errors: dict[str, Any],
                    item_schemas: dict[int, dict[str, Any]], schemes: dict[str, Any], max_body_bytes: int,
                    host_check: HostCheck | None, router: APIRouter) -> None:
    """Add the FastAPI routes of one action to `router`: POST, and GET when its parameters fit a query. The
    security schemes its dependencies use (`Security(HTTPBearer())`...) are documented on both, and added to
    `schemes` for the document's components, as FastAPI documents its own routes."""
    alone = content_only(action)
    success = {
        "description": ("The document itself, sent inline (Content-Disposition names its file when known)" if alone
                        else "The data, exactly as the MCP data block carries it")
        + ("; one page of it (see the Next-Cursor header)" if action.paginate else ""),
        "content": _success_content(action, item_schemas),
    }
    sent = _success_headers(registry, action)
    if alone:
        sent = {**sent, **DISPOSITION_HEADER}
    # Only a GET's next page is a URL to follow (`_next_page`): a POST's 200 lists no Link.
    posted = {k: v for k, v in sent.items() if k != "Link"}
    errors = {**errors, "406": {**errors["default"], "description": NOT_ACCEPTABLE}}
    responses = {"200": {**success, **({"headers": sent} if sent else {})}, **errors}
    post_responses = {"200": {**success, **({"headers": posted} if posted else {})}, **errors}
    common: dict[str, Any] = {
        "summary": action.summary or action.name,
        # Cleaned as FastAPI cleans a route's docstring (an indented paragraph would be a code block).
        "description": inspect.cleandoc(action.fn.__doc__ or "") or action.description,
        "tags": [action.tool.name],
    }
    if alone:  # (else FastAPI adds its response class's application/json to the 200)
        common["response_class"] = Response
    security = _security(action, schemes)
    parameters = query_parameters(action)
    # What its dependencies (and the cursor scope solved with them) read from the request: REST must send them.
    headers = request_parameters(action, cursor_scope(registry, action))
    router.add_api_route(
        path, _endpoint(registry, action, "POST", max_body_bytes, host_check, parameters is not None),
        methods=["POST"],
        name=f"{action.tool.name}.{action.name}", operation_id=f"{action.tool.name}_{action.name}", **common,
        openapi_extra={
            "requestBody": {
                # An empty body is `{}`: only an action with required parameters needs one.
                "required": bool(action.required),
                "content": {"application/json": {"schema": _body_schema(action)}},
            },
            "responses": post_responses,
            **({"parameters": headers} if headers else {}),
            **security,
        },
    )
    if parameters is not None:
        get = _endpoint(registry, action, "GET", max_body_bytes, host_check, readers=_query_readers(action, parameters))
        router.add_api_route(
            path, get, methods=["GET"],
            name=f"{action.tool.name}.{action.name}.get", operation_id=f"{action.tool.name}_{action.name}_get",
            **common, openapi_extra={"parameters": [*parameters, *headers], "responses": responses, **security},
        )
        # HEAD wherever GET is served (RFC 9110): the GET's status and headers, no body (the server drops it).
        # Left out of OpenAPI: a HEAD operation would repeat the GET's, operation id included.
        router.add_api_route(path, get, methods=["HEAD"], name=f"{action.tool.name}.{action.name}.head",
                             include_in_schema=False)


class ActionRoute(BaseRoute):
    """The REST path of one action in the app's route list. Its FastAPI routes (what `router.add_api_route`
    makes: the app's dependencies, response class and OpenAPI operation) are built on first use and then
    match and answer the requests; `path`, `name` and `methods` read like theirs."""

    _routes: list[BaseRoute]  # set with `_declare` done: no list per action until then (a server has hundreds)

    def __init__(self, router: APIRouter, path: str, name: str, declare: Callable[[APIRouter], None]) -> None:
        self.path = self.path_format = path
        self.name = name
        self._router = router
        self._declare: Callable[[APIRouter], None] | None = declare

    def routes(self) -> list[BaseRoute]:
        """The action's FastAPI routes, made by the app's router settings the first time (kept out of its
        list: this route stands for them there)."""
        declare = self._declare
        if declare is not None:
            scratch = copy.copy(self._router)
            scratch.routes = []
            declare(scratch)
            self._routes, self._declare = scratch.routes, None
        return self._routes

    @property
    def methods(self) -> set[str]:
        return {m for r in self.routes() for m in getattr(r, "methods", None) or ()}

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or get_route_path(scope) != self.path:
            return Match.NONE, {}
        partial: tuple[Match, Scope] | None = None
        for route in self.routes():
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                return match, child_scope
            if match is Match.PARTIAL and partial is None:
                partial = match, child_scope
        return partial or (Match.NONE, {})

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = scope.get("route")  # the FastAPI route that matched (a PARTIAL one answers 405)
        routes = self.routes()
        if route not in routes:
            route = routes[0]
        await route.handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        if name in (self.name, f"{self.name}.get"):
            for route in self.routes():
                try:
                    return route.url_path_for(name, **path_params)
                except NoMatchFound:
                    pass
        raise NoMatchFound(name, path_params)


class LateActions(BaseRoute):
    """Routes the actions added to a tool after the app was built (MCP lists and serves them at once), looked
    at only for a path under the prefix that no route matched, and before the OpenAPI document is served:
    never on a routed call's path. Their `ActionRoute`s go before it, where routing finds them from then on."""

    def __init__(self, app: FastAPI, registry: ToolRegistry, prefix: str,
                 make: Callable[[Action], ActionRoute], routed: set[str]) -> None:
        self._app, self._registry, self._prefix, self._make, self._routed = app, registry, prefix, make, routed
        self.path = f"{prefix}/{{tool}}/{{action}}"  # (what code listing an app's routes reads of each)

    def route_new(self) -> bool:
        """Add the routes of the actions not routed yet; True when there were any (the cached OpenAPI
        document, which leaves them out, is dropped)."""
        registry = self._registry
        if sum(len(tool.actions) for tool in registry.tools.values()) == len(self._routed):
            return False
        new = [self._make(action) for action in registry.actions()
               if f"{self._prefix}/{action.tool.name}/{action.name}" not in self._routed]
        if not new:
            return False
        self._routed.update(route.path for route in new)
        routes = list(self._app.router.routes)  # a new list: a request being routed iterates the old one
        here = next((i for i, r in enumerate(routes) if r is self), len(routes))
        routes[here:here] = new
        self._app.router.routes = routes
        self._app.openapi_schema = None
        return True

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or not get_route_path(scope).startswith(self._prefix + "/") \
                or not self.route_new():
            return Match.NONE, {}
        partial: tuple[Match, Scope] = (Match.NONE, {})
        for route in self._app.router.routes:
            if isinstance(route, ActionRoute):
                match, child_scope = route.matches(scope)
                if match is Match.FULL:
                    return match, {**child_scope, "mcpfusion.route": route}
                if match is Match.PARTIAL and partial[0] is Match.NONE:
                    partial = match, {**child_scope, "mcpfusion.route": route}
        return partial

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await scope["mcpfusion.route"].handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        raise NoMatchFound(name, path_params)  # the routes it adds answer for their names


@contextlib.contextmanager
def _materialised(app: FastAPI) -> Iterator[None]:
    """The app's routes with every `ActionRoute` replaced by its FastAPI routes, while FastAPI writes the
    OpenAPI document (a new list: requests being routed meanwhile see equivalent routes either way)."""
    routes = app.router.routes
    app.router.routes = [r for route in routes
                         for r in (route.routes() if isinstance(route, ActionRoute) else (route,))]
    try:
        yield
    finally:
        app.router.routes = routes


async def _answer(handler: Any, request: Request, exc: Exception) -> Response:
    """What an exception handler answers; a sync one runs in a worker thread, as Starlette runs it."""
    if is_async_callable(handler):
        return typing.cast(Response, await handler(request, exc))
    return typing.cast(Response, await run_in_threadpool(handler, request, exc))


def _unknown(registry: ToolRegistry, request: Request, prefix: str) -> dict[str, Any]:
    """The problem of a path (under `prefix`) that names no action: an unknown tool, or an unknown action of
    a tool. Its recovery names REST routes (the agent's names MCP calls: tools/list, the action argument)."""
    tool_name, _, action_name = get_route_path(request.scope)[len(prefix) + 1:].partition("/")
    try:
        registry.find(tool_name, action_name, registry.granted(request))
        error: ToolError = unknown_action(registry.tools[tool_name], action_name)  # a deeper path under an action
    except ToolError as exc:
        error = exc
    found = problem_of(error, instance=request.url.path)
    base = request.scope.get("root_path", "") + prefix
    openapi = request.app.openapi_url
    see = f"; {request.scope.get('root_path', '')}{openapi} documents every route" if openapi else ""
    if error.code == UNKNOWN_TOOL:
        tools = error.available if isinstance(error, UnknownToolError) else []
        found.pop("available_actions", None)  # tool names, not actions
        found["recovery"] = (f"Call {base}/{{tool}}/{{action}} with one of these tools: {', '.join(tools)}{see}."
                             if tools else "These credentials may call no tool.")
    else:
        actions = [name[len(tool_name) + 1:] for name in error.available_actions]
        found["recovery"] = f"Call {base}/{tool_name}/{{action}} with one of these actions: {', '.join(actions)}{see}."
    return found


def serves_path(registry: ToolRegistry, prefix: str = "/api") -> Callable[[Scope], bool]:
    """Whether a request under `prefix` is `registry`'s REST to answer (where the Host guard refuses a foreign
    Host): a path naming one of its tools, or one that neither a route of the app nor another fusion's tool
    claims (its 404 would list the tools). The app's own routes under the prefix keep their own rules."""

    def serves(scope: Scope) -> bool:
        segment = get_route_path(scope)[len(prefix) + 1:].partition("/")[0]
        if segment in registry.tools:
            return True
        request = Request(scope)
        other = any(isinstance(route, LateActions) and route._prefix == prefix and route._registry is not registry
                    and segment in route._registry.tools for route in request.app.router.routes)
        return not other and not _app_claims(request, prefix, segment)

    return serves


_OWNER = "_mcpfusion_registry"  # the attribute of a REST endpoint naming the registry whose action it calls


def _owner(request: Request) -> ToolRegistry | None:
    """The registry whose REST route routing matched (fully, or by path for a 405), None for another route's
    or none."""
    return typing.cast("ToolRegistry | None", getattr(request.scope.get("endpoint"), _OWNER, None))


def _app_matched(request: Request) -> bool:
    """Whether one of the app's own routes matched (its endpoint is in the scope; an outer `Mount`'s, when
    the app is mounted in another, is not one of them)."""
    endpoint = request.scope.get("endpoint")
    if endpoint is None:
        return False
    return any(getattr(route.original_route, "endpoint", None) is endpoint
               or getattr(route.original_route, "app", None) is endpoint
               for route in iter_route_contexts(request.app.router.routes))


def _app_claims(request: Request, prefix: str, segment: str) -> bool:
    """Whether one of the app's own routes (included routers' too, as FastAPI matches them) lives at
    `prefix/segment`: an unmatched path there is the app's to answer."""
    for route in iter_route_contexts(request.app.router.routes):
        if isinstance(route.original_route, (ActionRoute, LateActions)):
            continue
        path = getattr(route, "path", None)
        if isinstance(path, str) and path.startswith(prefix + "/"):
            first = path[len(prefix) + 1:].partition("/")[0]
            if first == segment or first.startswith("{"):
                return True
    return False


class _RestFirst:
    """An exception handler answering the errors of one fusion's REST routes (of `registry`, at `prefix`) with
    mcpfusion's problem (`mine`), and every other request with the handler it wraps (`theirs`: the app's, or
    another fusion's; none: Starlette's bare 500)."""

    def __init__(self, registry: ToolRegistry, prefix: str, mine: Callable[[Request, Exception], Any],
                 theirs: Any) -> None:
        self.registry, self.prefix, self.mine, self.theirs = registry, prefix, mine, theirs

    def ours(self, request: Request) -> bool:
        owner = _owner(request)
        if owner is not None or _app_matched(request):  # a route matched: its owner's
            return owner is self.registry
        # No route matched: a path under the prefix naming one of this fusion's tools, or naming nothing the
        # app or another fusion serves (the innermost fusion lists its tools).
        # The path routes see: under a root_path (a proxy's prefix, or the app mounted) the URL's starts with it.
        path = get_route_path(request.scope)
        if not (path.startswith(self.prefix + "/") or path == self.prefix):
            return False
        segment = path[len(self.prefix) + 1:].partition("/")[0]
        if segment in self.registry.tools:
            return True
        if _wrapped_fusions(self.theirs, lambda other: segment in other.registry.tools):
            return False
        return not _wrapped_fusions(self.theirs, lambda other: True) and not _app_claims(request, self.prefix, segment)

    async def __call__(self, request: Request, exc: Exception) -> Response:
        if self.ours(request):
            return await _answer(self.mine, request, exc)
        if self.theirs is None:
            return PlainTextResponse("Internal Server Error", status_code=500)
        return await _answer(self.theirs, request, exc)


def _wrapped_fusions(handler: Any, test: Callable[[_RestFirst], bool]) -> bool:
    """Whether `handler` is, or wraps, a fusion's `_RestFirst` passing `test`."""
    while isinstance(handler, _RestFirst):
        if test(handler):
            return True
        handler = handler.theirs
    return False


def _crash_handler(handlers: dict[Any, Any]) -> Any:
    """The handler Starlette gives a crash: the last of those registered for 500 and `Exception`."""
    found = None
    for key, handler in handlers.items():
        if key in (500, Exception):
            found = handler
    return found


def _handled_as(key: Any) -> type[Exception] | None:
    """The class of mcpfusion's handler that answers exceptions of `key` on its REST routes: HTTP errors and
    invalid requests. An app's handler of its own subclass (`class OutOfStock(HTTPException)`) keeps
    answering it there, as it answers it on the app's routes."""
    if key in (StarletteHTTPException, HTTPException):  # (FastAPI's is a subclass of Starlette's)
        return StarletteHTTPException
    if key is RequestValidationError:
        return RequestValidationError
    return None


def _rest_first(handlers: dict[Any, Any], registry: ToolRegistry, prefix: str,
                mine: dict[Any, Callable[[Request, Exception], Any]]) -> dict[Any, Any]:
    """`handlers` with every one that could answer an error of `registry`'s REST routes in place of
    mcpfusion's (`mine`, by key) wrapped so that mcpfusion's answers there: a status code's (Starlette looks it
    up before any class's), and a class's or a crash's the app registered after mount."""
    out: dict[Any, Any] = {}
    for key, handler in handlers.items():
        if key in (500, Exception):
            continue  # (one crash handler, added last)
        if _wrapped_fusions(handler, lambda other: other.registry is registry):
            out[key] = handler  # installed by this fusion's mount, or wrapped already
        elif isinstance(key, int):
            out[key] = _RestFirst(registry, prefix, mine[StarletteHTTPException], handler)
        elif (base := _handled_as(key)) is not None:
            out[key] = _RestFirst(registry, prefix, mine[base], handler)
        else:
            out[key] = handler  # the app's own exception classes: its answer on REST too (`dispatch._for_the_app`)
    crash = _crash_handler(handlers)
    same = _wrapped_fusions(crash, lambda other: other.registry is registry)
    out[Exception] = crash if same else _RestFirst(registry, prefix, mine[Exception], crash)
    return out


def _allow(request: Request, exc: StarletteHTTPException, route_path: str) -> StarletteHTTPException:
    """A 405 of routing on an action's path with Allow listing every method of the path (routing's names one
    route's); an Allow the exception was raised with (a dependency's) stands."""
    headers = exc.headers or {}
    allow = next((v for k, v in headers.items() if k.lower() == "allow"), None)
    route = request.scope.get("route")
    if allow is not None and allow != ", ".join(getattr(route, "methods", None) or ()):
        return exc
    methods = {m for r in request.app.router.routes if isinstance(r, ActionRoute) and r.path == route_path
               for m in r.methods}
    if not methods:
        return exc
    kept = {k: v for k, v in headers.items() if k.lower() != "allow"}
    return StarletteHTTPException(405, exc.detail, headers={**kept, "Allow": ", ".join(sorted(methods))})


def install_problem_handlers(app: FastAPI, registry: ToolRegistry, prefix: str = "/api") -> None:
    """Errors of `registry`'s REST routes (routing's, dependencies', crashes) and of unmatched paths under
    `prefix` that no route of the app claims become problem details; the app's other routes keep the handlers
    they had. The app's status-code handlers (`@app.exception_handler(404)`), which Starlette asks before any
    class's, its crash handler, and handlers it registers after this, are wrapped when the middleware stack is
    built (on the first request), so that mcpfusion still answers its own."""
    handlers = app.exception_handlers

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)  # (registered for it, or for one of its status codes)
        if exc.status_code == 404 and exc.detail == "Not Found" and _owner(request) is None:  # no route here
            return problem_response(_unknown(registry, request, prefix))
        route_path = get_route_path(request.scope)
        if exc.status_code == 405:
            exc = _allow(request, exc, route_path)
        schemes = _schemes_at(registry, route_path, prefix) if exc.status_code == 401 else ()
        return http_problem_response(exc, request.url.path, schemes)
    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        # The errors as MCP reads them (`_raised_errors`: an app's dependency may raise any shape of them).
        fields = [(field_path(e.get("loc", ())), f"{e.get('msg', 'invalid')}.") for e in _raised_errors(exc)]
        label = get_route_path(request.scope)[len(prefix) + 1:] or request.url.path  # tool/action, as MCP names it
        return validation_problem(label, fields, request.url.path)

    async def on_crash(request: Request, exc: Exception) -> Response:
        failed = ToolError(INTERNAL_ERROR, "The request failed with an internal error.", recovery=INTERNAL_RECOVERY)
        return problem_response(problem_of(failed, instance=request.url.path))

    mine: dict[Any, Callable[[Request, Exception], Any]] = {
        StarletteHTTPException: on_http, RequestValidationError: on_validation, Exception: on_crash}
    previous = {StarletteHTTPException: handlers.get(StarletteHTTPException, http_exception_handler),
                RequestValidationError: handlers.get(RequestValidationError, request_validation_exception_handler)}
    for key, answer in previous.items():
        app.add_exception_handler(key, _RestFirst(registry, prefix, mine[key], answer))
    # The crash handler is wrapped at build only: registering `Exception` now would fix its place among the
    # keys, and Starlette gives a crash to the last of 500 and `Exception` the app registers.

    build = app.build_middleware_stack

    def build_middleware_stack() -> ASGIApp:
        # Wrapped for the build only: `app.exception_handlers` stays what the app registered.
        registered = app.exception_handlers
        app.exception_handlers = _rest_first(registered, registry, prefix, mine)
        try:
            return build()
        finally:
            app.exception_handlers = registered

    app.build_middleware_stack = build_middleware_stack  # type: ignore[method-assign]


def _scheme_models(action: Action) -> list[dict[str, Any]]:
    """The OpenAPI security schemes of an action's dependencies (where a 401 says its API key goes)."""
    return [model.model_dump(mode="json", by_alias=True, exclude_none=True)
            for model, _ in security_schemes(action.dependant).values()]


def _schemes_at(registry: ToolRegistry, route_path: str, prefix: str) -> list[dict[str, Any]]:
    """`_scheme_models` of the action at `route_path`; none when the path names no action."""
    tool_name, _, action_name = route_path[len(prefix) + 1:].partition("/")
    tool = registry.tools.get(tool_name)
    action = tool.actions.get(action_name) if tool is not None else None
    return _scheme_models(action) if action is not None else []


def _security(action: Action, schemes: dict[str, Any]) -> dict[str, Any]:
    """The `security` of an action's operations (none without a security scheme among its dependencies)."""
    found = security_schemes(action.dependant)
    for name, (model, _) in found.items():
        schemes.setdefault(name, model.model_dump(mode="json", by_alias=True, exclude_none=True))
    return {"security": [{name: scopes} for name, (_, scopes) in found.items()]} if found else {}


def _document_problem(app: FastAPI, schemes: dict[str, Any], late: LateActions) -> None:
    """Add the `Problem` schema the error responses refer to, and the security schemes the actions use; an
    action added since the document was made is routed, and the document made again."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        late.route_new()
        if app.openapi_schema is None:
            with _materialised(app):
                schema = generate()
            components = schema.setdefault("components", {})
            components.setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
            if schemes:  # the app's own definition of a scheme of the same name stands
                components["securitySchemes"] = {**schemes, **components.get("securitySchemes", {})}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
