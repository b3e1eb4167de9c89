"""Peer: FastMCP (package `fastmcp`), returning the public invoice as its tool result.

JSON-response mode (SSE replies with `BENCH_MODE=sse`), stateful sessions for the 2025-11-25 wire;
2026-07-28 requests are served sessionless by the SDK session manager FastMCP builds on.
"""

from __future__ import annotations

import os
from typing import Any

from fastmcp import FastMCP

try:
    from peers.invoice import TOOL_NAME, public_invoice
except ImportError:  # pragma: no cover
    from bench.peers.invoice import TOOL_NAME, public_invoice

server = FastMCP("bench-fastmcp")


@server.tool(name=TOOL_NAME, description="Fetch one invoice.")
async def get_invoice(id: str) -> dict[str, Any]:
    return public_invoice(id)


# BENCH_MODE=sse: SSE replies (FastMCP's default); otherwise JSON replies.
app = server.http_app(path="/mcp", json_response=os.environ.get("BENCH_MODE") != "sse")
