"""Peer: a bare FastAPI route at POST /mcp that reads the body and returns fixed bytes, the floor of what any
FastAPI-based MCP server can do. The bytes (mcpfusion's full tools/call response, captured by the harness)
are read at start-up from the file named by `BENCH_BODY_FILE`.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import Response

BODY = Path(os.environ["BENCH_BODY_FILE"]).read_bytes() if os.environ.get("BENCH_BODY_FILE") else b"{}"

app = FastAPI()


@app.post("/mcp")
async def mcp(request: Request) -> Response:
    await request.body()
    return Response(BODY, media_type="application/json")
