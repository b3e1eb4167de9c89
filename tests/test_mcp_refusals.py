"""Refusals at the edges of the MCP endpoint and REST: repeated routing headers, cursors a listing never
issued, methods the endpoint does not serve, bodies that are not JSON."""

from __future__ import annotations

from typing import Literal

import httpx
import pytest

from mcpfusion import Tool
from mcpfusion.app import MCPFusion

ACCEPT = "application/json, text/event-stream"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}


def app():
    notes = Tool("notes", description="Notes")

    @notes.action(destructive=False)
    async def add(text: str) -> dict:
        """Add a note"""
        return {"text": text}

    fusion = MCPFusion("notes", tools=[notes], json_response=True)
    fusion.prompt("greet", description="Greet")(lambda: "hello")
    fusion.resource("note://readme", name="readme")(lambda: "read me")
    return fusion.build_app()


def client(served) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=served), base_url="http://127.0.0.1")


async def session(http) -> dict[str, str]:
    init = await http.post("/mcp", headers={"accept": ACCEPT}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    return {"accept": ACCEPT, "mcp-session-id": init.headers["mcp-session-id"]}


@pytest.mark.parametrize("versions", [["bogus", "2025-11-25"], ["2026-07-28", "2025-11-25"],
                                      ["2025-11-25", "2025-11-25"]])
async def test_a_repeated_protocol_version_header_is_a_400_on_the_session_wire(versions):
    async with client(app()) as http:
        headers = list((await session(http)).items()) + [("mcp-protocol-version", v) for v in versions]
        listed = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        stream = await http.get("/mcp", headers=headers)
    assert listed.status_code == stream.status_code == 400
    assert "once each" in listed.json()["error"]["message"]


async def test_a_repeated_session_id_is_a_400():
    async with client(app()) as http:
        one = await session(http)
        headers = [("accept", ACCEPT), ("mcp-protocol-version", "2025-11-25"),
                   ("mcp-session-id", one["mcp-session-id"]), ("mcp-session-id", "other")]
        listed = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert listed.status_code == 400


@pytest.mark.parametrize("method", ["tools/list", "prompts/list", "resources/list", "resources/templates/list"])
async def test_a_cursor_no_listing_issued_is_invalid_params_on_both_wires(method):
    async with client(app()) as http:
        headers = {**await session(http), "mcp-protocol-version": "2025-11-25"}
        legacy = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                                "params": {"cursor": "bogus"}})
        modern = await http.post("/mcp", headers={"accept": ACCEPT, "mcp-protocol-version": "2026-07-28",
                                                  "mcp-method": method},
                                 json={"jsonrpc": "2.0", "id": 1, "method": method,
                                       "params": {"cursor": "bogus", "_meta": META}})
        first = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                               "params": {"cursor": None}})
    assert legacy.json()["error"]["code"] == modern.json()["error"]["code"] == -32602
    assert "Invalid cursor" in legacy.json()["error"]["message"]
    assert "result" in first.json()  # null is no cursor: the first page


@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS"])
async def test_other_methods_get_the_endpoints_405_naming_all_it_serves(method):
    async with client(app()) as http:
        refused = await http.request(method, "/mcp", json={})
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET, POST, DELETE"
    assert refused.json()["error"]["code"] == -32600 and method in refused.json()["error"]["message"]


@pytest.mark.parametrize("version", [None, "2025-11-25", "2026-07-28"])
async def test_head_is_a_405_naming_all_the_endpoint_serves(version):
    headers = {} if version is None else {"mcp-protocol-version": version}
    async with client(app()) as http:
        refused = await http.head("/mcp", headers=headers)
    assert (refused.status_code, refused.headers["allow"]) == (405, "GET, POST, DELETE")


@pytest.mark.parametrize(("content_type", "status"), [
    ("text/plain", 415), ("application/x-www-form-urlencoded", 415), ("application/json", 200),
    ("application/json; charset=utf-8", 200), ("application/merge-patch+json", 200), (None, 200)])
