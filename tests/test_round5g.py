"""Round 5g: an optional `Context` (`Context | None`, `Optional[Context]`, inside `Annotated` or not) is injected
as a bare one is in actions, raw tools, dependencies, resources and prompts, never an argument; asking the client
outside MCP (REST, the tester) answers the self-healing NO_BACK_CHANNEL error (REST: a 400 problem), never a
500, and `NoBackChannel` is still what a handler catches to fall back."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Optional

import pytest
from fastapi import Depends
from fastapi.testclient import TestClient

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.context import NoBackChannel
from mcpfusion.errors import ToolError
from mcpfusion.testing import ToolTester

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"accept": "application/json", "mcp-protocol-version": "2026-07-28"}


def rpc(client: TestClient, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """One request on the 2026-07-28 wire; its JSON-RPC answer."""
    headers = {**HEADERS, "mcp-method": method, **({"mcp-name": name} if name else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    answer: dict[str, Any] = client.post("/mcp", headers=headers, json=body).json()
    return answer


# -- 1. an optional Context is a Context, everywhere ---------------------------------------------------------


def kind(ctx: Any) -> str:
    return type(ctx).__name__


class MyContext(Context):
    """A subclass is found by its type too."""


async def uses_context(ctx: Context | None = None) -> str:
    """A dependency taking an optional context."""
    return kind(ctx)


def optional_app() -> MCPFusion:
    t = Tool("t")

    @t.action(readonly=True)
    async def pipe(ctx: Context | None = None) -> str:
        """`Context | None = None`."""
        return kind(ctx)

    @t.action(readonly=True)
    async def optional(n: int, ctx: Optional[Context]) -> str:  # noqa: UP045 (the spelling under test)
        """`Optional[Context]` without a default."""
        return f"{n} {kind(ctx)}"

    @t.action(readonly=True)
    async def annotated(ctx: Annotated[Context | None, "the call's context"] = None) -> str:
        """Inside Annotated."""
        return kind(ctx)

    @t.action(readonly=True)
    async def inner(ctx: Optional[Annotated[MyContext, "doc"]] = None) -> str:  # noqa: UP045
        """Annotated inside Optional, a subclass."""
        return kind(ctx)

    @t.action(readonly=True)
    async def through(found: Annotated[str, Depends(uses_context)]) -> str:
        """A dependency's optional context."""
        return found

    fusion = MCPFusion("opt", tools=[t])

    @fusion.raw_tool("raw")
    async def raw(ctx: Context | None = None) -> str:
        return kind(ctx)

    return fusion


def optional_app_without_actions() -> MCPFusion:
    """Resources and prompts only (their handling, not the actions', under test)."""
    fusion = MCPFusion("opt")

    @fusion.resource("opt://r")
    async def res(ctx: Optional[Context] = None) -> str:  # noqa: UP045
        return kind(ctx)

    @fusion.prompt()
    def pr(topic: str, ctx: Context | None = None) -> str:
        return f"{topic} {kind(ctx)}"

    return fusion


async def test_optional_context_is_injected_in_actions_never_an_argument():
    fusion = optional_app()
    tester = ToolTester(fusion)
    results = {a: await tester.call("t", a, {"n": 1} if a == "optional" else {})
               for a in ("pipe", "optional", "annotated", "inner", "through")}
    assert {a: (r.is_error, r.text) for a, r in results.items()} == {
        "pipe": (False, "Context"), "optional": (False, "1 Context"), "annotated": (False, "Context"),
        "inner": (False, "Context"), "through": (False, "Context")}
    with TestClient(fusion.build_app()) as client:
        tools = rpc(client, "tools/list", {})["result"]["tools"]
        schema = next(t for t in tools if t["name"] == "t")["inputSchema"]
        assert "ctx" not in str(schema)
        raw = next(t for t in tools if t["name"] == "raw")["inputSchema"]
        assert "ctx" not in raw.get("properties", {})
        # On the MCP wire the handlers get the call's own context (not a detached stand-in, not None).
        called = rpc(client, "tools/call", {"name": "t", "arguments": {"action": "pipe"}}, "t")["result"]
        assert called["content"][0]["text"] == "Context" and not called.get("isError")
        called = rpc(client, "tools/call", {"name": "raw", "arguments": {}}, "raw")["result"]
        assert called["content"][0]["text"] == "Context" and not called.get("isError")
        # REST: not a query or body parameter either.
        assert client.post("/api/t/pipe", json={}).json() == "Context"
        operation = client.get("/openapi.json").json()["paths"]["/api/t/pipe"]["post"]
        assert "ctx" not in str(operation.get("requestBody", {})) and not operation.get("parameters")


