"""A real uvicorn server in a child process, on a free 127.0.0.1 port, stopped by the test that started it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 60  # a deadline for a hung start-up, not a timing assertion


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def uvicorn_server(factory: str, env: dict[str, str] | None = None, port: int | None = None) -> Iterator[str]:
    """Serve `module:function` (an app factory importable from the repository root) and yield its base URL."""
    port = port or free_port()
    command = [sys.executable, "-m", "uvicorn", "--factory", factory, "--host", "127.0.0.1", "--port", str(port),
               "--app-dir", str(ROOT), "--log-level", "warning"]
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if proc.poll() is not None:
                output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                raise RuntimeError(f"server {factory} exited with {proc.returncode}:\n{output}")
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server {factory} did not answer /healthz")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


def mcp_tools_list(base: str, token: str | None = None) -> list[dict]:
    """`tools/list` over MCP streamable HTTP (2025-11-25 handshake), JSON or SSE answers."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    with httpx.Client(base_url=base, headers=headers, timeout=10) as http:
        init = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "docs-test", "version": "1"}}})
        init.raise_for_status()
        session = {"mcp-protocol-version": "2025-11-25"}
        if "mcp-session-id" in init.headers:
            session["mcp-session-id"] = init.headers["mcp-session-id"]
        http.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools: list[dict] = []
        cursor = None
        while True:
            params = {"cursor": cursor} if cursor else {}
            reply = http.post("/mcp", headers=session,
                              json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": params})
            reply.raise_for_status()
            result = _jsonrpc_result(reply)
            tools += result["tools"]
            cursor = result.get("nextCursor")
            if not cursor:
                return tools


def _jsonrpc_result(reply: httpx.Response) -> dict:
    import json

    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        for line in reply.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if "result" in message or "error" in message:
                    reply_json = message
                    break
        else:
            raise AssertionError(f"no JSON-RPC answer in {reply.text!r}")
    else:
        reply_json = reply.json()
    assert "result" in reply_json, reply_json
    return reply_json["result"]
