"""Malformed and hostile input gets the right JSON-RPC error and HTTP status; the server keeps serving."""

from __future__ import annotations

import httpx
import pytest

from tests.mcp_app import build_fusion, serve

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def modern_headers(method: str, name: str | None = None, version: str = "2026-07-28") -> dict[str, str]:
    headers = {**ACCEPT, "mcp-protocol-version": version, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


@pytest.fixture(scope="module")
def base():
    with serve(build_fusion(json_response=True).build_app()) as url:
        yield url


@pytest.fixture
async def client(base):
    async with httpx.AsyncClient(base_url=base, timeout=10) as c:
        yield c


async def initialize(client: httpx.AsyncClient) -> dict[str, str]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    r = await client.post("/mcp", json=body, headers=ACCEPT)
    assert r.status_code == 200
    return {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}


async def assert_alive(client: httpx.AsyncClient) -> None:
    body = {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": "billing_whoami", "arguments": {}, "_meta": META}}
    r = await client.post("/mcp", json=body, headers=modern_headers("tools/call", "billing_whoami"))
    assert r.status_code == 200
    assert r.json()["result"]["content"][0]["text"] == "tenant=acme"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b"", -32700),
        (b"\xff\xfe\x00garbage", -32700),
        (b"[" * 100_000 + b"]" * 100_000, -32700),
        (b"1" * 5000, -32700),
        (b'"just a string"', -32600),
        (b"[]", -32600),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600),
        (b'{"id":1,"method":"ping"}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":42}', -32600),
        (b'{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', -32600),
    ],
)
async def test_malformed_bodies(client, body, code):
    headers = await initialize(client)
    r = await client.post("/mcp", content=body, headers=headers)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == code
    await assert_alive(client)


async def test_protocol_errors_on_the_session_wire(client):
    headers = await initialize(client)

    async def rpc(method: str, params: dict | None = None) -> dict:
        body = {"jsonrpc": "2.0", "id": 7, "method": method, **({"params": params} if params is not None else {})}
        r = await client.post("/mcp", json=body, headers=headers)
        assert r.status_code == 200
        return r.json()

    assert (await rpc("nope/nope"))["error"]["code"] == -32601
    assert (await rpc("tools/call", {"arguments": {}}))["error"]["code"] == -32602
    unknown = await rpc("tools/call", {"name": "ghost"})
    assert unknown["error"]["code"] == -32602 and "Available tools:" in unknown["error"]["message"]
    assert (await rpc("tools/call", {"name": "billing_whoami", "arguments": [1]}))["error"]["code"] == -32602
    assert (await rpc("logging/setLevel", {"level": "loud"}))["error"]["code"] == -32602
    assert (await rpc("resources/read", {"uri": "file:///nope"}))["error"]["data"] == {"uri": "file:///nope"}
    assert (await rpc("prompts/get", {"name": "ghost"}))["error"]["code"] == -32602
    assert (await rpc("ping")) == {"jsonrpc": "2.0", "id": 7, "result": {}}
    await assert_alive(client)


async def test_session_errors(client):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    r = await client.post("/mcp", json=ping, headers=ACCEPT)
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600
    r = await client.post("/mcp", json=ping, headers={**ACCEPT, "mcp-session-id": "made-up"})
    assert r.status_code == 404
    headers = await initialize(client)
    assert all(0x21 <= ord(ch) <= 0x7E for ch in headers["mcp-session-id"])
    assert (await client.post("/mcp", json=ping, headers=headers)).status_code == 200
    assert (await client.delete("/mcp", headers=headers)).status_code == 200
    assert (await client.post("/mcp", json=ping, headers=headers)).status_code == 404
    assert (await client.delete("/mcp", headers=headers)).status_code == 404
    r = await client.get("/mcp", headers={"accept": "application/json", "mcp-session-id": "x"})
    assert r.status_code == 406
    await assert_alive(client)


async def test_wrong_content_type_and_accept(client):
    headers = await initialize(client)
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    r = await client.post("/mcp", content=ping, headers={**headers, "content-type": "text/plain"})
    assert r.status_code == 415
    r = await client.post("/mcp", content=ping, headers={**modern_headers("ping"), "accept": "text/html"})
    assert r.status_code == 406 and r.json()["id"] == 1  # the request was read: the refusal names it
    await assert_alive(client)


async def test_body_limit(client):
    headers = await initialize(client)
    huge = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (5 * 1024 * 1024) + b'"}}'
    r = await client.post("/mcp", content=huge, headers=headers)
    assert r.status_code == 413

    async def chunks():
        for _ in range(6):
            yield b"x" * (1024 * 1024)

    r = await client.post("/mcp", content=chunks(), headers=headers)  # no Content-Length: counted while read
    assert r.status_code == 413
    await assert_alive(client)


async def test_dns_rebinding_protection(client, base):
    port = base.rsplit(":", 1)[1]
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    evil = {**modern_headers("server/discover"), "host": "evil.example.com", "origin": "http://evil.example.com"}
    assert (await client.post("/mcp", json=body, headers=evil)).status_code == 421
    foreign_origin = {**modern_headers("server/discover"), "origin": "http://evil.example.com"}
    assert (await client.post("/mcp", json=body, headers=foreign_origin)).status_code == 403
    good = {**modern_headers("server/discover"), "host": f"127.0.0.1:{port}", "origin": f"http://127.0.0.1:{port}"}
    assert (await client.post("/mcp", json=body, headers=good)).status_code == 200
    assert (await client.get("/mcp", headers={"host": "evil.example.com"})).status_code == 421


