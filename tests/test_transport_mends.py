"""Transport fixes found by black-box testing: one GET stream per session (409 for a second, in one process
and across Redis replicas), stdio answering an invalid id with null, Accept negotiation with q-values, and
JSON bodies with NaN/Infinity (not JSON) or integers too long to read."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from mcpfusion.mcp.stdio import StdioBridge
from tests.mcp_app import build_fusion, serve
from tests.redis_helpers import replicas, running_redis

VERSION = "2025-11-25"
BOTH = "application/json, text/event-stream"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
               "io.modelcontextprotocol/clientCapabilities": {}}
BIG = "9" * 5000


@pytest.fixture(scope="module")
def fusion_and_base():
    fusion = build_fusion()
    with serve(fusion.build_app()) as url:
        yield fusion, url


@pytest.fixture
async def client(fusion_and_base):
    async with httpx.AsyncClient(base_url=fusion_and_base[1], timeout=10) as c:
        yield c


async def initialize(client: httpx.AsyncClient, url: str = "/mcp") -> dict[str, str]:
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": VERSION, "capabilities": {"elicitation": {}},
                       "clientInfo": {"name": "t", "version": "1"}}}
    r = await client.post(url, json=body, headers={"accept": "application/json"})
    headers = {"accept": BOTH, "content-type": "application/json", "mcp-session-id": r.headers["mcp-session-id"],
               "mcp-protocol-version": VERSION}
    assert (await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                              headers=headers)).status_code == 202
    return headers


async def data_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """`{"id", "data"}` of each SSE event (data parsed; None for a priming event)."""
    event: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field in ("id", "data"):
            event[field] = json.loads(value) if field == "data" and value else (value or None)


async def get_until_open(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> int:
    """The status of a plain GET (closed at once), retried while it is 409: the server notices a closed
    stream a moment after its client closed it."""
    for _ in range(50):
        async with client.stream("GET", url, headers=headers) as r:
            if r.status_code != 409:
                return r.status_code
        await asyncio.sleep(0.1)
    return 409


# -- 1. one GET stream per session --------------------------------------------------------------------


async def test_second_get_stream_is_409_and_a_get_after_the_first_closed_works(client, fusion_and_base):
    fusion = fusion_and_base[0]
    headers = {**await initialize(client), "accept": "text/event-stream"}
    async with client.stream("GET", "/mcp", headers=headers) as first:
        assert first.status_code == 200
        events = data_events(first)
        await anext(events)  # priming: subscribed
        second = await client.get("/mcp", headers=headers)
        assert second.status_code == 409
        assert "already has a GET stream" in second.json()["error"]["message"]
        # A server request in JSON mode goes out on the one stream only.
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "billing_confirm_delete", "arguments": {"id": "inv_1"}}}
        pending = asyncio.create_task(client.post("/mcp", json=call, headers={**headers, "accept": "application/json"}))
        asked = (await anext(events))["data"]
        assert asked["method"] == "elicitation/create"
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"ok": True}}}
        assert (await client.post("/mcp", json=answer, headers=headers)).status_code == 202
        assert (await pending).json()["result"]["content"][0]["text"] == "deleted"
        await fusion.notify_tools_changed()
        assert (await anext(events))["data"]["method"] == "notifications/tools/list_changed"
    assert await get_until_open(client, "/mcp", headers) == 200


async def test_get_resumed_with_last_event_id_takes_over_the_open_stream(client, fusion_and_base):
    fusion = fusion_and_base[0]
    headers = {**await initialize(client), "accept": "text/event-stream"}
    async with client.stream("GET", "/mcp", headers=headers) as first:
        old = data_events(first)
        priming = await anext(old)
        async with client.stream("GET", "/mcp", headers={**headers, "last-event-id": priming["id"]}) as resumed:
            assert resumed.status_code == 200
            new = data_events(resumed)
            await anext(new)  # its own priming event: the old stream has been told to end
            rest = await asyncio.wait_for(_drain(old), 5)  # the old stream ends, never hangs
            assert not any(e.get("data") for e in rest)
            await fusion.notify_tools_changed()
            assert (await anext(new))["data"]["method"] == "notifications/tools/list_changed"
        # A plain GET while the resumed one is open is still refused.
    assert await get_until_open(client, "/mcp", headers) == 200


async def _drain(events: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event async for event in events]


async def test_second_get_stream_on_another_redis_replica_is_409():
    with running_redis() as redis, replicas(redis.url, names="AB") as cluster:
        a, b = cluster["A"].url, cluster["B"].url
        async with httpx.AsyncClient(timeout=10) as http:
            headers = {**await initialize(http, a), "accept": "text/event-stream"}
            async with http.stream("GET", a, headers=headers) as first:
                assert first.status_code == 200
                events = data_events(first)  # (kept: a generator collected would close the stream)
                priming = await anext(events)
                refused = await http.get(b, headers=headers)
                assert refused.status_code == 409
                # Resuming it on B takes over (the client lost A's stream) instead of being refused.
                async with http.stream("GET", b, headers={**headers, "last-event-id": priming["id"]}) as resumed:
                    assert resumed.status_code == 200
            assert await get_until_open(http, b, headers) == 200


# -- 2. stdio: an id that is no JSON-RPC id is answered with null ---------------------------------------


async def test_stdio_answers_an_invalid_id_with_null():
    from mcp import types

    lines: list[str] = []
    bridge = StdioBridge(build_fusion().build_app(), lines.append, headers={})
    await bridge.startup()
    try:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        await bridge.handle_line(json.dumps(init))
        for bad in ("1.5", "true", '{"a":1}', "[1]"):
            lines.clear()
            await bridge.handle_line('{"jsonrpc":"2.0","id":' + bad + ',"method":"ping"}')
            (line,) = lines
            reply = json.loads(line)
            assert reply["id"] is None and reply["error"]["code"] == -32600, bad
            TypeAdapter(types.JSONRPCMessage).validate_json(line)  # a valid JSON-RPC message
        lines.clear()
        # A "response" whose id is an object is no answer to anything: no crash, no reply.
        await bridge.handle_line('{"jsonrpc":"2.0","id":{"a":1},"result":{}}')
        assert lines == []
    finally:
        await bridge.close()


# -- 3. Accept with q-values ----------------------------------------------------------------------------


@pytest.mark.parametrize(("accept", "status", "media"), [
    (BOTH, 200, "text/event-stream"),  # both acceptable: the session wire's choice, SSE, is kept
    ("*/*", 200, "text/event-stream"),
    ("text/event-stream", 200, "text/event-stream"),
    ("text/*", 200, "text/event-stream"),
    ("application/*", 200, "application/json"),
    ("application/JSON", 200, "application/json"),
    ("text/event-stream;q=0, application/json", 200, "application/json"),
    ("application/json;q=0, text/event-stream", 200, "text/event-stream"),
    ("*/*;q=0, application/json", 200, "application/json"),
    ("application/json;q=0", 406, None),
    ("application/json-seq", 406, None),
    ("text/html", 406, None),
])
async def test_session_wire_answers_only_what_the_client_accepts(client, accept, status, media):
    headers = await initialize(client)
    r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          headers={**headers, "accept": accept})
    assert r.status_code == status, r.text
    if media is not None:
        assert r.headers["content-type"].startswith(media)
        assert r.text.count('"id":1') == 1
    else:
        assert "Not Acceptable" in r.json()["error"]["message"]


@pytest.mark.parametrize(("accept", "status", "media"), [
    (BOTH, 200, "application/json"),  # both acceptable: the 2026 wire's choice, JSON, is kept
    ("*/*", 200, "application/json"),
    ("text/event-stream", 200, "text/event-stream"),
    ("text/*", 200, "text/event-stream"),
    ("application/json;q=0, text/event-stream", 200, "text/event-stream"),
    ("text/event-stream;q=0, application/json", 200, "application/json"),
    ("application/json;q=0", 406, None),
    ("application/json-seq", 406, None),
])
async def test_modern_wire_answers_only_what_the_client_accepts(client, accept, status, media):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}}
    r = await client.post("/mcp", json=body, headers={"accept": accept, "mcp-protocol-version": "2026-07-28",
                                                      "mcp-method": "tools/list"})
    assert r.status_code == status, r.text
    if media is None:
        assert "Not Acceptable" in r.json()["error"]["message"]
        return
    assert r.headers["content-type"].startswith(media)
    if media == "text/event-stream":
        (data,) = [line[5:] for line in r.text.splitlines() if line.startswith("data:")]
        assert "billing_get_invoice" in {t["name"] for t in json.loads(data)["result"]["tools"]}


async def test_get_stream_accept_reads_q_values(client):
    headers = await initialize(client)
    assert (await client.get("/mcp", headers={**headers, "accept": "text/event-stream;q=0"})).status_code == 406
    assert await get_until_open(client, "/mcp", {**headers, "accept": "text/*"}) == 200


async def test_json_response_server_answers_sse_to_a_client_reading_only_sse():
    with serve(build_fusion(json_response=True).build_app()) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            headers = await initialize(http)
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            both = await http.post("/mcp", json=ping, headers=headers)
            assert both.headers["content-type"] == "application/json"
            only_sse = await http.post("/mcp", json=ping, headers={**headers, "accept": "text/event-stream"})
            assert only_sse.headers["content-type"].startswith("text/event-stream") and '"id":1' in only_sse.text


# -- 4. NaN / Infinity are not JSON; a valid integer too long to read says so -------------------------------


def _call(arguments: str) -> str:
    return ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"billing_get_invoice","arguments":'
            + arguments + "}}")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
async def test_nan_and_infinity_are_parse_errors(client, token):
    headers = await initialize(client)
    r = await client.post("/mcp", content=_call('{"id":' + token + "}"), headers=headers)
    assert r.status_code == 400
    assert r.json() == {"jsonrpc": "2.0", "id": None,
                        "error": {"code": -32700, "message": "Parse error: the body is not valid JSON"}}
    rest = await client.post("/api/billing/get_invoice", content='{"id":' + token + "}",
                             headers={"content-type": "application/json"})
    assert rest.status_code == 422 and "not valid JSON" in rest.text


async def test_an_integer_too_long_to_read_is_named_as_such(client):
    headers = await initialize(client)
    r = await client.post("/mcp", content=_call('{"id":' + BIG + "}"), headers=headers)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == -32700 and "number too large" in error["message"] and "not valid JSON" not in \
        error["message"]
    rest = await client.post("/api/billing/get_invoice", content='{"id":' + BIG + "}",
                             headers={"content-type": "application/json"})
    assert rest.status_code == 422 and "number too large" in rest.text
    # A long integer the parser reads is still read (and refused by validation, as an id is a string).
    ok = await client.post("/mcp", content=_call('{"id":' + "9" * 4000 + "}"),
                           headers={**headers, "accept": "application/json"})
    assert ok.status_code == 200 and ok.json()["result"]["isError"] is True


async def test_stdio_names_a_number_too_large_and_refuses_nan():
    lines: list[str] = []
    bridge = StdioBridge(build_fusion().build_app(), lines.append, headers={})
    await bridge.startup()
    try:
        await bridge.handle_line('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + BIG + "}}")
        await bridge.handle_line('{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":NaN}}')
    finally:
        await bridge.close()
    big, nan = (json.loads(line)["error"] for line in lines)
    assert big["code"] == nan["code"] == -32700
    assert "the line holds a number too large" in big["message"]
    assert nan["message"] == "Parse error: the line is not valid JSON"


def test_a_missing_mcp_method_header_is_named_missing():
    """2026-07-28: a request without Mcp-Method was told the header "does not match" the body's method."""
    from fastapi.testclient import TestClient

    from mcpfusion import MCPFusion

    client = TestClient(MCPFusion("m").build_app())
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28"}
    missing = client.post("/mcp", json=body, headers=headers)
    assert missing.status_code == 400 and missing.json()["error"]["code"] == -32020
    assert missing.json()["error"]["message"].startswith("The Mcp-Method header is missing: send Mcp-Method: tools/list")
    wrong = client.post("/mcp", json=body, headers={**headers, "mcp-method": "tools/call"})
    assert "does not match" in wrong.json()["error"]["message"]
