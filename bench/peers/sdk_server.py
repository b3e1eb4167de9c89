"""Peer: the official SDK's `MCPServer` (package `mcp`), returning the public invoice as its tool result.

JSON-response mode (the SDK's fastest path on both wires; SSE replies with `BENCH_MODE=sse`); stateful
sessions for the 2025-11-25 wire, and the SDK serves 2026-07-28 sessionless requests from the same endpoint.
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server.mcpserver import MCPServer

try:
    from peers.invoice import TOOL_NAME, public_invoice
except ImportError:  # pragma: no cover
    from bench.peers.invoice import TOOL_NAME, public_invoice

server = MCPServer("bench-sdk")


@server.tool(name=TOOL_NAME, description="Fetch one invoice.")
async def get_invoice(id: str) -> dict[str, Any]:
    return public_invoice(id)


# BENCH_MODE=sse: SSE replies (the SDK's default); otherwise JSON replies.
app = server.streamable_http_app(json_response=os.environ.get("BENCH_MODE") != "sse")
