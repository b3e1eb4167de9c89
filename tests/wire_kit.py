"""Helpers shared by tests that speak MCP over HTTP through an ASGI app (httpx, no server)."""

from __future__ import annotations

import httpx

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def session(http: httpx.AsyncClient) -> dict[str, str]:
    """The headers of a new, initialized 2025-11-25 session."""
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    started = await http.post("/mcp", json=hello, headers=ACCEPT)
    headers = {**ACCEPT, "mcp-session-id": started.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers
