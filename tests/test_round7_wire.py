"""Round 7: a name-bearing param (`uri`, tool `name`, prompt `name`) that is no string is an invalid param on
the 2026-07-28 wire, over HTTP and stdio alike (it was the SDK ladder's "mcp-name header does not match",
which over stdio names a header the client never sends)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcpfusion import MCPFusion, Tool
from mcpfusion.mcp.stdio import StdioBridge
from tests.wire_kit import ACCEPT, META_2026


def app() -> Any:
    t = Tool("t")

    @t.action(readonly=True)
    async def echo(text: str) -> str:
        """Echo."""
        return text

    return MCPFusion("named", tools=[t]).build_app()


CASES = [("resources/read", "uri", 123), ("resources/read", "uri", ["a"]), ("tools/call", "name", 5),
         ("prompts/get", "name", {"x": 1})]


@pytest.mark.parametrize(("method", "key", "value"), CASES)
async def test_over_stdio(method: str, key: str, value: Any) -> None:
    lines: list[dict[str, Any]] = []
    bridge = StdioBridge(app(), lambda text: lines.append(json.loads(text)), headers={})
    await bridge.startup()
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                         "params": {key: value, "_meta": META_2026}}))
    await bridge.close()
    assert lines == [{"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32602, "message": f"Invalid params for {method}: {key} must be a string"}}]


@pytest.mark.parametrize(("method", "key", "value"), CASES)
@pytest.mark.parametrize("header", [None, "123"])
async def test_over_http(method: str, key: str, value: Any, header: str | None) -> None:
    headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if header is not None:
        headers["mcp-name"] = header
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app()), base_url="http://127.0.0.1") as http:
        answer = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                                "params": {key: value, "_meta": META_2026}})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == -32602 and error["message"] == f"Invalid params for {method}: {key} must be a string"


async def test_other_problems_are_still_named_after_it() -> None:
    headers = {**ACCEPT, "mcp-method": "resources/read"}  # no version header either
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app()), base_url="http://127.0.0.1") as http:
        answer = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                                                                "params": {"uri": 7, "_meta": META_2026}})
    error = answer.json()["error"]
    assert "MCP-Protocol-Version header is missing" in error["message"]
    assert "uri must be a string" in error["message"]
