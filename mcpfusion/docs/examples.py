"""Call examples for an action: the MCP JSON-RPC `tools/call` body and a REST `curl`.

The curl example also sends the headers and cookies the action's dependencies require (`Header()`,
`Cookie()`: `rest.request_parameters`), and those of the app's `cursor_scope` dependency where a call of the
action solves it (a page's, a confirmation's), each with a sample value, so that running it is no 422.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
from collections.abc import Iterable
from typing import Any

from ..dispatch import ToolRegistry
from ..errors import ValidationFailed
from ..listing import discriminated, mcp_name
from ..rest import cursor_scope, request_parameters
from ..tool import DISCRIMINATOR, Action
from . import samples
from .schema_table import type_label

# What the curl example (and the try-it form) already send: a dependency reading them is given these.
SENT_HEADERS = frozenset({"authorization", "content-type"})
_HEADER_VALUE = re.compile(r"[\x20-\x7e]*")  # printable ASCII: no line break a header cannot carry
_COOKIE_VALUE = re.compile(r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]+")  # RFC 6265 cookie-octets


def rest_path(action: Action) -> str:
    return f"/api/{action.tool.name}/{action.name}"


def action_faults(action: Action) -> samples.Faults:
    """The fields the action refuses in a call with some arguments (`samples.arguments` keeps an example
    only when the action itself takes it: its model's validators, `PastDate`, decimal places...)."""
    def faults(arguments: dict[str, Any]) -> list[str]:
        try:
            action.validate(dict(arguments))
        except ValidationFailed as exc:
            return [name for name, _ in exc.fields]
        except Exception:  # a validator that fails otherwise: no example rather than one that may fail
            return ["(arguments)"]
        return []
    return faults


def example_arguments(action: Action) -> dict[str, Any]:
    """The action's required parameters with sample values that the action itself accepts (what the try-it
    form starts from); a parameter no accepted value was found for is left out."""
    return samples.arguments(action.input_schema, faults=action_faults(action))


def mcp_call(action: Action, arguments: dict[str, Any]) -> dict[str, Any]:
    args = dict(arguments)
    if discriminated(action):
        args = {DISCRIMINATOR: action.name, **args}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": mcp_name(action), "arguments": args}}


def request_examples(action: Action, registry: ToolRegistry | None = None) -> list[dict[str, Any]]:
    """The headers and cookies the action's dependencies read (with `registry`, its cursor scope's too), as
    OpenAPI lists them, each with a value a request may send (`example`: the parameter's or its schema's
    example, else a sample; None when none fits a header or a cookie)."""
    found = []
    for p in request_parameters(action, cursor_scope(registry, action)):
        schema = p.get("schema") or {}
        found.append({"in": p["in"], "name": p["name"], "required": bool(p.get("required")),
                      "type": type_label(schema, schema),
                      "description": p.get("description") or schema.get("description") or "",
                      "example": _wire_value(p["in"], _example(p, schema))})
    return found


def _example(parameter: dict[str, Any], schema: dict[str, Any]) -> Any:
    if "example" in parameter:
        return parameter["example"]
    named = parameter.get("examples")  # (`openapi_examples`: {name: {"value": ...}})
    if isinstance(named, dict):
        for entry in named.values():
            if isinstance(entry, dict) and "value" in entry:
                return entry["value"]
    return samples.sample(schema, schema, name=parameter["name"], today=dt.date.today(), strict=True)


def _wire_value(where: str, value: Any) -> str | None:
    """A sample as a header's (or a cookie's) text: a list's first item, JSON's true/false; None when it
    cannot be sent so (a line break, a `;` in a cookie)."""
    if isinstance(value, list):
        value = value[0] if value else None
    if value is None or isinstance(value, dict):
        return None
    text = json.dumps(value) if isinstance(value, bool) else str(value)
    pattern = _COOKIE_VALUE if where == "cookie" else _HEADER_VALUE
    return text if pattern.fullmatch(text) else None


def sent_headers(parameters: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (name, value) headers a call sends for the required headers and cookies (all the cookies in one
    `Cookie` header); not those it sends anyway (`SENT_HEADERS`), nor one without an example."""
    headers: list[tuple[str, str]] = []
    cookies: list[str] = []
    for p in parameters:
        if not p["required"] or p["example"] is None:
            continue
        if p["in"] == "cookie":
            cookies.append(f"{p['name']}={p['example']}")
        elif p["name"].lower() not in SENT_HEADERS:
            headers.append((p["name"], p["example"]))
    return headers + ([("Cookie", "; ".join(cookies))] if cookies else [])


def curl(path: str, arguments: dict[str, Any], base_url: str,
         parameters: Iterable[dict[str, Any]] = (), media_types: Iterable[str] | None = None) -> str:
    """`curl` for `POST {base_url}{path}` with `arguments` as the JSON body, and the required headers and
    cookies of `parameters` (`request_examples`). An action answering only documents (`media_types`, the REST
    media types it answers, JSON not among them) asks for them and writes the answer to a file (`-o`): curl
    prints no binary to a terminal."""
    url = base_url.rstrip("/") + path
    body = json.dumps(arguments, ensure_ascii=False)
    lines = [f"curl -X POST {shlex.quote(url)}", '-H "Authorization: Bearer $TOKEN"',
             "-H 'Content-Type: application/json'"]
    binary = [m for m in media_types or () if m != "application/json"]
    if binary and len(binary) == len(list(media_types or ())):
        lines.append(f"-H {shlex.quote('Accept: ' + ', '.join(binary))}")
    lines += [f"-H {shlex.quote(f'{name}: {value}')}" for name, value in sent_headers(parameters)]
    lines.append(f"-d {shlex.quote(body)}")
    if binary and len(binary) == len(list(media_types or ())):
        lines.append(f"-o {shlex.quote(download_name(path, binary[0]))}")
    return " \\\n  ".join(lines)


_EXTENSIONS = {"application/pdf": ".pdf", "image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif",
               "image/webp": ".webp", "audio/mpeg": ".mp3", "audio/wav": ".wav", "text/csv": ".csv",
               "application/zip": ".zip"}


def download_name(path: str, media_type: str) -> str:
    """A file name for what `path` answers as `media_type`: the action's name with the type's extension
    (`/api/billing/invoice_pdf` as `invoice.pdf`)."""
    import mimetypes

    essence = media_type.split(";", 1)[0].strip().lower()
    extension = _EXTENSIONS.get(essence) or mimetypes.guess_extension(essence) or ".bin"
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", path.rstrip("/").rsplit("/", 1)[-1]) or "answer"
    suffix = "_" + extension[1:]
    if stem.lower().endswith(suffix) and len(stem) > len(suffix):
        stem = stem[:-len(suffix)]
    return stem + extension