def test_optional_context_is_injected_in_resources_and_prompts_never_an_argument():
    fusion = optional_app_without_actions()
    with TestClient(fusion.build_app()) as client:
        read = rpc(client, "resources/read", {"uri": "opt://r"}, "opt://r")["result"]
        assert read["contents"][0]["text"] == "Context"
        prompts = rpc(client, "prompts/list", {})["result"]["prompts"]
        assert prompts == [{"name": "pr", "arguments": [{"name": "topic", "required": True}]}]
        for arguments in ({"topic": "x"}, {"topic": "x", "ctx": "hello"}):  # a `ctx` sent is no argument
            got = rpc(client, "prompts/get", {"name": "pr", "arguments": arguments}, "pr")
            assert got["result"]["messages"][0]["content"]["text"] == "x Context", got


# -- 2. asking the client outside MCP ------------------------------------------------------------------------


def asking_tool() -> Tool:
    t = Tool("t")

    @t.action(readonly=True)
    async def ask(ctx: Context) -> str:
        """Ask the user for a name."""
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"hello {answer.get('content')}"

    @t.action(readonly=True)
    async def many(ctx: Context) -> str:
        """Ask several things."""
        await ctx.ask({"a": ctx.sampling("hi"), "b": ctx.roots()})
        return "asked"

    @t.action(readonly=True)
    async def fallback(ctx: Context) -> str:
        """Fall back when nobody can be asked."""
        try:
            await ctx.list_roots()
        except NoBackChannel as exc:
            assert isinstance(exc, ToolError) and exc.code == "NO_BACK_CHANNEL"
            return "no roots"
        return "roots"

    return t


def test_rest_asking_the_user_is_a_400_problem_not_a_server_error(caplog: pytest.LogCaptureFixture):
    app = MCPFusion("ask", tools=[asking_tool()]).build_app()
    with caplog.at_level(logging.WARNING), TestClient(app, raise_server_exceptions=False) as client:
        r = client.post("/api/t/ask", json={})
        many = client.post("/api/t/many", json={})
        fallback = client.post("/api/t/fallback", json={})
    assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["code"] == "NO_BACK_CHANNEL" and body["type"] == "urn:mcpfusion:error:NO_BACK_CHANNEL"
    assert "elicitation/create" in body["detail"] and "MCP client that supports elicitation" in body["detail"]
    assert "through MCP" in body["recovery"] and "retry later" not in body["recovery"]
    assert many.status_code == 400 and "supports sampling, roots" in many.json()["detail"]
    assert fallback.status_code == 200 and fallback.json() == "no roots"
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR or rec.exc_info]


async def test_tester_asking_the_user_answers_a_self_healing_error(caplog: pytest.LogCaptureFixture):
    tester = ToolTester([asking_tool()])
    with caplog.at_level(logging.WARNING):
        result = await tester.call("t", "ask")
        fallback = await tester.call("t", "fallback")
    assert result.is_error and result.text.startswith('<tool_error code="NO_BACK_CHANNEL"')
    assert "elicitation/create" in result.text and "<recovery>Call this action through MCP" in result.text
    assert not fallback.is_error and fallback.data == "no roots"
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR or rec.exc_info]


async def test_detached_context_raises_a_no_back_channel_tool_error():
    ctx = Context.detached()
    for asking in (ctx.elicit("Sure?"), ctx.sample("hi"), ctx.list_roots(), ctx.ask({"r": ctx.roots()})):
        with pytest.raises(NoBackChannel, match="outside MCP") as caught:
            await asking
        assert isinstance(caught.value, ToolError) and caught.value.code == "NO_BACK_CHANNEL"
