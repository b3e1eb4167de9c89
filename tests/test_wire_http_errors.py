"""HTTP-level refusals on MCP: a failing auth dependency is the HTTP 401/403 (with its challenge) on the
2025-11-25 wire's SSE replies too, until their stream has started; over stdio it carries the `--token` hint.
Raw tools answer a missing client capability and a missing back channel as actions do."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from fastapi import Depends, HTTPException

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.auth import bearer_token, unauthorized
from mcpfusion.errors import ToolError
from mcpfusion.mcp.jsonrpc import HTTP_ERROR
from mcpfusion.mcp.stdio import StdioBridge
from tests.mcp_app import serve

SSE = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
JSON_ONLY = {"accept": "application/json", "content-type": "application/json"}


def current_user(token: str = Depends(bearer_token)) -> str:
    if token != "s3cret":
        raise unauthorized("Unknown token.")
    return "ada"


def forbidden(user: str = Depends(current_user)) -> str:
    raise HTTPException(403, "Not yours.", headers={"WWW-Authenticate": 'Bearer error="insufficient_scope"'})


async def slow_user(token: str = Depends(bearer_token)) -> str:
    await asyncio.sleep(0.3)  # longer than the app's sse_hold_seconds: the stream has started
    raise unauthorized("Unknown token.")


def gone() -> str:
    raise HTTPException(404, "tenant gone")


def build_app(**settings: object) -> object:
    me = Tool("me")

    @me.action(readonly=True)
    async def whoami(user: str = Depends(current_user)) -> str:
        """Whoami."""
        return user

    @me.action(readonly=True)
    async def secret(user: str = Depends(forbidden)) -> str:
        """Secret."""
        return user

    @me.action(readonly=True)
    async def slow(user: str = Depends(slow_user)) -> str:
        """Slow."""
        return user

    @me.action(readonly=True)
    async def tenant(name: str = Depends(gone)) -> str:
        """Tenant."""
        return name

    @me.action(readonly=True)
    async def revoked(ctx: Context) -> str:
        """Sends progress, then finds the token revoked."""
        await ctx.progress(1, 2, "half way")
        raise unauthorized("Token revoked.")

    return MCPFusion("me", tools=[me], **settings).build_app()


def call(action: str, request_id: int = 2) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "me", "arguments": {"action": action}, "_meta": {"progressToken": "p"}}}


async def open_session(client: httpx.AsyncClient, headers: dict, capabilities: dict | None = None) -> dict:
    r = await client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities or {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert r.status_code == 200, r.text
    headers = {**headers, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


def sse_messages(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


@pytest.fixture(scope="module")
def base_url():
    with serve(build_app(sse_hold_seconds=0.1)) as url:
        yield url


@pytest.mark.parametrize(("action", "token", "status", "challenge"), [
    ("whoami", "wrong", 401, 'Bearer error="invalid_token", error_description="Unknown token."'),
    ("secret", "s3cret", 403, 'Bearer error="insufficient_scope"'),
])
async def test_an_auth_dependency_fails_an_sse_call_with_its_http_status_and_challenge(
        base_url, action, token, status, challenge):
    """With the Accept header every SDK client sends, the reply would be SSE: the dependency's 401/403 is still
    the HTTP status with its WWW-Authenticate (an MCP client starts its OAuth flow on it)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        headers = await open_session(client, {**SSE, "authorization": f"Bearer {token}"})
        for _ in range(2):  # the refused call is no longer in flight: its id is free again
            r = await client.post("/mcp", headers=headers, json=call(action))
            assert r.status_code == status, r.text
            assert r.headers["www-authenticate"] == challenge
            assert r.headers["content-type"] == "application/json"


async def test_a_401_after_the_stream_started_is_32010_in_it(base_url):
    """Once progress went out (status 200 sent), a 401 can only travel in the stream, after the progress."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        headers = await open_session(client, {**SSE, "authorization": "Bearer s3cret"})
        r = await client.post("/mcp", headers=headers, json=call("revoked"))
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        progress, reply = sse_messages(r.text)
        assert progress["method"] == "notifications/progress" and progress["params"]["message"] == "half way"
        assert reply == {"jsonrpc": "2.0", "id": 2, "error": {"code": HTTP_ERROR, "message": "HTTP 401: Token revoked.",
                                                              "data": {"status": 401, "detail": "Token revoked."}}}


async def test_a_401_after_the_hold_opened_the_stream_is_32010_in_it(base_url):
    """A dependency still running after `sse_hold_seconds`: the stream (priming event) has started."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        headers = await open_session(client, {**SSE, "authorization": "Bearer wrong"})
        r = await client.post("/mcp", headers=headers, json=call("slow"))
        assert r.status_code == 200
        assert sse_messages(r.text)[-1]["error"]["data"] == {"status": 401, "detail": "Unknown token."}


