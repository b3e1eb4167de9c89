"""stdio: the SDK's stdio client drives the same FastAPI app in a subprocess; DI still applies."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.types import ElicitResult, TextContent

from mcpfusion.mcp.jsonrpc import HTTP_ERROR
from mcpfusion.mcp.stdio import env_headers

TESTS = Path(__file__).parent


def params(env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcpfusion.mcp.stdio", "tests.mcp_app:stdio_app"],
        cwd=str(TESTS),
        env={"PYTHONPATH": str(TESTS.parent), **(env or {})},
    )


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


async def test_stdio_serves_tools_with_headers_from_the_environment():
    env = {"MCPFUSION_STDIO_HEADERS": '{"X-Tenant": "globex"}'}
    async with Client(params(env), mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "billing_get_invoice" in names
        # The tenant dependency reads the X-Tenant header, supplied from the environment.
        assert text_of(await client.call_tool("billing_whoami", {})) == "tenant=globex"
        invoice = await client.call_tool("billing_get_invoice", {"id": "inv_1"})
        assert "[REDACTED]" in text_of(invoice)


async def test_stdio_elicitation_round_trip_and_modern_wire():
    async def elicit(context, params):
        return ElicitResult(action="accept", content={"ok": True})

    async with Client(params(), mode="legacy", elicitation_callback=elicit) as client:
        assert text_of(await client.call_tool("billing_confirm_delete", {"id": "inv_1"})) == "deleted"
    async with Client(params(), elicitation_callback=elicit) as client:
        assert client.protocol_version == "2026-07-28"
        assert text_of(await client.call_tool("billing_confirm_delete", {"id": "inv_1"})) == "deleted"


def test_env_headers_parsing():
    assert env_headers({"MCPFUSION_AUTHORIZATION": "Bearer t", "MCPFUSION_STDIO_HEADERS": '{"X-A": "1"}'}) == {
        "X-A": "1",
        "authorization": "Bearer t",
    }
    assert env_headers({}) == {}


async def test_bridge_in_process_applies_overrides_and_answers_bad_lines():
    import asyncio
    import json

    from mcpfusion.mcp.stdio import StdioBridge
    from tests.mcp_app import build_fusion, tenant

    app = build_fusion().build_app()
    app.dependency_overrides[tenant] = lambda: "from-override"
    lines: list[dict] = []
    bridge = StdioBridge(app, lambda text: lines.append(json.loads(text)), headers={})
    await bridge.startup()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    await bridge.handle_line(json.dumps(init))
    await bridge.handle_line("this is not json")
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                         "params": {"name": "billing_whoami"}}))
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "no/such"}))
    await bridge.close()
    await asyncio.sleep(0)
    by_id = {m.get("id"): m for m in lines}
    assert by_id[1]["result"]["serverInfo"]["name"] == "test-billing"
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[2]["result"]["content"][0]["text"] == "tenant=from-override"
    assert by_id[3]["error"]["code"] == -32601


async def test_bridge_turns_an_http_401_into_a_json_rpc_error():
    import json

    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    from mcpfusion import MCPFusion
    from mcpfusion.mcp.stdio import StdioBridge

    app = FastAPI()

    @app.middleware("http")
    async def require_token(request: Request, call_next):
        if request.headers.get("authorization") != "Bearer ok":
            return JSONResponse({"detail": "Missing bearer token"}, status_code=401)
        return await call_next(request)

    MCPFusion(name="locked", version="1").mount(app)
    lines: list[dict] = []
    bridge = StdioBridge(app, lambda text: lines.append(json.loads(text)), headers={})
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
    await bridge.close()
    assert lines == [{"jsonrpc": "2.0", "id": 7, "error": {
        "code": HTTP_ERROR,
        "message": "HTTP 401 from the MCP endpoint: Missing bearer token. Start this stdio server with "
                   "--token TOKEN, or set MCPFUSION_AUTHORIZATION to 'Bearer TOKEN' in its environment.",
        "data": {"status": 401, "detail": "Missing bearer token"}}}]


async def test_bridge_answers_every_line_deep_nesting_and_unicode_names_included():
    import asyncio
    import json

    from mcpfusion.mcp.stdio import StdioBridge
    from tests.mcp_app import build_fusion

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    lines: list[dict] = []
    bridge = StdioBridge(build_fusion().build_app(), lambda text: lines.append(json.loads(text)), headers={})
    await bridge.startup()
    deep = '{"jsonrpc":"2.0","id":2,"method":"ping","params":' + "[" * 5000 + "]" * 5000 + "}"
    await bridge.handle_line(deep)
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                         "params": {"name": "cust€mers", "arguments": {}, "_meta": meta}}))
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/c€ll",
                                         "params": {"name": "x", "_meta": meta}}))
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list",
                                         "params": {"_meta": {**meta, "io.modelcontextprotocol/protocolVersion":
                                                              "2026-07-28€"}}}))
    await bridge.handle_line('{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":"\ud800"}}'.encode(
        "utf-8", "surrogatepass").decode("utf-8", "surrogateescape"))
    await bridge.close()
    await asyncio.sleep(0)
    by_id = {m.get("id"): m for m in lines}
    unread = [m["error"]["message"] for m in lines if m.get("id") is None]  # no id can be read: parse errors
    assert unread == ["Parse error: the JSON nests deeper than this server reads (about 200 levels)",
                      "Parse error: the line is not valid UTF-8"]
    assert "Unknown tool: cust€mers" in by_id[3]["error"]["message"]  # routed: the name's header carried it
    assert by_id[4]["error"]["code"] == by_id[5]["error"]["code"] == -32600
    assert len(lines) == 5, lines


async def _bridge_to_a_refusing_endpoint(lines: list[dict]):
    """A stdio bridge (started) to an app whose endpoint refuses every caller with a 401 problem."""
    import json

    from mcpfusion import MCPFusion, Tool
    from mcpfusion.auth import RequireBearer, unauthorized
    from mcpfusion.mcp.stdio import StdioBridge

    app = MCPFusion("guarded", tools=[Tool("t", description="x")]).build_app()

    async def authenticate(request):
        raise unauthorized("Send the header 'Authorization: Bearer TOKEN'.", error=None)

    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp",))
    bridge = StdioBridge(app, lambda text: lines.append(json.loads(text)), headers={})
    await bridge.startup()
    return bridge


async def test_a_problem_json_refusal_keeps_its_detail_over_stdio():
    import json

    lines: list[dict] = []
    bridge = await _bridge_to_a_refusing_endpoint(lines)
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
    await bridge.close()
    assert lines[0]["id"] == 3 and lines[0]["error"]["data"]["status"] == 401
    assert lines[0]["error"]["data"]["detail"] == "Send the header 'Authorization: Bearer TOKEN'."


async def test_without_credentials_a_line_that_is_no_message_is_still_answered():
    """An array or a string gets a null-id error even when the endpoint refuses the caller; a notification
    gets nothing."""
    lines: list[dict] = []
    bridge = await _bridge_to_a_refusing_endpoint(lines)
    for line in ("[]", '"str"', '{"jsonrpc": "2.0", "method": "notifications/initialized"}'):
        await bridge.handle_line(line)
    await bridge.close()
    assert [(m["id"], m["error"]["data"]["status"]) for m in lines] == [(None, 401), (None, 401)]
