"""Helpers for the reference-service tests: an app on a temporary database, MCP and REST callers,
a real uvicorn server on a free port."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from app.main import create_app
from app.seed import CUSTOMERS
from app.settings import Settings, database_url
from mcpfusion.listing import discriminated, mcp_name
from mcpfusion.testing import ToolTester
from routers.billing import billing
from routers.customers import customers

REFERENCE_TOOLS = {t.name: t for t in (billing, customers)}
TOKENS = ("demo-admin", "demo-support", "demo-globex-admin")
# The billing actions the support role's scopes (billing:read, customers:read) do not allow: hidden on MCP
# (answered like unknown ones), 403 insufficient_scope on REST.
WRITES = frozenset({"create_invoice", "update_invoice_status", "remind", "record_payment", "void_invoice"})
HIDDEN_CODES = frozenset({"UNKNOWN_TOOL", "UNKNOWN_ACTION", "FORBIDDEN"})
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
ACME_PII = [v for _, _, email, phone, _ in CUSTOMERS["acme"] for v in (email, phone) if v]
ACME_INVOICES = {f"inv_{n:04d}" for n in range(1, 25)}
GLOBEX_INVOICES = {f"inv_{n:04d}" for n in range(25, 31)}


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url(None, tmp_path / "billing.sqlite3"),
        "credentials": {"PAYMENT_API_KEY": "test-payment-key"},
    }
    values.update(overrides)
    return Settings(**values)


def mcp_target(tool: str, action: str | None, args: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The MCP tool name and arguments that reach `tool`'s `action` as the reference service advertises it
    (billing is split by annotation profile: billing_read, billing_write, billing_void_invoice)."""
    arguments = dict(args or {})
    declared = REFERENCE_TOOLS.get(tool)
    if action is None or declared is None or action not in declared.actions:
        if action is not None:
            arguments["action"] = action
        return tool, arguments
    target = declared.actions[action]
    if discriminated(target):
        arguments["action"] = action
    return mcp_name(target), arguments


def auth(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


def in_process(app: FastAPI) -> ToolTester:
    return ToolTester(app.state.mcpfusion.registry, app=app)


def asgi_client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=30)


async def rest(client: httpx.AsyncClient, tool: str, action: str, args: dict[str, Any] | None = None,
               token: str | None = None) -> httpx.Response:
    return await client.post(f"/api/{tool}/{action}", json=args or {}, headers=auth(token))


async def mcp(client: httpx.AsyncClient, tool: str, action: str | None, args: dict[str, Any] | None = None,
              token: str | None = None) -> httpx.Response:
    """One sessionless (2026-07-28) `tools/call`, answered as JSON."""
    tool, arguments = mcp_target(tool, action, args)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": META}}
    headers = {"accept": "application/json", "content-type": "application/json",
               "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": tool, **auth(token)}
    return await client.post("/mcp", json=body, headers=headers)


