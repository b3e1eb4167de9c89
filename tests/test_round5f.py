"""The app's `RateLimit` counts `resources/read`, `prompts/get` and `completion/complete` in the caller's own
bucket, on both MCP wires and stdio: a rate-limited caller cannot read around the limit of its actions."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from mcpfusion import MCPFusion, RateLimit, Tool
from mcpfusion.mcp.stdio import StdioBridge
from tests.service_kit import sse_messages

WIRES = ["mcp-2025", "mcp-2026", "stdio"]
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}
NAME_KEYS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
READ = ("resources/read", {"uri": "invoice://inv_1"})
PROMPT = ("prompts/get", {"name": "review", "arguments": {"id": "inv_1"}})
COMPLETE = ("completion/complete", {"ref": {"type": "ref/prompt", "name": "review"},
                                    "argument": {"name": "id", "value": "inv"}})
CALL = ("tools/call", {"name": "billing", "arguments": {"action": "get_invoice", "id": "inv_1"}})


def shop(middleware: list[Any], tool_middleware: list[Any] | None = None) -> FastAPI:
    billing = Tool("billing", middleware=tool_middleware or [])

    @billing.action(readonly=True)
    async def get_invoice(id: str) -> dict[str, str]:
        """One invoice."""
        return {"id": id}

    @billing.action(readonly=True)
    async def list_invoices() -> list[str]:
        """Every invoice."""
        return ["inv_1"]

    fusion = MCPFusion("shop", tools=[billing], middleware=middleware)

    @fusion.resource_template("invoice://{id}", mime_type="application/pdf")
    async def invoice_pdf(id: str) -> bytes:
        return b"%PDF-1.3 " + id.encode()

    @fusion.prompt()
    def review(id: str) -> str:
        """Review an invoice."""
        return f"Review {id}"

    @fusion.completion(prompt="review", argument="id")
    def invoice_ids(value: str) -> list[str]:
        return [i for i in ("inv_1", "inv_2") if i.startswith(value)]

    return fusion.build_app()


class Wire:
    """JSON-RPC requests of one caller (`token`) over one MCP wire, answered as (HTTP status, message)."""

    def __init__(self, app: FastAPI, wire: str, token: str = "alice") -> None:
        self.app = app
        self.wire = wire
        self.auth = {"authorization": f"Bearer {token}"}
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")
        self.session: dict[str, str] | None = None
        self.bridge: StdioBridge | None = None
        self.lines: list[dict[str, Any]] = []
        self.next_id = 1

    async def aclose(self) -> None:
        if self.bridge is not None:
            await self.bridge.close()
        await self.client.aclose()

    async def rpc(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.next_id += 1
        if self.wire == "stdio":
            if self.bridge is None:
                self.bridge = StdioBridge(self.app, lambda text: self.lines.append(json.loads(text)),
                                          headers=dict(self.auth))
            line = {"jsonrpc": "2.0", "id": self.next_id, "method": method,
                    "params": {**params, "_meta": MODERN_META}}
            await self.bridge.handle_line(json.dumps(line))
            return 200, next(m for m in self.lines if m.get("id") == self.next_id)
        if self.wire == "mcp-2026":
            headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": method,
                       **self.auth}
            name = params.get(NAME_KEYS.get(method, ""))
            if name is not None:
                headers["mcp-name"] = name
            r = await self.client.post("/mcp", headers=headers, json={
                "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": {**params, "_meta": MODERN_META}})
            return r.status_code, r.json()
        if self.session is None:
            await self._initialize()
        assert self.session is not None
        r = await self.client.post("/mcp", headers=self.session, json={
            "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        messages = sse_messages(r.text) if "event-stream" in r.headers.get("content-type", "") else [r.json()]
        return r.status_code, next(m for m in messages if m.get("id") == self.next_id)

    async def _initialize(self) -> None:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json", **self.auth}
        r = await self.client.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert r.status_code == 200, r.text
        headers.update({"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"})
        await self.client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.session = headers


def limited(message: dict[str, Any], method: str) -> bool:
    """Whether `message` is the over-the-limit answer to `method`: -32010 carrying 429, the code and the wait."""
    error = message.get("error")
    if error is None:
        return False
    assert error["code"] == -32010, error
    data = error["data"]
    assert data["status"] == 429 and data["code"] == "RATE_LIMITED" and data["retry_after"] >= 1, error
    assert error["message"].startswith("HTTP 429: Rate limit reached: at most 3 calls per 60 s for each caller.")
    assert f"then call {method} again" in error["message"]
    return True


def refused_call(message: dict[str, Any]) -> bool:
    result = message["result"]
    return result.get("isError") is True and 'code="RATE_LIMITED"' in result["content"][0]["text"]


@pytest.mark.parametrize("wire", WIRES)
async def test_reads_prompts_and_completions_take_from_the_callers_bucket(wire):
    app = shop([RateLimit(3, per=60)])
    alice = Wire(app, wire)
    try:
        for method, params in (READ, PROMPT, COMPLETE):  # the whole allowance, one of each
            status, message = await alice.rpc(method, params)
            assert status == 200 and "result" in message, message
        for method, params in (READ, PROMPT, COMPLETE):
            status, message = await alice.rpc(method, params)
            assert status == 200, message  # a refusal, never an HTTP error (as a refused tool call)
            assert limited(message, method)
        status, message = await alice.rpc(*CALL)  # the same bucket as the actions'
        assert refused_call(message), message
    finally:
        await alice.aclose()


@pytest.mark.parametrize("wire", WIRES)
async def test_a_caller_limited_on_its_actions_cannot_read_around_the_limit(wire):
    app = shop([RateLimit(3, per=60)])
    alice, bob = Wire(app, wire), Wire(app, wire, token="bob")
    try:
        answers = [(await alice.rpc(*CALL))[1] for _ in range(4)]
        assert [refused_call(m) for m in answers] == [False, False, False, True]
        status, message = await alice.rpc(*READ)
        assert limited(message, "resources/read")
        status, message = await bob.rpc(*READ)  # another caller, another bucket
        assert status == 200 and message["result"]["contents"][0]["mimeType"] == "application/pdf", message
    finally:
        await alice.aclose()
        await bob.aclose()


async def test_a_tools_rate_limit_covers_its_actions_only():
    app = shop([], tool_middleware=[RateLimit(1, per=60)])
    alice = Wire(app, "mcp-2026")
    try:
        for _ in range(3):
            for method, params in (READ, PROMPT):
                status, message = await alice.rpc(method, params)
                assert status == 200 and "result" in message, message
        assert not refused_call((await alice.rpc(*CALL))[1])
        assert refused_call((await alice.rpc(*CALL))[1])
    finally:
        await alice.aclose()


async def test_a_key_function_that_needs_arguments_leaves_reads_answered():
    app = shop([RateLimit(1, per=60, key=lambda call: call.arguments["id"])])  # no arguments on a read
    alice = Wire(app, "mcp-2026")
    try:
        for _ in range(3):
            status, message = await alice.rpc(*READ)
            assert status == 200 and "result" in message, message
    finally:
        await alice.aclose()
