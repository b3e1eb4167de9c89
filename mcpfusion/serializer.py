"""The one JSON serializer: MCP's data block, structuredContent, JSON-RPC messages, REST bodies and
problem details are all written here, so the same data is the same bytes everywhere.

Data made of JSON's own types (dicts with string keys, lists, strings, 64-bit integers, floats, booleans,
None: what presenters and protocol messages hold) is written by orjson, several times faster than any other
encoder here on the long strings of a tool result. Anything else goes to pydantic-core's encoder, which writes
the same bytes for those types and converts the rest: datetimes are ISO 8601 with `T`, dates and times ISO,
sets and tuples are lists, Decimals and UUIDs strings, enums their values, pydantic models their JSON dump.
Anything else is refused (`PydanticSerializationError`, naming its type): its `str()` or `repr()` is not the
data and may hold what must not leave (a connection string, a token). Floats that JSON has no number for
(inf, NaN) are `null`, a pydantic model's too whatever its own `ser_json_inf_nan` says. Compact output is
byte-identical to `json.dumps(separators=(",", ":"), ensure_ascii=False)` for plain JSON data
(tests/test_serializer.py checks both encoders against each other).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from pydantic_core import PydanticSerializationError, from_json, to_json, to_jsonable_python

# orjson writes datetimes, dataclasses and subclasses its own way: it refuses them here (and big integers,
# non-string keys, lone surrogates), and pydantic-core writes them.
_PLAIN = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
_PRETTY = _PLAIN | orjson.OPT_INDENT_2
UNWRITABLE = PydanticSerializationError
"""What `json_bytes` raises for data it refuses: a value of no JSON type, or text JSON cannot carry in UTF-8
(a lone surrogate, as `os.fsdecode` makes of a file name that is not UTF-8)."""
# NaN or Infinity where a value stands (after `:`, `[` or `,`, before `,`, `]` or `}`): a constant, not text
# (a string holding the word is quoted, so this matches it only when it holds those marks around it too).
_CONSTANT = re.compile(rb"[:\[,]\s*-?(?:NaN|Infinity)\s*[,\]}]")
# The classes of JSON's scalars: a value of one is written as it is, with nothing to convert.
JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def json_bytes(data: Any, *, pretty: bool = False) -> bytes:
    """The JSON bytes of `data`: compact, or indented by two spaces."""
    try:
        return orjson.dumps(data, option=_PRETTY if pretty else _PLAIN)
    except orjson.JSONEncodeError:
        indent = 2 if pretty else None
        written = to_json(data, indent=indent, inf_nan_mode="null")
        if (b"NaN" in written or b"Infinity" in written) and _CONSTANT.search(written):
            # A pydantic model's own `ser_json_inf_nan="constants"` wins over the mode: its NaN and Infinity
            # are no JSON (a client's parser refuses the message). Read back (pydantic-core reads them) and
            # written again, they are null. (Text holding ":NaN," is written again the same.)
            try:
                return to_json(from_json(written), indent=indent, inf_nan_mode="null")
            except (ValueError, RecursionError):  # nested deeper than the reader goes: refused as unwritable
                raise UNWRITABLE("NaN or Infinity in data nested too deeply to write them as null") from None
        return written


def dumps(data: Any, *, pretty: bool = False) -> str:
    """JSON text of `data`: compact, or indented by two spaces."""
    return json_bytes(data, pretty=pretty).decode()


def scalar(value: str | int | float | bool | None) -> str:
    """`dumps` of one JSON scalar (the hot path of chart templates: orjson called without options)."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, a lone surrogate: `json_bytes` falls back
        return json_bytes(value).decode()


def canonical_bytes(data: Any) -> bytes:
    """Compact JSON of JSON values with every object's keys sorted (what digests are taken of): the bytes
    `json_bytes` writes of the same data with each dict sorted by key."""
    try:
        return orjson.dumps(data, option=_PLAIN | orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # e.g. an integer beyond 64 bits: sorted here, written by pydantic-core
        return json_bytes(_sorted(data))


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def as_written(data: Any) -> Any:
    """`data` as a client reads it back: the JSON values of its compact JSON (a float that JSON cannot hold is
    None, a tuple a list, a date its ISO text), for checking what is sent rather than what was returned."""
    return from_json(json_bytes(data))  # (pydantic-core's parser: integers beyond 64 bits stay exact)


def jsonable(data: Any) -> Any:
    """`data` as plain JSON values, converted exactly as `dumps` would write them."""
    return to_jsonable_python(data)


class Prewritten(dict[str, Any]):
    """A result's `structuredContent` whose JSON is already written: `written` is what orjson writes in its
    place (the data block's own bytes as an `orjson.Fragment`, or the list's `{"items": ...}` wrapper holding
    them as one), so `message_json` does not serialize the same data a second time. Anywhere else it is the
    plain dict it holds."""

    __slots__ = ("written",)

    def __init__(self, data: dict[str, Any], written: Any) -> None:
        super().__init__(data)
        self.written = written


def fragment(json: bytes) -> Any:
    """`json` (valid JSON bytes, written by `json_bytes`) as a value orjson writes as they are."""
    return orjson.Fragment(json)


def message_json(message: dict[str, Any]) -> bytes:
    """`json_bytes` of a JSON-RPC message; a result's `Prewritten` structuredContent goes in as its JSON."""
    result = message.get("result")
    if result.__class__ is dict:
        structured = result.get("structuredContent")
        if structured.__class__ is Prewritten:
            try:
                return orjson.dumps({**message, "result": {**result, "structuredContent": structured.written}},
                                    option=_PLAIN)
            except orjson.JSONEncodeError:
                pass  # something else in it is no plain JSON: the message is written whole, below
    return json_bytes(message)
