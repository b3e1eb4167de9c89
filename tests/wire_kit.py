"""Helpers shared by tests that speak MCP over HTTP through an ASGI app (httpx, no server)."""

from __future__ import annotations

import json
from typing import Any

import httpx

META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def session(http: httpx.AsyncClient) -> dict[str, str]:
    """The headers of a new, initialized 2025-11-25 session."""
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    started = await http.post("/mcp", json=hello, headers=ACCEPT)
    headers = {**ACCEPT, "mcp-session-id": started.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def rpc_result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC result of a JSON or SSE answer (its last event)."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])["result"]  # type: ignore[no-any-return]
    return response.json()["result"]  # type: ignore[no-any-return]


async def every_wire(app: Any, tool: str, action: str, arguments: dict[str, Any]
                     ) -> tuple[httpx.Response, dict[str, Any], dict[str, Any]]:
    """REST's response, then the results of a tools/call on the 2026 and the 2025 MCP wires."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        rest = await http.post(f"/api/{tool}/{action}", json=arguments)
        call = {"name": tool, "arguments": {"action": action, **arguments}}
        modern = await http.post("/mcp", headers={**ACCEPT, "mcp-protocol-version": "2026-07-28",
                                                  "mcp-method": "tools/call", "mcp-name": tool},
                                 json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                       "params": {**call, "_meta": META_2026}})
        legacy = await http.post("/mcp", headers=await session(http),
                                 json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        return rest, rpc_result(modern), rpc_result(legacy)
