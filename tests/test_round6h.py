"""Round 6h: a request the client cancelled is not answered on any wire, even when its handler noticed the cancel
and returned (or failed); a JSON-RPC response posted to the 2026-07-28 wire is a 202 as on the session wire; over
stdio, a message sent without a session and without a usable envelope gets the 2026-07-28 wire's answer (never an
HTTP header's name), and an answered 2026-07-28 request's id is free again at once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import httpx
import pytest

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.mcp import modern
from mcpfusion.mcp.stdio import StdioBridge
from tests.stdio_lines import WAIT, Lines

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
MODERN_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                  "mcp-protocol-version": "2026-07-28"}
ENVELOPE = "params._meta must be an object carrying the required"


def make_app(started: asyncio.Event) -> Any:
    t = Tool("t", description="test tool")

    async def until_cancelled(ctx: Context) -> None:
        started.set()
        with contextlib.suppress(asyncio.CancelledError):  # (a wire may cancel the task too: seen, swallowed)
            await ctx.wait_cancelled()

    @t.action(readonly=True)
    async def polite(ctx: Context) -> str:
        """Returns once the client cancels it."""
        await until_cancelled(ctx)
        return "cancelled-seen"

    @t.action(readonly=True)
    async def cross(ctx: Context) -> str:
        """Fails once the client cancels it."""
        await until_cancelled(ctx)
        raise RuntimeError("gave up")

    @t.action(readonly=True)
    async def quick() -> str:
        """Quick."""
        return "quick"

    @t.action(readonly=True)
    async def stepped(ctx: Context) -> str:
        """Reports progress (its answer is a stream), then answers."""
        await ctx.progress(1, 1)
        return "stepped"

    return MCPFusion("r6h", tools=[t]).build_app()


def call(msg_id: Any, action: str, *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "t", "arguments": {"action": action}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}


def cancel(msg_id: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": msg_id}})


async def started_bridge(app: Any) -> tuple[StdioBridge, Lines]:
    lines = Lines()
    bridge = StdioBridge(app, lines.write, headers={})
    await bridge.startup()
    return bridge, lines


# -- 1. a cancelled request is not answered, whatever its handler does --------------------------------------

@pytest.mark.parametrize("modern_wire", [False, True], ids=["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("action", ["polite", "cross"])
async def test_stdio_does_not_answer_a_cancelled_request_whose_handler_returns(modern_wire, action):
    started = asyncio.Event()
    bridge, lines = await started_bridge(make_app(started))
    try:
        if not modern_wire:
            await bridge.handle_line(json.dumps(INIT))
            await bridge.handle_line(json.dumps(INITED))
        meta = META if modern_wire else None
        bridge.submit(json.dumps(call(41, action, meta=meta)))
        await asyncio.wait_for(started.wait(), WAIT)
        await bridge.handle_line(cancel(41))
        await asyncio.wait_for(asyncio.gather(*bridge.tasks), WAIT)
        await bridge.handle_line(json.dumps(call(42, "quick", meta=meta)))  # (the server goes on)
        assert await lines.reply(42) == "quick"
        assert lines.with_id(41) == []
    finally:
        await bridge.close()


async def test_the_session_wire_over_http_does_not_answer_a_cancelled_request():
    started = asyncio.Event()
    app = make_app(started)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        init = await http.post("/mcp", headers=headers, json=INIT)
        headers = {**headers, "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await http.post("/mcp", headers=headers, json=INITED)
        pending = asyncio.ensure_future(http.post("/mcp", headers=headers, json=call(41, "polite")))
        await asyncio.wait_for(started.wait(), WAIT)
        assert (await http.post("/mcp", headers=headers, content=cancel(41))).status_code == 202
        answer = await asyncio.wait_for(pending, WAIT)
    assert answer.status_code == 200
    assert '"id":41' not in answer.text.replace(" ", "") and "cancelled-seen" not in answer.text


async def test_the_2026_wire_sends_nothing_to_a_client_that_hung_up_on_a_handler_that_returned(monkeypatch):
    """Closing the connection is the 2026-07-28 cancel: a handler that swallows it and returns is not answered."""
    monkeypatch.setattr(modern, "HANGUP_WATCH_AFTER", 0)  # watch the connection from the start
    started, hang_up = asyncio.Event(), asyncio.Event()
    app = make_app(started)
    body = json.dumps(call(41, "polite", meta=META)).encode()
    headers = {**MODERN_HEADERS, "accept": "application/json", "mcp-method": "tools/call", "mcp-name": "t",
               "content-length": str(len(body)), "host": "127.0.0.1"}
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 80), "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
    sent: list[dict[str, Any]] = []
    read = False

    async def receive() -> dict[str, Any]:
        nonlocal read
        if not read:
            read = True
            return {"type": "http.request", "body": body, "more_body": False}
        await hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    running = asyncio.ensure_future(app(scope, receive, send))
    await asyncio.wait_for(started.wait(), WAIT)
    hang_up.set()
    await asyncio.wait_for(running, WAIT)
    assert sent[0]["status"] == modern.CLIENT_CLOSED
    assert b"cancelled-seen" not in b"".join(m.get("body", b"") for m in sent[1:])


# -- 2. a JSON-RPC response posted to the 2026-07-28 wire ---------------------------------------------------

@pytest.mark.parametrize("response", [
    {"jsonrpc": "2.0", "id": 77, "result": {}},
    {"jsonrpc": "2.0", "id": 77, "error": {"code": -32603, "message": "x"}},
    {"jsonrpc": "2.0", "result": {}},
], ids=["result", "error", "no id"])
async def test_the_2026_wire_takes_a_response_as_the_session_wire_does(response):
    app = make_app(asyncio.Event())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        answer = await http.post("/mcp", headers=MODERN_HEADERS, json=response)
        assert (answer.status_code, answer.content) == (202, b"")
        # (a request still gets its answer)
        listed = await http.post("/mcp", headers={**MODERN_HEADERS, "mcp-method": "tools/list"},
                                 json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})
        assert listed.status_code == 200 and listed.json()["result"]["tools"]


# -- 3. stdio without a session: the 2026-07-28 wire's answers ----------------------------------------------

@pytest.mark.parametrize("params", [None, {"_meta": 5}, {"_meta": None}], ids=["params null", "_meta 5", "_meta null"])
async def test_stdio_without_a_session_answers_a_bad_envelope_as_the_2026_wire(params):
    bridge, lines = await started_bridge(make_app(asyncio.Event()))
    try:
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": params}))
        [answer] = lines.with_id(4)
        assert answer["error"]["code"] == -32602 and answer["error"]["message"].startswith(ENVELOPE)
        assert "header" not in answer["error"]["message"].lower()
    finally:
        await bridge.close()


async def test_stdio_without_a_session_answers_no_notification_or_response_and_names_no_header(caplog):
    bridge, lines = await started_bridge(make_app(asyncio.Event()))
    try:
        with caplog.at_level(logging.DEBUG, logger="mcpfusion"):
            for message in [{"jsonrpc": "2.0", "result": {}},  # a response without id
                            {"jsonrpc": "2.0", "id": 77, "result": {}},
                            {"jsonrpc": "2.0", "id": 78, "error": {"code": -32603, "message": "x"}},
                            {"jsonrpc": "2.0", "method": "notifications/progress", "params": None},
                            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"_meta": 5}}]:
                await bridge.handle_line(json.dumps(message))
            await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        assert lines.items == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
        assert "mcp-session-id" not in caplog.text.lower()
    finally:
        await bridge.close()


async def test_stdio_without_a_session_still_asks_for_initialize_when_nothing_says_2026():
    bridge, lines = await started_bridge(make_app(asyncio.Event()))
    try:
        await bridge.handle_line(json.dumps(call(2, "quick")))
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": None}))
        assert "send initialize first" in lines.with_id(2)[0]["error"]["message"]
        assert not lines.with_id(3)[0]["error"]["message"].startswith(ENVELOPE)  # (the session wire's own answer)
        # With a session, params null is the session wire's (as over HTTP).
        await bridge.handle_line(json.dumps(INIT))
        await bridge.handle_line(json.dumps(INITED))
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": None}))
        assert lines.with_id(5)[0]["result"]["tools"]
    finally:
        await bridge.close()


async def test_stdio_frees_an_answered_2026_id_while_its_stream_still_closes():
    release = asyncio.Event()
    inner = make_app(asyncio.Event())
    first: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not first:
            first.append(scope)
        await inner(scope, receive, send)
        if first and scope is first[0]:  # the first request's stream: still closing, after its answer
            await release.wait()

    bridge, lines = await started_bridge(app)
    try:
        bridge.submit(json.dumps(call(5, "stepped", meta={**META, "progressToken": "p"})))
        assert await lines.reply(5) == "stepped"
        await bridge.handle_line(json.dumps(call(5, "quick", meta=META)))  # the id, used again once answered
        assert [m["result"]["content"][0]["text"] for m in lines.with_id(5)] == ["stepped", "quick"]
        release.set()
        await asyncio.wait_for(asyncio.gather(*bridge.tasks), WAIT)
    finally:
        release.set()
        await bridge.close()