async def test_rest_reads_json_bodies_only(content_type, status):
    headers = {} if content_type is None else {"content-type": content_type}
    async with client(app()) as http:
        answer = await http.post("/api/notes/add", content=b'{"text": "hi"}', headers=headers)
    assert answer.status_code == status, answer.text
    if status == 415:
        assert answer.headers["content-type"] == "application/problem+json"


async def test_deep_nesting_is_told_apart_from_bad_json():
    deep = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": ' + b"[" * 300 + b"]" * 300 + b"}}"
    async with client(app()) as http:
        nested = await http.post("/mcp", content=deep, headers={"content-type": "application/json", "accept": ACCEPT})
        broken = await http.post("/mcp", content=b"{nope", headers={"content-type": "application/json",
                                                                   "accept": ACCEPT})
        rest = await http.post("/api/notes/add", content=b'{"text": ' + b"[" * 300 + b"]" * 300 + b"}")
    assert nested.status_code == broken.status_code == 400
    assert nested.json()["error"]["code"] == broken.json()["error"]["code"] == -32700
    assert "nests deeper" in nested.json()["error"]["message"]
    assert broken.json()["error"]["message"] == "Parse error: the body is not valid JSON"
    assert rest.status_code == 422 and "nests deeper" in rest.text


async def test_an_unknown_resource_is_the_same_error_to_read_and_to_subscribe_and_a_long_uri_is_not_echoed():
    async with client(app()) as http:
        headers = {**await session(http), "mcp-protocol-version": "2025-11-25"}

        async def rpc(method, uri):
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"uri": uri}}
            return (await http.post("/mcp", headers=headers, json=body)).json()

        read, subscribe = await rpc("resources/read", "note://nope"), await rpc("resources/subscribe", "note://nope")
        long_read = await rpc("resources/read", "note://" + "x" * 1_000_000)
        good = await rpc("resources/read", "note://readme")
    assert read["error"]["code"] == subscribe["error"]["code"] == -32002  # resource not found, as 2025-11-25 says
    assert read["error"]["data"] == subscribe["error"]["data"] == {"uri": "note://nope"}
    assert long_read["error"]["code"] == -32602 and len(str(long_read)) < 500
    assert good["result"]["contents"][0]["text"] == "read me"