def modern_call(action: str, token: str) -> tuple[dict, dict]:
    """A 2026-07-28 tools/call with a progressToken (its answer may become a stream), and its headers."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": "p"}
    headers = {**SSE, "authorization": f"Bearer {token}", "mcp-protocol-version": "2026-07-28",
               "mcp-method": "tools/call", "mcp-name": "me"}
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "me", "arguments": {"action": action}, "_meta": meta}}, headers


async def test_the_2026_wire_answers_an_auth_dependency_with_its_status_when_the_call_could_stream(base_url):
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        body, headers = modern_call("whoami", "wrong")
        r = await client.post("/mcp", headers=headers, json=body)
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"] == 'Bearer error="invalid_token", error_description="Unknown token."'
        # After a notification the answer is a stream: the 401 follows it as -32010.
        body, headers = modern_call("revoked", "s3cret")
        r = await client.post("/mcp", headers=headers, json=body)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        progress, reply = sse_messages(r.text)
        assert progress["method"] == "notifications/progress"
        assert reply["error"] == {"code": HTTP_ERROR, "message": "HTTP 401: Token revoked.",
                                  "data": {"status": 401, "detail": "Token revoked."}}


async def test_other_statuses_stay_inside_mcp_on_sse_replies(base_url):
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        headers = await open_session(client, {**SSE, "authorization": "Bearer s3cret"})
        r = await client.post("/mcp", headers=headers, json=call("tenant"))
        assert r.status_code == 200
        assert sse_messages(r.text) == [{"jsonrpc": "2.0", "id": 2, "error": {
            "code": HTTP_ERROR, "message": "HTTP 404: tenant gone", "data": {"status": 404, "detail": "tenant gone"}}}]


HINT = "Start this stdio server with --token TOKEN, or set MCPFUSION_AUTHORIZATION to 'Bearer TOKEN' in its environment."


@pytest.mark.parametrize(("action", "token", "message", "status"), [
    ("whoami", None, "HTTP 401 from the MCP endpoint: Send the header 'Authorization: Bearer TOKEN'. " + HINT, 401),
    ("whoami", "Bearer wrong", "HTTP 401 from the MCP endpoint: Unknown token. " + HINT, 401),
    ("secret", "Bearer s3cret", "HTTP 403 from the MCP endpoint: Not yours. " + HINT, 403),
    ("revoked", "Bearer s3cret", "HTTP 401: Token revoked. " + HINT, 401),  # (after progress: in the stream)
])
async def test_stdio_answers_an_auth_dependency_with_the_token_hint(action, token, message, status):
    lines: list[dict] = []
    bridge = StdioBridge(build_app(), lambda text: lines.append(json.loads(text)),
                         headers={"authorization": token} if token else {})
    await bridge.startup()
    try:
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        await bridge.handle_line(json.dumps(call(action)))
    finally:
        await bridge.close()
    error = lines[-1]["error"]
    assert lines[-1]["id"] == 2 and error["code"] == HTTP_ERROR
    assert error["message"] == message and error["data"]["status"] == status


def raw_app() -> object:
    fusion = MCPFusion("raw")

    @fusion.raw_tool()
    async def confirm(ctx: Context) -> str:
        """Asks the user."""
        answer = await ctx.elicit("Sure?")
        return answer["action"]

    @fusion.raw_tool()
    async def roots(ctx: Context) -> str:
        """Lists the client's roots."""
        return str(await ctx.list_roots())

    @fusion.raw_tool()
    async def picky() -> str:
        """Refuses, for the agent."""
        raise ToolError("NOT_NOW", "Not now.", recovery="Try tomorrow.")

    return fusion.build_app()


def raw_call(name: str) -> dict:
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": {}}}


@pytest.mark.parametrize(("tool", "capability"), [("confirm", "elicitation"), ("roots", "roots")])
async def test_a_raw_tool_asking_for_an_undeclared_capability_is_32021(tool, capability):
    transport = httpx.ASGITransport(app=raw_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        headers = await open_session(client, JSON_ONLY)
        reply = (await client.post("/mcp", headers=headers, json=raw_call(tool))).json()
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"] == {"requiredCapabilities": {capability: {}}}


@pytest.mark.parametrize(("tool", "method"), [("confirm", "elicitation/create"), ("roots", "roots/list")])
async def test_a_raw_tool_without_a_back_channel_answers_no_back_channel(tool, method):
    """Capabilities declared, but JSON only and no GET stream: the tool error says what the client must change,
    not an INTERNAL_ERROR."""
    transport = httpx.ASGITransport(app=raw_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=10) as client:
        headers = await open_session(client, JSON_ONLY, {"elicitation": {}, "roots": {}})
        result = (await client.post("/mcp", headers=headers, json=raw_call(tool))).json()["result"]
    text = result["content"][0]["text"]
    assert result["isError"] is True
    assert text.startswith('<tool_error code="NO_BACK_CHANNEL"') and method in text
    assert "accept text/event-stream on the call's POST, or open the session's GET stream first" in text


async def test_a_raw_tool_raising_a_tool_error_answers_it():
    transport = httpx.ASGITransport(app=raw_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        headers = await open_session(client, JSON_ONLY)
        result = (await client.post("/mcp", headers=headers, json=raw_call("picky"))).json()["result"]
    assert result == {"isError": True, "content": [{"type": "text", "text": ToolError(
        "NOT_NOW", "Not now.", recovery="Try tomorrow.").render()}]}
