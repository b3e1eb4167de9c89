"""Round 5i: a `CancelledError` that is not the call's own cancellation (user code awaited a task or future that
something else cancelled) is a failure of the call like any other: a self-healing INTERNAL_ERROR on both MCP
wires and the tester, REST's problem+json 500, an answer over stdio; the call's real cancellations (its task
cancelled, the client's cancel through the context) still propagate."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.mcp.channel import Channel
from mcpfusion.middleware import ActionCall, CallNext
from mcpfusion.response import ToolResponse
from mcpfusion.testing import ToolTester
from tests.stdio_lines import WAIT, Lines
from tests.wire_kit import ACCEPT, session

META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
             "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}


async def cancelled_elsewhere() -> None:
    """Await a shared future that its owner cancelled (a coalesced refresh whose owner gave up)."""
    shared = asyncio.get_running_loop().create_future()
    shared.cancel()
    await shared


async def refused_refresh() -> dict[str, float]:
    """A dependency awaiting the same kind of shared future."""
    await cancelled_elsewhere()
    return {"EUR": 1.0}


async def stray_middleware(call: ActionCall, call_next: CallNext) -> ToolResponse:
    if call.action.name == "guarded":
        await cancelled_elsewhere()
    return await call_next(call)


def rates_tool(started: asyncio.Event | None = None) -> Tool:
    tool = Tool("rates", description="Exchange rates")

    @tool.action(readonly=True)
    async def latest() -> dict[str, Any]:
        """Latest rates (shares one in-flight refresh)."""
        refresh = asyncio.ensure_future(asyncio.sleep(10))
        refresh.cancel()  # its owner gave up
        await refresh
        return {"EUR": 1.0}

    @tool.action(readonly=True)
    async def shared() -> dict[str, Any]:
        """Awaits a cancelled future."""
        await cancelled_elsewhere()
        return {}

    from fastapi import Depends

    @tool.action(readonly=True)
    async def cached(rates: dict[str, float] = Depends(refused_refresh)) -> dict[str, Any]:
        """Its dependency awaits a cancelled future."""
        return rates

    @tool.action(readonly=True, middleware=[stray_middleware])
    async def guarded() -> dict[str, Any]:
        """Its middleware awaits a cancelled future."""
        return {}

    @tool.action(readonly=True)
    async def polite(ctx: Context) -> dict[str, Any]:
        """Stops when the client cancelled."""
        ctx.raise_if_cancelled()
        return {"ok": True}

    @tool.action(readonly=True)
    async def slow() -> dict[str, Any]:
        """Waits until cancelled."""
        if started is not None:
            started.set()
        await asyncio.Event().wait()
        return {}

    @tool.action(readonly=True)
    async def ping() -> dict[str, Any]:
        """Answers."""
        return {"ok": True}

    return tool


def fusion() -> MCPFusion:
    app = MCPFusion("rates", tools=[rates_tool()])

    @app.resource("rates://latest")
    async def latest_rates() -> str:
        await cancelled_elsewhere()
        return "{}"

    return app


def assert_internal(text: str) -> None:
    assert 'code="INTERNAL_ERROR"' in text, text
    assert "CancelledError" not in text  # (the log says it; the agent is told an internal error)


def rpc(response: httpx.Response) -> dict[str, Any]:
    """A JSON-RPC answer sent as JSON or as the last SSE event."""
    if response.headers["content-type"].startswith("text/event-stream"):
        events = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads([e for e in events if e][-1])
    return json.loads(response.text)


STRAYS = ["latest", "shared", "cached", "guarded"]


@pytest.mark.parametrize("action", STRAYS)
async def test_every_http_wire_answers_a_stray_cancellation_as_an_internal_error(action, caplog):
    caplog.set_level(logging.ERROR, logger="mcpfusion")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fusion().build_app()),
                                 base_url="http://127.0.0.1") as http:
        rest = await http.post(f"/api/rates/{action}", json={})
        assert rest.status_code == 500
        assert rest.headers["content-type"].startswith("application/problem+json")
        assert "INTERNAL_ERROR" in rest.json()["type"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "rates", "arguments": {"action": action}}}
        legacy = await http.post("/mcp", headers=await session(http), json=call)
        modern = await http.post("/mcp", headers={**ACCEPT, "mcp-protocol-version": "2026-07-28",
                                                  "mcp-method": "tools/call", "mcp-name": "rates"},
                                 json={**call, "params": {**call["params"], "_meta": META_2026}})
        for response in (legacy, modern):
            assert response.status_code == 200
            result = rpc(response)["result"]
            assert result["isError"] is True
            assert_internal(result["content"][0]["text"])
        # The server goes on answering.
        ping = await http.post("/api/rates/ping", json={})
        assert ping.status_code == 200
    internal = [r for r in caplog.records if "internal error in rates/" in r.getMessage()]
    assert len(internal) == 3  # once per call (REST, both MCP wires)


async def test_the_tester_answers_a_stray_cancellation_as_an_internal_error():
    tester = ToolTester(fusion())
    for action in STRAYS:
        result = await tester.call("rates", action)
        assert result.is_error and result.error_code == "INTERNAL_ERROR", action


async def test_a_cancelled_call_still_propagates_its_cancellation():
    started = asyncio.Event()
    tester = ToolTester([rates_tool(started)])
    call = asyncio.ensure_future(tester.call("rates", "slow"))
    await asyncio.wait_for(started.wait(), WAIT)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_the_clients_cancel_through_the_context_still_propagates():
    """`raise_if_cancelled` raises without cancelling the task: the channel says the client cancelled."""
    channel = Channel()
    channel.cancel("the client cancelled")
    tester = ToolTester([rates_tool()])
    with pytest.raises(asyncio.CancelledError):
        await tester.call("rates", "polite", context=Context(channel, transport="mcp"))
    assert (await tester.call("rates", "polite")).data == {"ok": True}


# -- stdio -------------------------------------------------------------------------------------------------


async def test_stdio_answers_a_stray_cancellation():
    from mcpfusion.mcp.stdio import StdioBridge

    lines = Lines()
    bridge = StdioBridge(fusion().build_app(), lines.write, headers={})
    await bridge.startup()
    try:
        for message in [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ]:
            await bridge.handle_line(json.dumps(message))
        calls = [
            {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
             "params": {"name": "rates", "arguments": {"action": "latest"}}},
            {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
             "params": {"name": "rates", "arguments": {"action": "shared"}, "_meta": META_2026}},
            # Not a tool: the cancellation comes out of the app, and the bridge answers it.
            {"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": {"uri": "rates://latest"}},
        ]
        for message in calls:
            bridge.submit(json.dumps(message))
        for msg_id in (7, 8):
            found = await lines.wait_for(lambda m, i=msg_id: m.get("id") == i and "method" not in m)
            assert found["result"]["isError"] is True
            assert_internal(found["result"]["content"][0]["text"])
        found = await lines.wait_for(lambda m: m.get("id") == 9 and "method" not in m)
        assert found["error"]["code"] == -32603
    finally:
        await bridge.close()


def test_http_wires_answer_a_stray_cancellation_in_a_resource_as_an_internal_error():
    import asyncio as _asyncio

    from fastapi.testclient import TestClient as _Client

    from mcpfusion import MCPFusion as _Fusion

    fusion = _Fusion("stray")

    @fusion.resource("data://rates", name="rates")
    async def rates() -> str:
        shared = _asyncio.get_running_loop().create_future()
        shared.cancel()  # owned by someone else, who gave up
        return await shared

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
    with _Client(fusion.build_app()) as client:
        r = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                                      "params": {"uri": "data://rates", "_meta": meta}},
                        headers={"accept": "application/json, text/event-stream", "mcp-method": "resources/read",
                                 "mcp-name": "data://rates", "mcp-protocol-version": "2026-07-28"})
    assert r.headers["content-type"].startswith("application/json"), r.text
    assert r.json()["error"]["code"] == -32603