async def test_the_session_wire_refuses_a_request_whose_answer_the_client_cannot_read():
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with client(app()) as http:
        refused_init = await http.post("/mcp", headers={"accept": "text/html"}, json=init)
        headers = {**await session(http), "mcp-protocol-version": "2025-11-25"}
        refused = await http.post("/mcp", headers={**headers, "accept": "text/html"},
                                  json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        noted = await http.post("/mcp", headers={**headers, "accept": "text/html"},
                                json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        no_accept = await http.post("/mcp", headers={k: v for k, v in headers.items() if k != "accept"},
                                    json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert refused_init.status_code == refused.status_code == 406
    assert refused.json()["error"]["code"] == -32600
    assert (refused_init.json()["id"], refused.json()["id"]) == (0, 1)  # the request was read: its id is known
    assert noted.status_code == 202 and no_accept.status_code == 200  # nothing to read; no header: anything


async def test_a_2026_notification_without_the_version_header_is_told_so():
    async with client(app()) as http:
        refused = await http.post("/mcp", headers={"accept": "application/json"}, json={
            "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": META}})
        accepted = await http.post("/mcp", headers={"accept": "application/json", "mcp-protocol-version": "2026-07-28",
                                                    "mcp-method": "notifications/cancelled"},
                                   json={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": META}})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32020
    assert "header is missing" in refused.json()["error"]["message"]
    assert accepted.status_code == 202


async def test_completions_are_not_served_by_a_server_without_any():
    async with client(app()) as http:
        headers = {**await session(http), "mcp-protocol-version": "2025-11-25"}
        asked = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "completion/complete",
                                                               "params": {"ref": {"type": "ref/prompt", "name": "greet"},
                                                                          "argument": {"name": "a", "value": ""}}})
        init = await http.post("/mcp", headers={"accept": ACCEPT}, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert "completions" not in init.json()["result"]["capabilities"]
    assert asked.json()["error"]["code"] == -32601


@pytest.mark.parametrize(("headers", "status"), [({"host": "evil.example"}, 421), ({"origin": "http://evil.example"}, 403),
                                                 ({"origin": "http://localhost:3000"}, 200), ({}, 200)])
async def test_rest_refuses_a_foreign_host_or_origin_as_mcp_does(headers, status):
    async with client(app()) as http:
        answer = await http.post("/api/notes/add", json={"text": "hi"}, headers=headers)
        mcp = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                              headers={"accept": ACCEPT, **headers})
    assert answer.status_code == status, answer.text
    if status != 200:
        assert answer.headers["content-type"] == "application/problem+json" and mcp.status_code == status


@pytest.mark.parametrize("encoding", ["gzip", "br", "deflate"])
async def test_a_compressed_body_is_refused_not_misread(encoding):
    async with client(app()) as http:
        rest = await http.post("/api/notes/add", content=b'{"text": "hi"}',
                               headers={"content-type": "application/json", "content-encoding": encoding})
        mcp = await http.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                              headers={"content-type": "application/json", "content-encoding": encoding,
                                       "accept": ACCEPT})
        plain = await http.post("/api/notes/add", json={"text": "hi"}, headers={"content-encoding": "identity"})
    assert rest.status_code == mcp.status_code == 415 and plain.status_code == 200
    assert "uncompressed" in rest.text and "uncompressed" in mcp.json()["error"]["message"]


async def test_prompt_arguments_and_uri_variables_are_read_as_their_declared_types():
    fusion = MCPFusion("typed", tools=[Tool("none", description="x")], json_response=True)

    @fusion.prompt()
    def count(n: int, mode: Literal["a", "b"] = "a") -> str:
        """Count"""
        return f"{n + 1} {mode}"

    @fusion.resource_template("numbers://{n}")
    def number(n: int) -> dict:
        """A number"""
        return {"n": n, "next": n + 1}

    async with client(fusion.build_app()) as http:
        headers = {**await session(http), "mcp-protocol-version": "2025-11-25"}

        async def rpc(method, params):
            return (await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                                    "params": params})).json()

        good = await rpc("prompts/get", {"name": "count", "arguments": {"n": "41", "mode": "b"}})
        bad = await rpc("prompts/get", {"name": "count", "arguments": {"n": "abc", "mode": "z"}})
        read = await rpc("resources/read", {"uri": "numbers://7"})
        unread = await rpc("resources/read", {"uri": "numbers://seven"})
    assert good["result"]["messages"][0]["content"]["text"] == "42 b"
    assert bad["error"]["code"] == -32602 and "n:" in bad["error"]["message"] and "mode:" in bad["error"]["message"]
    assert '"next":8' in read["result"]["contents"][0]["text"].replace(" ", "")
    assert unread["error"]["code"] == -32602


async def test_a_resource_value_json_cannot_hold_is_an_error_not_its_repr():
    class Conn:
        def __repr__(self) -> str:
            return "Conn(password='hunter2')"

    fusion = MCPFusion("res", tools=[Tool("none", description="x")], json_response=True)
    fusion.resource("conn://1", name="conn")(lambda: {"conn": Conn()})
    async with client(fusion.build_app()) as http:
        headers = {**await session(http), "mcp-protocol-version": "2025-11-25"}
        read = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                                                              "params": {"uri": "conn://1"}})
    assert read.json()["error"]["code"] == -32603 and "hunter2" not in read.text


async def test_an_unknown_version_on_a_session_request_is_told_as_such():
    """A session client sending an unknown MCP-Protocol-Version hears that the version is unsupported, not
    the 2026 wire's demand for a _meta envelope."""
    async with client(app()) as http:
        headers = {**await session(http), "mcp-protocol-version": "2024-01-01"}
        refused = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 43, "method": "ping"})
    assert refused.status_code == 400
    assert refused.json() == {"jsonrpc": "2.0", "id": 43, "error": {
        "code": -32600, "message": "Unsupported MCP-Protocol-Version: 2024-01-01"}}
