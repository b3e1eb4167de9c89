"""A raw tool declaring an `outputSchema` answers structuredContent the schema accepts, whether its own result
or a middleware's answer in its place (a cache, a guard): a client's SDK refuses a result without it."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from mcpfusion import MCPFusion, success, success_structured
from mcpfusion.mcp.stdio import StdioBridge
from tests.service_kit import McpSession
from tests.stdio_lines import Lines
from tests.test_runtime_mends import client, tools_call

WIRES = ("mcp-2026", "mcp-2025", "stdio")
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}

SCHEMA = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}


def _app(result: Any, middleware: list[Any] | None = None) -> Any:
    fusion = MCPFusion("raw", middleware=middleware or [])

    @fusion.raw_tool("totals", output_schema=SCHEMA, annotations={"readOnlyHint": True})
    async def totals() -> Any:
        return result

    return fusion.build_app()


GOOD = {"content": [{"type": "text", "text": '{"total": 3}'}], "structuredContent": {"total": 3}}


async def test_a_result_the_output_schema_accepts_goes_out_as_it_is():
    async with client(_app(GOOD)) as http:
        answer = await tools_call(http, "totals", {})
    assert answer.get("isError") is not True and answer["structuredContent"] == {"total": 3}


async def test_a_result_without_or_against_its_structured_content_is_an_internal_error(caplog):
    caplog.set_level(logging.ERROR, "mcpfusion")
    wrong = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"total": "three", "ssn": "x"}}
    for result, where in (("3 in all", "structuredContent (missing)"), (wrong, "structuredContent['total']")):
        async with client(_app(result)) as http:
            answer = await tools_call(http, "totals", {})
        assert answer["isError"] is True and "INTERNAL_ERROR" in answer["content"][0]["text"], answer
        assert "structuredContent" not in answer
        assert where in caplog.text and "three" not in caplog.text  # where, never the values


async def _result(app: Any, wire: str) -> dict[str, Any]:
    """The result of one `totals` call on `wire`: HTTP sessionless, HTTP over a session, or stdio."""
    if wire == "mcp-2026":
        async with client(app) as http:
            return await tools_call(http, "totals", {})
    if wire == "mcp-2025":
        async with client(app) as http:
            session = McpSession(http, None)
            assert (await session.start()).status_code == 200
            return (await session.call("totals", None, {}))["result"]  # type: ignore[arg-type]
    lines = Lines()
    bridge = StdioBridge(app, lines.write, headers={})
    await bridge.startup()
    try:
        await bridge.handle_line(json.dumps(INIT))
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                             "params": {"name": "totals", "arguments": {}}}))
        return (await lines.wait_for(lambda m: m.get("id") == 7))["result"]  # type: ignore[no-any-return]
    finally:
        await bridge.close()


@pytest.mark.parametrize("wire", WIRES)
async def test_a_middlewares_own_answer_is_held_to_the_same_contract(wire):
    async def cached_text(call: Any, call_next: Any) -> Any:
        return success("cached: 3 in all")  # no structuredContent: the tool's outputSchema promises it

    async def cached_data(call: Any, call_next: Any) -> Any:
        return success_structured({"total": 3})

    refused = await _result(_app(GOOD, [cached_text]), wire)
    kept = await _result(_app(GOOD, [cached_data]), wire)
    assert refused["isError"] is True and "INTERNAL_ERROR" in refused["content"][0]["text"], refused
    assert kept["isError"] is False and kept["structuredContent"] == {"total": 3}


@pytest.mark.parametrize("wire", WIRES)
async def test_the_tools_own_result_is_checked_on_every_wire(wire):
    missing = await _result(_app("3 in all"), wire)
    good = await _result(_app(GOOD), wire)
    assert missing["isError"] is True and "INTERNAL_ERROR" in missing["content"][0]["text"], missing
    assert good.get("isError") is not True and good["structuredContent"] == {"total": 3}


async def test_an_error_needs_no_structured_content():
    async with client(_app({"content": [{"type": "text", "text": "no totals today"}], "isError": True})) as http:
        answer = await tools_call(http, "totals", {})
    assert answer["isError"] is True and answer["content"][0]["text"] == "no totals today"
