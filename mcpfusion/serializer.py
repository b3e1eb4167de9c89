"""The one JSON serializer: MCP's data block, structuredContent, JSON-RPC messages, REST bodies and
problem details are all written here, so the same data is the same bytes everywhere.

pydantic-core's Rust encoder: datetimes are ISO 8601 with `T`, dates and times ISO, sets and tuples are
lists, Decimals and UUIDs strings, enums their values, pydantic models their JSON dump; anything else falls
back to `str` rather than failing. Compact output is byte-identical to
`json.dumps(separators=(",", ":"), ensure_ascii=False)` for plain JSON data, several times faster.
"""

from __future__ import annotations

import secrets
from typing import Any

from pydantic_core import to_json, to_jsonable_python


def dumps(data: Any, *, pretty: bool = False) -> str:
    """JSON text of `data`: compact, or indented by two spaces."""
    return to_json(data, indent=2 if pretty else None, fallback=str).decode()


def scalar(value: str | int | float | bool | None) -> str:
    """`dumps` of one JSON scalar (no fallback or indentation to pass: the hot path of chart templates)."""
    return to_json(value).decode()


def jsonable(data: Any) -> Any:
    """`data` as plain JSON values, converted exactly as `dumps` would write them."""
    return to_jsonable_python(data, fallback=str)


class Prewritten(dict[str, Any]):
    """A result's `structuredContent` whose JSON is already written (`json`: the data block's own text, or
    that text in its `{"items": ...}` wrapper): `message_json` puts those bytes in instead of serializing
    the same data a second time. Anywhere else it is the plain dict it holds."""

    __slots__ = ("json",)

    def __init__(self, data: dict[str, Any], json: bytes) -> None:
        super().__init__(data)
        self.json = json


# Stands where prewritten JSON goes: unknown outside this process, and looked for exactly once.
SLOT = "\ue000mcpfusion-prewritten-" + secrets.token_hex(16)
_SLOT_JSON = to_json(SLOT)


def spliced(value: Any, json: bytes) -> bytes | None:
    """`to_json(value)` of a value holding `SLOT` once, with `json` written in its place; None when the
    slot is not there exactly once (then serialize the real value)."""
    body = to_json(value, fallback=str)
    start = body.find(_SLOT_JSON)
    end = start + len(_SLOT_JSON)
    if start < 0 or body.find(_SLOT_JSON, end) >= 0:
        return None
    return b"".join((body[:start], json, body[end:]))


def message_json(message: dict[str, Any]) -> bytes:
    """`to_json(message, fallback=str)` of a JSON-RPC message; a result's `Prewritten` structuredContent
    goes in as its JSON."""
    result = message.get("result")
    if result.__class__ is dict:
        structured = result.get("structuredContent")
        if structured.__class__ is Prewritten:
            body = spliced({**message, "result": {**result, "structuredContent": SLOT}}, structured.json)
            if body is not None:
                return body
    return to_json(message, fallback=str)