def sse_messages(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body (data lines; empty priming events skipped)."""
    out = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in event.split("\n") if line.startswith("data:"))
        if data.strip():
            out.append(json.loads(data))
    return out


class McpSession:
    """A 2025-11-25 session over HTTP (initialize, then calls answered as SSE streams)."""

    def __init__(self, client: httpx.AsyncClient, token: str | None) -> None:
        self.client = client
        self.headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                        **auth(token)}
        self.next_id = 1

    async def rpc(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        return await self.client.post("/mcp", json=body, headers=self.headers)

    async def start(self) -> httpx.Response:
        r = await self.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "service-tests", "version": "1"}})
        if r.status_code == 200:
            self.headers.update({"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"})
            await self.client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                   headers=self.headers)
        return r

    async def call(self, tool: str, action: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        name, arguments = mcp_target(tool, action, args)
        r = await self.rpc("tools/call", {"name": name, "arguments": arguments})
        assert r.status_code == 200, r.text
        messages = sse_messages(r.text) if "event-stream" in r.headers["content-type"] else [r.json()]
        return next(m for m in messages if m.get("id") == self.next_id)


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serve(app: FastAPI, sock: socket.socket | None = None, *, root_path: str = "",
          lifespan: str = "on") -> Iterator[str]:
    """Run `app` with uvicorn in a thread on a free port (or the bound `sock`), under `root_path` (uvicorn's
    `--root-path`); stop it on exit."""
    sock = sock or free_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan, root_path=root_path,
                                           timeout_graceful_shutdown=1))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            threading.Event().wait(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def build(tmp_path: Path, **overrides: Any) -> FastAPI:
    return create_app(settings_for(tmp_path, **overrides))


class Outcome:
    """One call's outcome, whatever the transport: the error code, or the data as the agent got it."""

    def __init__(self, error_code: str | None, data: Any, raw: str) -> None:
        self.error_code = error_code
        self.data = data
        self.raw = raw  # everything the caller received, for leak checks

    def __repr__(self) -> str:
        return f"Outcome({self.error_code!r}, {self.raw[:200]!r})"


def _parse_text(text: str) -> Any:
    import toon_format

    try:
        return json.loads(text)
    except ValueError:
        return toon_format.decode(text)


async def call(transport: str, app: FastAPI, tool: str, action: str, args: dict[str, Any] | None = None,
               token: str | None = None) -> Outcome:
    """Call an action in-process ("inproc"), over REST ("rest") or over MCP ("mcp")."""
    if transport == "inproc":
        result = await in_process(app).call(tool, action, args or {}, headers=auth(token))
        return Outcome(result.error_code if result.is_error else None, result.data, result.text)
    async with asgi_client(app) as client:
        if transport == "rest":
            r = await rest(client, tool, action, args, token)
            body = r.json()
            if r.status_code >= 400:
                return Outcome(body["code"], None, r.text)
            return Outcome(None, body, r.text)
        r = await mcp(client, tool, action, args, token)
        if "error" in r.json():  # a protocol error: an unknown tool (or one the caller's scopes hide)
            assert "Unknown tool" in r.json()["error"]["message"], r.text
            return Outcome("UNKNOWN_TOOL", None, r.text)
        assert r.status_code == 200, r.text
        result = r.json()["result"]
        if result["isError"]:
            import re

            match = re.search(r'code="([A-Z_]+)"', result["content"][0]["text"])
            return Outcome(match.group(1) if match else "ERROR", None, r.text)
        data = result.get("structuredContent")
        if isinstance(data, dict) and "items" in data and set(data) <= {"items", "next_cursor"}:
            data = data["items"]  # a list travels as {"items": [...]} in structuredContent (one page of it)
        if data is None:
            data = _parse_text(result["content"][0]["text"])
        return Outcome(None, data, r.text)


# <expiry>.<nonce>.<epoch of the spent store>.<mac> (`mcpfusion.confirm.token`)
CONFIRM_TOKEN = re.compile(r"\d{10}\.[0-9a-f]{8}\.[0-9a-zA-Z]{1,32}\.[0-9a-f]{32}")


def confirm_token(text: str) -> str:
    """The `_confirm` token a CONFIRMATION_REQUIRED answer carries (what a user who agrees sends back)."""
    found = CONFIRM_TOKEN.search(text)
    assert found is not None, text
    return found.group(0)


async def call_confirmed(transport: str, app: FastAPI, tool: str, action: str, args: dict[str, Any] | None = None,
                         token: str | None = None) -> Outcome:
    """`call`, answering a confirmation request (`confirm=True` actions) as a user who agrees."""
    outcome = await call(transport, app, tool, action, args, token)
    if outcome.error_code != "CONFIRMATION_REQUIRED":
        return outcome
    return await call(transport, app, tool, action, {**(args or {}), "_confirm": confirm_token(outcome.raw)}, token)
