"""One JSON serializer: the same data is the same bytes on REST and in MCP's data block (both wires), and
structuredContent carries the same values."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import uuid
from decimal import Decimal

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from mcpfusion import MCPFusion, Tool, success_structured
from mcpfusion.serializer import dumps, jsonable
from tests.service_kit import McpSession, asgi_client, build, mcp, rest


class Colour(enum.Enum):
    RED = "red"


class Point(BaseModel):
    x: int
    at: dt.datetime


EXOTIC = {
    "when": dt.datetime(2024, 1, 2, 3, 4, 5),
    "aware": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    "day": dt.date(2024, 1, 2),
    "time": dt.time(3, 4, 5),
    "tags": {3},
    "frozen": frozenset({"a"}),
    "pair": (1, "two"),
    "price": Decimal("12.50"),
    "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "colour": Colour.RED,
    "point": Point(x=1, at=dt.datetime(2020, 5, 6, 7, 8, 9)),
    "text": "Zoë – 東京 \"quoted\"",
    "nothing": None,
}
EXPECTED = {
    "when": "2024-01-02T03:04:05", "aware": "2024-01-02T03:04:05+02:00", "day": "2024-01-02", "time": "03:04:05",
    "tags": [3], "frozen": ["a"], "pair": [1, "two"], "price": "12.50", "id": "12345678-1234-5678-1234-567812345678",
    "colour": "red", "point": {"x": 1, "at": "2020-05-06T07:08:09"}, "text": "Zoë – 東京 \"quoted\"", "nothing": None,
}

things = Tool("things")


@things.action(readonly=True)
async def exotic() -> dict:
    """Values JSON has no type for"""
    return EXOTIC


@things.action(readonly=True, output_schema={"type": "object"})
async def structured():
    """The same values as structured content"""
    return success_structured(EXOTIC)


def test_the_serializer_writes_iso_datetimes_lists_and_compact_utf8():
    text = dumps(EXOTIC)
    assert json.loads(text) == EXPECTED == jsonable(EXOTIC)
    assert text == json.dumps(EXPECTED, separators=(",", ":"), ensure_ascii=False)
    assert dumps(EXPECTED, pretty=True) == json.dumps(EXPECTED, indent=2, ensure_ascii=False)


async def _data_blocks(http: httpx.AsyncClient, action: str) -> list[dict]:
    """The tools/call result of `action` over the sessionless wire and over a 2025-11-25 session."""
    modern = await mcp(http, "things", action)
    session = McpSession(http, None)
    assert (await session.start()).status_code == 200
    return [modern.json()["result"], (await session.call("things", action))["result"]]


@pytest.mark.parametrize("action", ["exotic", "structured"])
async def test_same_bytes_on_rest_and_in_the_mcp_data_block(action):
    app = MCPFusion("serializer", tools=[things]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        body = (await http.post(f"/api/things/{action}", json={})).content
        assert (await http.get(f"/api/things/{action}")).content == body  # read-only, no parameter: GET too
        for result in await _data_blocks(http, action):
            assert result["isError"] is False
            assert result["content"][0]["text"].encode() == body
            if action == "structured":
                assert result["structuredContent"] == EXPECTED
    assert json.loads(body) == EXPECTED


@pytest.mark.parametrize(("tool", "action", "args", "token"), [
    ("billing", "list_invoices", {}, "demo-admin"),
    ("billing", "get_invoice", {"id": "inv_0001"}, "demo-support"),
    ("customers", "list", {"_select": ["name", "created_on"]}, "demo-admin"),
    ("billing", "revenue_summary", {}, "demo-globex-admin"),
])
async def test_reference_service_rest_body_is_the_data_block(tmp_path, tool, action, args, token):
    app = build(tmp_path)
    async with asgi_client(app) as client:
        body = (await rest(client, tool, action, args, token)).content
        modern = (await mcp(client, tool, action, args, token)).json()["result"]
        session = McpSession(client, token)
        await session.start()
        legacy = (await session.call(tool, action, args))["result"]
    for result in (modern, legacy):
        assert result["content"][0]["text"].encode() == body


# -- structuredContent written from the data block (`Prewritten`, `message_json`) ----------------------------


def _message(response):
    return {"jsonrpc": "2.0", "id": 7, "result": {**response.to_mcp(), "resultType": "complete",
                                                   "_meta": {"k": "v"}}}


def _assert_same_bytes(message):
    from pydantic_core import to_json

    from mcpfusion.mcp.jsonrpc import encode
    from mcpfusion.serializer import message_json

    assert message_json(message) == to_json(message) == encode(message)
    assert json.loads(message_json(message)) == json.loads(json.dumps(message, default=str))


DATA = {"id": "inv_1", "note": "x" * 600, "when": dt.date(2026, 1, 2), "text": 'quotes " \\ \n ✓ </x>', "n": [1, 2.5, None, True],
        "nested": {"d": Decimal("1.50"), "u": uuid.UUID(int=1)}}


def test_structured_content_of_the_data_block_is_written_from_its_text():
    from mcpfusion.response import assemble
    from mcpfusion.serializer import Prewritten

    response = success_structured(DATA)
    assert response.to_mcp()["structuredContent"].__class__ is Prewritten
    _assert_same_bytes(_message(response))
    presented = assemble(dict(DATA), False, [], [], [], ["a rule"], [])
    presented.structured_content = presented.view.data
    assert presented.to_mcp()["structuredContent"].__class__ is Prewritten
    _assert_same_bytes(_message(presented))
    # A list's wrapper, as output schemas and pagination make it.
    rows = assemble([DATA, {"id": "inv_2"}], False, [], [], [], [], [])
    for wrapper in ({"items": rows.view.data}, {"items": rows.view.data, "next_cursor": "c\"1"},
                    {"items": rows.view.data, "next_cursor": None}):
        rows.structured_content = wrapper
        assert rows.to_mcp()["structuredContent"].__class__ is Prewritten
        _assert_same_bytes(_message(rows))


def test_structured_content_is_serialized_when_the_text_or_data_changed():
    from mcpfusion.serializer import Prewritten

    response = success_structured(DATA)
    response.texts[0] = response.texts[0].replace("inv_1", "inv_9")  # the text block rewritten
    assert response.to_mcp()["structuredContent"].__class__ is dict
    response = success_structured(DATA)
    response.view.data = dict(DATA)  # another data object (as the egress guard makes)
    assert response.to_mcp()["structuredContent"].__class__ is dict
    response = success_structured(DATA, pretty=True)  # the block is not the compact JSON
    assert response.to_mcp()["structuredContent"].__class__ is dict
    _assert_same_bytes(_message(response))
    response = success_structured(DATA)
    response.structured_content = {"other": 1}
    assert response.to_mcp()["structuredContent"] == {"other": 1}
    response = success_structured(DATA)
    response.reshape({"id": "inv_1", "note": DATA["note"]})  # `_select`: both written again
    assert response.to_mcp()["structuredContent"].__class__ is Prewritten
    _assert_same_bytes(_message(response))
    response = success_structured({"id": "inv_1"})  # small data: serialized again, cheaper than splicing
    assert response.to_mcp()["structuredContent"].__class__ is dict
    _assert_same_bytes(_message(response))


def test_prewritten_structured_content_is_written_as_its_bytes_and_falls_back_whole():
    from mcpfusion import serializer

    response = success_structured({"a": "x" * 600, "b": 1})
    message = _message(response)
    assert message["result"]["structuredContent"].__class__ is serializer.Prewritten
    # The kept bytes are what goes out (a stand-in's bytes show they are not serialized again).
    message["result"]["structuredContent"] = serializer.Prewritten({"a": 1}, serializer.fragment(b'{"kept":true}'))
    assert json.loads(serializer.message_json(message))["result"]["structuredContent"] == {"kept": True}
    # Something else in the message orjson does not write (a date, an integer beyond 64 bits): the message is
    # written whole, the structured content as the data it holds.
    for other in (dt.date(2026, 1, 2), 2**70):
        message = _message(success_structured({"a": "x" * 600, "b": 1}))
        message["result"]["_meta"] = {"k": other}
        assert message["result"]["structuredContent"].__class__ is serializer.Prewritten
        _assert_same_bytes(message)
        assert json.loads(serializer.message_json(message))["result"]["structuredContent"] == {"a": "x" * 600, "b": 1}
    _assert_same_bytes({"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": serializer.Prewritten(
        {}, serializer.fragment(b"{}"))}})
    _assert_same_bytes({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "m"}})


# -- the two encoders: orjson for JSON's own types, pydantic-core for the rest, the same bytes ----------------

_SCALARS = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.integers() | st.floats()
            | st.text())
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=5)
                       | st.dictionaries(st.text(), inner, max_size=5), max_leaves=25)


@settings(max_examples=800, deadline=None)
@given(_VALUES)
def test_json_bytes_are_pydantic_cores_bytes_for_any_plain_json(value):
    from pydantic_core import to_json

    from mcpfusion.serializer import json_bytes

    for indent in (None, 2):
        try:
            expected = to_json(value, indent=indent, inf_nan_mode="null")
        except ValueError:  # a lone surrogate: neither encoder writes it
            with pytest.raises(ValueError):
                json_bytes(value, pretty=indent is not None)
            continue
        assert json_bytes(value, pretty=indent is not None) == expected
        json.loads(expected, parse_constant=_no_constant)  # valid JSON: no Infinity or NaN


def _key_sorted(value):
    if isinstance(value, dict):
        return {k: _key_sorted(value[k]) for k in sorted(value)}
    return [_key_sorted(v) for v in value] if isinstance(value, list) else value


@settings(max_examples=800, deadline=None)
@given(_VALUES)
def test_canonical_bytes_are_the_json_of_the_data_sorted_by_key(value):
    # What cursor fingerprints digest: orjson's sorted keys, or the fallback's own sorting, never other bytes.
    from pydantic_core import to_json

    from mcpfusion.serializer import canonical_bytes

    try:
        expected = to_json(_key_sorted(value), inf_nan_mode="null")
    except ValueError:  # a lone surrogate: neither writes it
        with pytest.raises(ValueError):
            canonical_bytes(value)
        return
    assert canonical_bytes(value) == expected


def _no_constant(name):
    raise AssertionError(f"{name} is not JSON")


@dataclasses.dataclass
class Pair:
    left: int
    when: dt.date


class Label(str):
    pass


def test_values_orjson_would_write_otherwise_are_written_by_pydantic_core():
    from pydantic_core import to_json

    from mcpfusion.serializer import json_bytes, scalar

    odd = {"pair": Pair(1, dt.date(2026, 1, 2)), "label": Label("x"), "big": 2**80, "when": EXOTIC["aware"],
           "keys": {1: "one"}, "nested": [{"d": Decimal("1.5")}]}
    assert json_bytes(odd) == to_json(odd)
    assert json.loads(json_bytes(odd)) == {"pair": {"left": 1, "when": "2026-01-02"}, "label": "x", "big": 2**80,
                                          "when": "2024-01-02T03:04:05+02:00", "keys": {"1": "one"},
                                          "nested": [{"d": "1.5"}]}
    assert [scalar(v) for v in (2**70, Label("a"), 1.5, None, True, "é\n")] == ['1180591620717411303424', '"a"',
                                                                               "1.5", "null", "true", '"é\\n"']


def test_floats_json_has_no_number_for_are_null():
    from mcpfusion.serializer import scalar

    data = {"inf": float("inf"), "nan": float("nan"), "low": float("-inf"), "ok": 1.5}
    assert dumps(data) == '{"inf":null,"nan":null,"low":null,"ok":1.5}'
    assert dumps({**data, "when": dt.date(2026, 1, 2)}) == (
        '{"inf":null,"nan":null,"low":null,"ok":1.5,"when":"2026-01-02"}')  # pydantic-core's path: the same
    assert scalar(float("inf")) == "null"


weird = Tool("weird")


@weird.action(readonly=True)
async def infinite() -> dict:
    """A float JSON cannot write"""
    return {"ratio": float("inf"), "text": "line\nbreak \"q\" ✓"}


async def test_a_tool_result_with_a_non_finite_float_is_valid_json_on_every_wire():
    app = MCPFusion("serializer", tools=[weird]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        rest_body = (await http.post("/api/weird/infinite", json={})).content
        modern = await mcp(http, "weird", "infinite")
        session = McpSession(http, None)
        assert (await session.start()).status_code == 200
        legacy = await session.call("weird", "infinite")
    assert json.loads(rest_body, parse_constant=_no_constant) == {"ratio": None, "text": "line\nbreak \"q\" ✓"}
    for result in (json.loads(modern.content, parse_constant=_no_constant)["result"], legacy["result"]):
        assert result["content"][0]["text"].encode() == rest_body


def test_as_written_is_what_a_client_reads_back():
    from mcpfusion.serializer import as_written

    value = {"big": 2**70, "nan": float("nan"), "pair": (1, "a"), "on": dt.date(2026, 1, 2), "ok": 1.5}
    assert as_written(value) == {"big": 2**70, "nan": None, "pair": [1, "a"], "on": "2026-01-02", "ok": 1.5}
    assert as_written(value)["big"].__class__ is int
