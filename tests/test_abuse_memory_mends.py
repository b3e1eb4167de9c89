"""Input that cost the server CPU or memory out of proportion: a huge Content-Type, an initialize with huge
capabilities, huge request ids and replies kept for resumption; and `ToolResult.structured_content` read
as a client reads it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcpfusion import MCPFusion, Tool, success_structured
from mcpfusion.body import MAX_CONTENT_TYPE_LENGTH, charset_not_utf8
from mcpfusion.mcp.events import InMemoryEventStore
from mcpfusion.mcp.jsonrpc import MAX_ID_LENGTH
from mcpfusion.mcp.sessions import MAX_CLIENT_FIELD_BYTES
from mcpfusion.mcp.stdio import StdioBridge
from mcpfusion.redis import from_url
from mcpfusion.testing import ToolTester

VERSION = "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}

metrics = Tool("metrics", exposition="flat")


@metrics.action(readonly=True)
async def ratio() -> object:
    """A result whose structured content holds what JSON cannot: a NaN."""
    return success_structured({"ratio": float("nan"), "count": 2})


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def initialize(capabilities: Any = None, client_info: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {} if capabilities is None else capabilities,
        "clientInfo": {"name": "t", "version": "1"} if client_info is None else client_info}}


def padded(size: int) -> dict[str, Any]:
    """Capabilities about `size` bytes long as JSON."""
    return {"experimental": {"x": {"pad": "p" * size}}}


# -- 1. Content-Type -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/mcp", "/api/metrics/ratio"])
async def test_an_overlong_content_type_is_a_415_even_when_it_declares_utf8(path):
    # Read with email.message before, in quadratic time, and accepted: its charset is UTF-8.
    content_type = "application/json; " + "a=b; " * 10_000 + "charset=utf-8"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize()["params"]}) \
        if path == "/mcp" else "{}"
    async with client(MCPFusion("ct", tools=[metrics]).build_app()) as http:
        refused = await http.post(path, content=body, headers={"accept": "application/json",
                                                               "content-type": content_type})
        read = await http.post(path, content=body, headers={"accept": "application/json",
                                                            "content-type": "application/json; charset=utf-8"})
    assert refused.status_code == 415, refused.text
    assert read.status_code == 200, read.text


def test_content_type_parameters_are_read_in_one_bounded_pass():
    assert charset_not_utf8('application/json; charset="UTF-8"') is None
    assert charset_not_utf8("application/json; q=1; CHARSET = latin1 ") == "latin1"
    assert charset_not_utf8("application/json; charset=utf-8; charset=utf-16") == "utf-16"  # any one refuses
    assert charset_not_utf8("application/json; charset=a\x00b") == "a\x00b"  # unnameable: refused, no crash
    assert charset_not_utf8("application/json; charset=") == ""
    # Only the first MAX_CONTENT_TYPE_LENGTH characters are looked at (the header is refused anyway).
    assert charset_not_utf8("application/json; " + "a" * MAX_CONTENT_TYPE_LENGTH + "; charset=latin1") is None


# -- 2. What a session keeps of its client -------------------------------------------------------------------

@pytest.mark.parametrize("field", ["capabilities", "clientInfo"])
async def test_an_initialize_with_oversized_client_fields_keeps_no_session(field):
    fusion = MCPFusion("caps")
    big = padded(MAX_CLIENT_FIELD_BYTES)
    body = initialize(capabilities=big) if field == "capabilities" else \
        initialize(client_info={"name": "t", "version": "1", **big})
    async with client(fusion.build_app()) as http:
        r = await http.post("/mcp", json=body, headers={"accept": "application/json"})
        fits = await http.post("/mcp", json=initialize(capabilities=padded(MAX_CLIENT_FIELD_BYTES - 1000)),
                               headers={"accept": "application/json"})
    error = r.json()["error"]
    assert r.json()["id"] == 1 and error["code"] == -32602
    assert f"params.{field}" in error["message"] and str(MAX_CLIENT_FIELD_BYTES) in error["message"]
    assert "mcp-session-id" not in r.headers
    assert fits.status_code == 200 and "mcp-session-id" in fits.headers
    assert len(fusion.transport.sessions) == 1  # the one that fits


async def test_the_redis_session_store_keeps_no_oversized_session(redis_server):
    stores = from_url(redis_server.url, idle_timeout=60)
    try:
        fusion = MCPFusion("caps-redis", session_store=stores.sessions, event_store=stores.events,
                           broker=stores.broker)
        async with client(fusion.build_app()) as http:
            r = await http.post("/mcp", json=initialize(capabilities=padded(MAX_CLIENT_FIELD_BYTES)),
                                headers={"accept": "application/json"})
            assert r.json()["error"]["code"] == -32602
            assert await stores.sessions.count() == 0
            r = await http.post("/mcp", json=initialize(capabilities={"elicitation": {}}),
                                headers={"accept": "application/json"})
            kept = await stores.sessions.get(r.headers["mcp-session-id"])
            assert kept is not None and kept.client_capabilities == {"elicitation": {}}
    finally:
        await stores.aclose()


# -- 3. Request ids ------------------------------------------------------------------------------------------

async def test_an_overlong_request_id_is_an_invalid_request_on_both_wires():
    fusion = MCPFusion("ids")
    long_id, longest = "x" * (MAX_ID_LENGTH + 1), "y" * MAX_ID_LENGTH
    async with client(fusion.build_app()) as http:
        sid = (await http.post("/mcp", json=initialize(), headers={"accept": "application/json"})
               ).headers["mcp-session-id"]
        session_headers = {"accept": "application/json, text/event-stream", "mcp-session-id": sid,
                           "mcp-protocol-version": VERSION}
        modern_headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28",
                          "mcp-method": "tools/list"}
        replies = {}
        for rid in (long_id, longest):
            replies["session", rid] = await http.post("/mcp", json={"jsonrpc": "2.0", "id": rid, "method": "ping"},
                                                      headers=session_headers)
            replies["modern", rid] = await http.post("/mcp", headers=modern_headers, json={
                "jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": {"_meta": META}})
    for wire in ("session", "modern"):
        refused = replies[wire, long_id]
        assert refused.status_code == 400, (wire, refused.text)
        assert refused.json() == {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": f"'id' is too long: a string id has at most {MAX_ID_LENGTH} characters, "
                                        "an integer id fits in 64 bits"}}
        assert replies[wire, longest].status_code == 200 and longest in replies[wire, longest].text
    # Nothing of the refused request was kept for resumption.
    assert all(long_id.encode() not in data for events in fusion.transport.events._streams.values()
               for _, data in events if data is not None)


async def test_an_overlong_request_id_over_stdio_is_answered_with_a_null_id():
    lines: list[dict[str, Any]] = []
    bridge = StdioBridge(MCPFusion("ids-stdio").build_app(), lambda text: lines.append(json.loads(text)),
                         headers={})
    await bridge.startup()
    await bridge.handle_line(json.dumps(initialize()))
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": "z" * (MAX_ID_LENGTH + 1), "method": "ping"}))
    await bridge.close()
    refused = [line for line in lines if line.get("id") is None]
    assert [line["error"]["code"] for line in refused] == [-32600], lines


async def test_an_overlong_progress_token_is_invalid_params():
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
    async with client(MCPFusion("tokens").build_app()) as http:
        r = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
            "_meta": {**META, "progressToken": "t" * (MAX_ID_LENGTH + 1)}}})
    assert r.json()["error"]["code"] == -32602
    assert (f"progressToken is too long (a string of at most {MAX_ID_LENGTH} characters, or a 64-bit integer)"
            in r.json()["error"]["message"])


async def test_the_event_store_forgets_the_oldest_streams_beyond_its_byte_budget():
    store = InMemoryEventStore(max_bytes=1000)
    first = await store.store_event("s1", {"pad": "a" * 400})
    second = await store.store_event("s2", {"pad": "b" * 400})
    third = await store.store_event("s3", {"pad": "c" * 400})  # 1200 bytes: s1 goes, the newest stay
    assert [await store.replay_after(i) is not None for i in (first, second, third)] == [False, True, True]
    assert await store.replay_after("s2#0") == ("s2", [(second, {"pad": "b" * 400})])
    huge = await store.store_event("s4", {"pad": "d" * 2000})  # more than the whole budget: kept by none
    assert await store.replay_after(huge) is None
    assert store._bytes == 0 and not store._streams
    again = await store.store_event("s5", {"n": 1})  # and the store goes on as before
    assert await store.replay_after("s5#0") == ("s5", [(again, {"n": 1})])


# -- 4. ToolTester -------------------------------------------------------------------------------------------

async def test_tool_tester_structured_content_is_what_a_client_reads():
    result = await ToolTester([metrics]).call("metrics", "ratio")
    assert result.structured_content == {"ratio": None, "count": 2}  # as the wire and REST send it
    raw = result.raw.structured_content
    assert raw is not None and raw["ratio"] != raw["ratio"]  # `raw` keeps the NaN the action returned


async def test_an_integer_id_beyond_64_bits_is_refused_and_the_largest_one_answered():
    """A 4,000-digit integer id was echoed and kept; the string id's limit now has its integer counterpart."""
    huge, largest = 10**4000, 2**63 - 1
    async with client(MCPFusion("int-ids").build_app()) as http:
        headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
        refused = await http.post("/mcp", headers={**headers, "content-type": "application/json"}, content=json.dumps(
            {"jsonrpc": "2.0", "id": huge, "method": "tools/list", "params": {"_meta": META}}))
        answered = await http.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": largest, "method": "tools/list", "params": {"_meta": META}})
    assert refused.status_code == 400 and refused.json()["id"] is None
    assert refused.json()["error"]["code"] == -32600 and "64 bits" in refused.json()["error"]["message"]
    assert answered.status_code == 200 and answered.json()["id"] == largest


async def test_the_smallest_signed_64_bit_id_is_answered_and_one_below_refused():
    smallest = -(2**63)
    async with client(MCPFusion("int-ids").build_app()) as http:
        headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
        answers = [await http.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": i, "method": "tools/list", "params": {"_meta": META}}) for i in (smallest, smallest - 1)]
    assert answers[0].status_code == 200 and answers[0].json()["id"] == smallest
    assert answers[1].status_code == 400 and answers[1].json()["error"]["code"] == -32600
