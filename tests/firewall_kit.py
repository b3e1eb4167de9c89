"""Call one action on every path a client can take: in-process (the tester), REST, MCP sessionless
(2026-07-28) and MCP session (2025-11-25); each answer is reduced to what a firewall test checks."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from mcpfusion import MCPFusion, Tool
from tests.service_kit import McpSession, asgi_client, in_process, mcp, rest

PATHS = ("inproc", "rest", "mcp-2026", "mcp-2025")


@dataclass
class Answer:
    path: str
    error: str | None  # the error code, or None
    raw: str  # every byte the caller received (leak checks)
    data: Any  # the data as this path carries it (REST body, MCP structuredContent, the tester's view)
    texts: list[str]


def app_for(*tools: Tool, **options: Any) -> FastAPI:
    return MCPFusion("firewall-tests", tools=list(tools), **options).build_app()


def _code(text: str) -> str:
    match = re.search(r'code="([A-Z_]+)"', text)
    return match.group(1) if match else "ERROR"


def _mcp_answer(path: str, result: dict[str, Any], raw: str) -> Answer:
    texts = [c["text"] for c in result["content"]]
    if result["isError"]:
        return Answer(path, _code(texts[0]), raw, None, texts)
    return Answer(path, None, raw, result.get("structuredContent"), texts)


async def every_path(app: FastAPI, tool: str, action: str, args: dict[str, Any] | None = None,
                     token: str | None = None) -> dict[str, Answer]:
    """The same call on the four paths (grouped tools: `tool` + the `action` discriminator)."""
    out: dict[str, Answer] = {}
    headers = {"authorization": f"Bearer {token}"} if token else {}
    result = await in_process(app).call(tool, action, dict(args or {}), headers=headers)
    out["inproc"] = Answer("inproc", result.error_code if result.is_error else None, result.text + json.dumps(
        result.structured_content, default=str), result.data, result.raw.texts)
    async with asgi_client(app) as client:
        r = await rest(client, tool, action, args, token)
        body = r.json()
        error = body["code"] if r.status_code >= 400 else None  # problem details (RFC 9457)
        out["rest"] = Answer("rest", error, r.text, None if error else body, [])
        r = await mcp(client, tool, action, args, token)
        assert r.status_code == 200, r.text
        out["mcp-2026"] = _mcp_answer("mcp-2026", r.json()["result"], r.text)
        session = McpSession(client, token)
        assert (await session.start()).status_code == 200
        message = await session.call(tool, action, args)
        out["mcp-2025"] = _mcp_answer("mcp-2025", message["result"], json.dumps(message))
    return out


async def tools_list(app: FastAPI) -> list[dict[str, Any]]:
    async with asgi_client(app) as client:
        session = McpSession(client, None)
        await session.start()
        r = await session.rpc("tools/list")
        from tests.service_kit import sse_messages

        messages = sse_messages(r.text) if "event-stream" in r.headers["content-type"] else [r.json()]
        return next(m for m in messages if m.get("id") == session.next_id)["result"]["tools"]
