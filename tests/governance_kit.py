"""One way to call an action on every transport, for the governance tests (middleware, guards, audit,
confirmation): the tester, REST, MCP 2025-11-25 (session, SSE), MCP 2026-07-28 (sessionless) and stdio
(the in-process bridge), all against the same FastAPI app in this process."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI
from starlette.requests import Request

from mcpfusion.listing import discriminated, mcp_name
from mcpfusion.mcp.stdio import StdioBridge
from mcpfusion.testing import ToolTester
from tests.service_kit import sse_messages

TRANSPORTS = ["tester", "rest", "mcp-2025", "mcp-2026", "stdio"]
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}
_CODE = re.compile(r'<tool_error code="([^"]+)"')


@dataclass
class Outcome:
    """One call as the caller got it: the error code (None on success), the texts, HTTP status/headers."""

    code: str | None
    texts: list[str]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    structured: Any = None

    @property
    def text(self) -> str:
        return "\n\n".join(self.texts)

    @property
    def data(self) -> Any:
        return json.loads(self.texts[0])

    @property
    def problem(self) -> dict[str, Any] | None:
        """REST's problem details (None elsewhere)."""
        return json.loads(self.texts[0]) if self.status >= 400 else None

    @property
    def recovery(self) -> str | None:
        if self.problem is not None:
            return self.problem.get("recovery")
        found = re.search(r"<recovery>(.*?)</recovery>", self.text, re.S)
        return found.group(1) if found else None

    @property
    def retry_after(self) -> float | None:
        if self.problem is not None:
            return self.problem.get("retry_after")
        found = re.search(r"<retry_after>(.*?)</retry_after>", self.text)
        return float(found.group(1)) if found else None


async def authenticate(request: Request) -> dict[str, str]:
    """Test authentication (for `RequireBearer`): the bearer token is the subject, every subject is in
    tenant acme."""
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    return {"sub": token, "tenant": "acme"}


def code_of(text: str) -> str | None:
    if text.startswith("<validation_error"):
        return "VALIDATION_ERROR"
    found = _CODE.search(text)
    return found.group(1) if found else "ERROR"


def _from_result(message: dict[str, Any]) -> Outcome:
    if "error" in message:
        return Outcome(f"JSONRPC_{message['error']['code']}", [message["error"]["message"]])
    result = message["result"]
    texts = [c["text"] for c in result.get("content", [])]
    code = code_of(texts[0]) if result.get("isError") else None
    return Outcome(code, texts, structured=result.get("structuredContent"))


class Caller:
    """Calls tool `tool`'s actions (grouped or flat) over one transport; `token` is the bearer token sent."""

    def __init__(self, app: FastAPI, transport: str, tool: str, token: str | None = "alice") -> None:
        self.app = app
        self.transport = transport
        self.tool = tool
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1",
                                        timeout=30)
        self.session: dict[str, str] | None = None
        self.bridge: StdioBridge | None = None
        self.lines: list[dict[str, Any]] = []
        self.next_id = 1

    async def aclose(self) -> None:
        if self.bridge is not None:
            await self.bridge.close()
        await self.client.aclose()

    async def call(self, action: str, args: dict[str, Any] | None = None) -> Outcome:
        arguments = dict(args or {})
        self.next_id += 1
        if self.transport == "tester":
            result = await ToolTester(self.app.state.mcpfusion.registry, app=self.app).call(
                self.tool, action, arguments, headers=self.headers)
            return Outcome(result.error_code if result.is_error else None, list(result.raw.texts),
                           structured=result.structured_content)
        if self.transport == "rest":
            r = await self.client.post(f"/api/{self.tool}/{action}", json=arguments, headers=self.headers)
            if r.status_code >= 400:  # RFC 9457 problem details: the whole body is the text
                return Outcome(r.json().get("code"), [r.text], r.status_code, dict(r.headers))
            return Outcome(None, [r.text], r.status_code, dict(r.headers), r.json())
        # The MCP tool that serves this action (grouped, flat or one of the annotation profiles).
        target = self.app.state.mcpfusion.registry.tools.get(self.tool)
        declared = target.actions.get(action) if target is not None else None
        name = mcp_name(declared) if declared is not None else self.tool
        if declared is None or discriminated(declared):
            arguments["action"] = action
        if self.transport == "mcp-2026":
            body = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                    "params": {"name": name, "arguments": arguments, "_meta": MODERN_META}}
            headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28",
                       "mcp-method": "tools/call", "mcp-name": name, **self.headers}
            r = await self.client.post("/mcp", json=body, headers=headers)
            return _from_result(r.json())
        if self.transport == "mcp-2025":
            if self.session is None:
                await self._initialize()
            assert self.session is not None
            body = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                    "params": {"name": name, "arguments": arguments}}
            r = await self.client.post("/mcp", json=body, headers=self.session)
            messages = sse_messages(r.text) if "event-stream" in r.headers.get("content-type", "") else [r.json()]
            return _from_result(next(m for m in messages if m.get("id") == self.next_id))
        if self.transport == "stdio":
            if self.bridge is None:
                self.bridge = StdioBridge(self.app, lambda text: self.lines.append(json.loads(text)),
                                          headers=dict(self.headers))
            line = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                    "params": {"name": name, "arguments": arguments, "_meta": MODERN_META}}
            await self.bridge.handle_line(json.dumps(line))
            return _from_result(next(m for m in self.lines if m.get("id") == self.next_id))
        raise ValueError(self.transport)

    async def _initialize(self) -> None:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                   **self.headers}
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "governance-tests", "version": "1"}}}
        r = await self.client.post("/mcp", json=body, headers=headers)
        assert r.status_code == 200, r.text
        headers.update({"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"})
        await self.client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                               headers=headers)
        self.session = headers
