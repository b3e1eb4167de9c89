"""An object holding one key twice is refused on every transport: parsers disagree on which one counts (a proxy
checking the first `name` and the server running the last would see two different calls)."""

from __future__ import annotations

import json

import httpx

from mcpfusion import Tool
from mcpfusion.app import MCPFusion
from mcpfusion.body import InvalidJSON, parse_json

META = '{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}'
MODERN = {"content-type": "application/json", "accept": "application/json", "mcp-protocol-version": "2026-07-28",
          "mcp-method": "tools/call", "mcp-name": "shop"}


def fusion() -> MCPFusion:
    shop = Tool("shop", description="Orders")

    @shop.action(readonly=True)
    async def find(id: str) -> dict:
        """Find an order"""
        return {"id": id}

    return MCPFusion("shop", tools=[shop])


def client(app: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")  # type: ignore[arg-type]


async def test_a_key_sent_twice_is_a_parse_error_naming_it_on_the_mcp_wires():
    async with client(fusion().build_app()) as http:
        twice_named = await http.post("/mcp", headers=MODERN, content=(
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "shop", "name": "other", '
            f'"arguments": {{"action": "find", "id": "o1"}}, "_meta": {META}}}}}').encode())
        nested = await http.post("/mcp", headers=MODERN, content=(
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "shop", '
            f'"arguments": {{"action": "find", "id": "o1", "id": "o2"}}, "_meta": {META}}}}}').encode())
        once = await http.post("/mcp", headers=MODERN, content=(
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "shop", '
            f'"arguments": {{"action": "find", "id": "o1"}}, "_meta": {META}}}}}').encode())
    for refused, key in ((twice_named, "name"), (nested, "id")):
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["code"] == -32700 and f'the key "{key}" twice' in error["message"]
    assert once.status_code == 200 and '"id":"o1"' in once.text.replace(" ", "").replace("\\", "")


async def test_a_key_sent_twice_in_a_rest_body_is_refused():
    async with client(fusion().build_app()) as http:
        refused = await http.post("/api/shop/find", content=b'{"id": "o1", "id": "o2"}',
                                  headers={"content-type": "application/json"})
        fine = await http.post("/api/shop/find", json={"id": "o1"})
    assert refused.status_code == 422 and 'the key \\"id\\" twice' in refused.text  # (as any body not JSON)
    assert "o2" not in refused.text and fine.status_code == 200 and fine.json() == {"id": "o1"}


def test_the_quoted_key_is_cut_and_its_unseen_characters_escaped():
    for key, shown in (("k" * 500, "k" * 64 + "..."), ("a\u202e", "a\\u{202e}")):
        body = json.dumps({"x": 1}).replace('"x"', f'"{key}": 1, "{key}"').encode()
        try:
            parse_json(body)
        except InvalidJSON as exc:
            assert f'the key "{shown}" twice' in exc.reason and len(exc.reason) < 200
        else:
            raise AssertionError("a key sent twice was read")
    # The same key in two objects is no repetition.
    assert parse_json(b'[{"id": 1}, {"id": 2}]') == [{"id": 1}, {"id": 2}]