async def test_modern_header_and_envelope_errors(client):
    call = {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "billing_whoami", "_meta": META}}

    async def post(body: dict, headers: dict[str, str]) -> tuple[int, dict]:
        r = await client.post("/mcp", json=body, headers=headers)
        return r.status_code, r.json()

    status, reply = await post(call, modern_headers("tools/call", "billing_whoami"))
    assert status == 200 and reply["result"]["resultType"] == "complete"
    for headers, code in [
        (modern_headers("tools/list", "billing_whoami"), -32020),
        (modern_headers("tools/call", "other"), -32020),
        (modern_headers("tools/call"), -32020),
        (modern_headers("TOOLS/CALL", "billing_whoami"), -32020),
        (modern_headers("tools/call", "billing_whoami", version="2099-01-01"), -32020),
    ]:
        status, reply = await post(call, headers)
        assert (status, reply["error"]["code"], reply["id"]) == (400, code, "a")
    future = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    status, reply = await post({**call, "params": {"name": "billing_whoami", "_meta": future}},
                               modern_headers("tools/call", "billing_whoami", version="2099-01-01"))
    assert (status, reply["error"]["code"]) == (400, -32022)
    assert reply["error"]["data"] == {"supported": ["2025-06-18", "2025-11-25", "2026-07-28"],
                                      "requested": "2099-01-01"}
    no_meta = {**call, "params": {"name": "billing_whoami"}}
    status, reply = await post(no_meta, modern_headers("tools/call", "billing_whoami"))
    assert (status, reply["error"]["code"]) == (400, -32602)
    for method in ("initialize", "ping", "logging/setLevel", "resources/subscribe", "made/up"):
        status, reply = await post({"jsonrpc": "2.0", "id": 3, "method": method, "params": {"_meta": META}},
                                   modern_headers(method))
        assert (status, reply["error"]["code"]) == (404, -32601)
    await assert_alive(client)


async def test_tampered_and_invalid_input_responses(client):
    headers = modern_headers("tools/call", "billing_confirm_delete")
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    params = {"name": "billing_confirm_delete", "arguments": {"id": "inv_1"}, "_meta": meta}
    first = (await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params},
                               headers=headers)).json()["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["confirm"]["method"] == "elicitation/create"
    state = first["requestState"]
    answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
    ok = {**params, "inputResponses": answer, "requestState": state}
    done = (await client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": ok},
                              headers=headers)).json()["result"]
    assert done["content"][0]["text"] == "deleted"
    for bad in ({**ok, "requestState": state + "-TAMPERED"}, {**ok, "inputResponses": {"confirm": 12345}},
                {**ok, "inputResponses": "nope"}):
        r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": bad},
                              headers=headers)
        assert (r.status_code, r.json()["error"]["code"]) == (400, -32602)
    # A state minted for one tool is refused by another.
    other = {**ok, "name": "billing_summarize", "arguments": {"text": "x"}}
    r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": other},
                          headers=modern_headers("tools/call", "billing_summarize"))
    assert r.status_code == 400
    await assert_alive(client)


WEIRD_PARAMS = [
    None, {}, {"name": 1}, {"name": "billing_whoami", "arguments": "x"}, {"uri": []}, {"uri": "file:///readme.txt"},
    {"name": "reminder", "arguments": {"invoice_id": 5}}, {"name": "reminder", "arguments": []},
    {"ref": 1, "argument": 1}, {"ref": {"type": "ref/prompt", "name": "reminder"}, "argument": {"name": "tone"},
                                "context": []},
    {"ref": {"type": "ref/resource", "uri": "invoices://{id}/summary"}, "argument": {"name": "id", "value": 1}},
    {"level": None}, {"cursor": 5}, {"notifications": "all"}, {"inputResponses": [], "requestState": 7},
]
METHODS = ["ping", "tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read",
           "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete",
           "logging/setLevel", "server/discover", "subscriptions/listen", "initialize"]


async def test_no_params_shape_gets_a_5xx_or_a_non_json_answer(client):
    session = await initialize(client)
    for method in METHODS:
        for params in WEIRD_PARAMS:
            body = {"jsonrpc": "2.0", "id": 1, "method": method}
            if params is not None:
                body["params"] = params
            r = await client.post("/mcp", json=body, headers={**session, "accept": "application/json"})
            assert r.status_code < 500, (method, params, r.text)
            assert "result" in r.json() or "error" in r.json()
            if method == "subscriptions/listen":
                continue  # its success is an endless stream; the shapes above are all rejected before that
            modern = {**(params or {}), "_meta": META} if isinstance(params, dict) or params is None else params
            r = await client.post("/mcp", json={**body, "params": modern}, headers={
                **modern_headers(method), "accept": "application/json",
                **({"mcp-name": str(modern.get("name") or modern.get("uri"))} if isinstance(modern, dict) else {})})
            assert r.status_code < 500, (method, params, r.text)
            assert "result" in r.json() or "error" in r.json()
    await assert_alive(client)
