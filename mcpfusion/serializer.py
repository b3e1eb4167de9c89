"""The one JSON serializer: MCP's data block, structuredContent, JSON-RPC messages, REST bodies and
problem details are all written here, so the same data is the same bytes everywhere.

pydantic-core's Rust encoder: datetimes are ISO 8601 with `T`, dates and times ISO, sets and tuples are
lists, Decimals and UUIDs strings, enums their values, pydantic models their JSON dump; anything else falls
back to `str` rather than failing. Compact output is byte-identical to
`json.dumps(separators=(",", ":"), ensure_ascii=False)` for plain JSON data, several times faster.
"""

from __future__ import annotations

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
