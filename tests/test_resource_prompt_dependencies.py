"""Resources and prompts resolve FastAPI dependencies exactly as actions do: `Depends`, headers, yield
teardown, `app.dependency_overrides`, and `Context` found by type; on both MCP wires."""

from __future__ import annotations

import httpx
import pytest
from fastapi import Depends, Header
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcpfusion import Context, MCPFusion


class AuditContext(Context):
    """A subclass under another name: still the call's context."""


LookAlike = type("Context", (), {})  # another class that is merely *named* Context


def build(events: list[str]):
    async def get_db():
        events.append("open")
        try:
            yield {"acme": "Acme Corp"}
        finally:
            events.append("close")

    def tenant(x_tenant: str = Header(default="acme")) -> str:
        return x_tenant

    fusion = MCPFusion("deps")

    @fusion.resource("tenant://name", mime_type="text/plain")
    async def tenant_name(db: dict = Depends(get_db), who: str = Depends(tenant)) -> str:
        return db.get(who, f"unknown tenant {who}")

    @fusion.resource_template("tenant://{key}/transport")
    async def transport(key: str, ctx: AuditContext) -> str:
        return f"{key} via {ctx.transport}"

    @fusion.prompt()
    async def greet(name: str, db: dict = Depends(get_db), ctx: Context = None) -> str:
        return f"Hello {name} from {db['acme']} ({ctx.transport})"

    app = fusion.build_app()
    return app, get_db


def client(app, mode: str):
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1",
                             headers={"x-tenant": "acme"})
    return Client(streamable_http_client("http://127.0.0.1/mcp", http_client=http), mode=mode)


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 sessionless, 2025-11-25 sessions
async def test_depends_overrides_teardown_and_context(mode):
    events: list[str] = []
    app, get_db = build(events)
    async with client(app, mode) as mcp:
        prompts = await mcp.list_prompts()
        assert [a.name for a in prompts.prompts[0].arguments] == ["name"]  # dependencies are not arguments
        read = await mcp.read_resource("tenant://name")
        assert read.contents[0].text == "Acme Corp"
        assert events == ["open", "close"]
        templated = await mcp.read_resource("tenant://t1/transport")
        assert templated.contents[0].text == "t1 via mcp"
        prompt = await mcp.get_prompt("greet", {"name": "Ada"})
        assert prompt.messages[0].content.text == "Hello Ada from Acme Corp (mcp)"
        assert events == ["open", "close", "open", "close"]

        app.dependency_overrides[get_db] = lambda: {"acme": "Overridden Inc"}
        assert (await mcp.read_resource("tenant://name")).contents[0].text == "Overridden Inc"
        prompt = await mcp.get_prompt("greet", {"name": "Ada"})
        assert prompt.messages[0].content.text == "Hello Ada from Overridden Inc (mcp)"
    assert events == ["open", "close", "open", "close"]


async def test_a_look_alike_context_class_is_an_argument_not_the_context():
    fusion = MCPFusion("deps")

    @fusion.prompt()
    def odd(ctx: LookAlike) -> str:
        return "never injected"

    assert fusion.prompts.list()[0]["arguments"] == [{"name": "ctx", "required": True}]


async def test_a_missing_required_header_is_invalid_params():
    from mcp.shared.exceptions import MCPError

    fusion = MCPFusion("deps")

    @fusion.resource("needs://header")
    def needs(x_key: str = Header()) -> str:
        return x_key

    async with client(fusion.build_app(), "auto") as mcp:
        with pytest.raises(MCPError) as caught:
            await mcp.read_resource("needs://header")
    assert caught.value.error.code == -32602 and "x-key" in caught.value.error.message


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_prompt_result_mcp_cannot_carry_is_an_error_naming_the_prompt(mode):
    """A `system` role (MCP has user and assistant) never reaches the client, whose SDK would reject it."""
    from mcp.shared.exceptions import MCPError

    fusion = MCPFusion("prompts")

    @fusion.prompt()
    async def preamble() -> dict:
        return {"role": "system", "content": "You are terse."}

    @fusion.prompt()
    async def fine() -> dict:
        return {"role": "assistant", "content": "Noted."}

    async with client(fusion.build_app(), mode) as session:
        assert (await session.get_prompt("fine")).messages[0].role == "assistant"
        with pytest.raises(MCPError, match=r"Prompt 'preamble' returned messages MCP cannot carry \(at messages.0.role\)"):
            await session.get_prompt("preamble")
