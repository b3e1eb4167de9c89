"""`ctx.info(...)` of a float JSON has no number for (NaN, Infinity) sends `null` in `notifications/message`, as
the framework's JSON writer writes them everywhere: on the 2025-11-25 session wire's SSE stream every event is
JSON a strict parser reads. That held for a plain float; a pydantic model whose own config writes them as
constants (`ser_json_inf_nan="constants"`) overrode the writer's mode, and the event held `NaN`: no JSON."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict

from mcpfusion import Context, Tool, serializer
from tests.mcp_app import build_fusion, serve
from tests.test_mcp_streams import events_of, initialize


class Reading(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")
    value: float


def strict(text: str) -> Any:
    """JSON as a strict parser (a client's) reads it: NaN and Infinity are refused."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def base_url():
    fusion = build_fusion()
    odd = Tool("odd", exposition="flat")

    @odd.action()
    async def log_odd_numbers(ctx: Context) -> str:
        """Log numbers JSON has no number for."""
        await ctx.info(float("nan"))
        await ctx.info({"high": float("inf"), "low": [float("-inf"), 1.5]})
        await ctx.warning(Reading(value=float("nan")), logger="sensor")
        await ctx.error({"readings": [Reading(value=float("-inf")), Reading(value=2.5)], "note": "NaN Infinity"})
        return "logged"

    fusion.registry.add(odd)
    with serve(fusion.build_app()) as url:
        yield url


async def test_nan_and_infinity_in_log_data_are_null_on_the_session_wires_sse_stream(base_url):
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        headers = await initialize(client)
        await client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                                        "params": {"level": "debug"}}, headers=headers)
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "odd_log_odd_numbers"}}
        async with client.stream("POST", "/mcp", json=body, headers=headers) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            events = await events_of(r)
    messages = [strict(e["data"]) for e in events if e.get("data")]
    assert [m["params"] for m in messages[:-1]] == [
        {"level": "info", "data": None},
        {"level": "info", "data": {"high": None, "low": [None, 1.5]}},
        {"level": "warning", "data": {"value": None}, "logger": "sensor"},
        {"level": "error", "data": {"readings": [{"value": None}, {"value": 2.5}], "note": "NaN Infinity"}},
    ]
    assert messages[-1]["id"] == 3 and messages[-1]["result"]["content"][0]["text"] == "logged"


def test_the_writer_writes_a_models_constants_as_null():
    nan = Reading(value=float("nan"))
    assert serializer.json_bytes(nan) == b'{"value":null}'
    assert serializer.json_bytes({"r": nan, "t": "NaN"}, pretty=True) == b'{\n  "r": {\n    "value": null\n  },\n  "t": "NaN"\n}'
    assert serializer.dumps([Reading(value=float("inf")), 10**30]) == '[{"value":null},1000000000000000000000000000000]'
    assert serializer.json_bytes(Reading(value=1.5)) == b'{"value":1.5}'


def test_deep_data_holding_the_words_is_written_as_it_is_and_deep_constants_are_refused_cleanly():
    import datetime as dt

    def nest(value: Any, depth: int) -> Any:
        for _ in range(depth):
            value = {"k": value}
        return value

    # Text holding the words (the writer used to read such output back, and failed past ~200 levels).
    for note in ("NaN", "Infinity", "-Infinity and NaN", "x:NaN"):
        deep = nest({"when": dt.date(2020, 1, 1), "note": note}, 250)
        assert serializer.json_bytes(deep).endswith(f'{{"when":"2020-01-01","note":"{note}"}}'.encode() + b"}" * 250)
    # A model's NaN constant nested too deep to read back: refused as unwritable (callers answer that), not a 500.
    with pytest.raises(serializer.UNWRITABLE):
        serializer.json_bytes(nest(Reading(value=float("nan")), 300))
    assert serializer.json_bytes(nest(Reading(value=float("nan")), 20)) == b'{"k":' * 20 + b'{"value":null}' + b"}" * 20
