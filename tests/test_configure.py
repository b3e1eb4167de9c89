"""Declaration mends: `Context` in sub-dependencies, presenter `embed()` and callbacks checked when declared,
and a dependency's missing header answered on MCP as what it is (not a field the agent could fix)."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Cookie, Depends, Header
from fastapi.testclient import TestClient
from pydantic import BaseModel

from mcpfusion import Context, MCPFusion, Page, Presenter, Tool
from mcpfusion.dependencies import plan_of
from mcpfusion.presenter import PresenterError
from mcpfusion.testing import ToolTester

# -- Context (and Page) in a dependency of a dependency ------------------------------------------------------

calls: list[str] = []


async def audit(ctx: Context) -> Context:
    calls.append("audit")
    return ctx


async def caller(seen: Context = Depends(audit), ctx: Annotated[Context, "the call's context"] = None) -> list[Any]:
    return [seen, ctx]


class Pager:
    def __init__(self, ctx: Context, x_page: Annotated[int, Header()] = 1) -> None:
        self.ctx, self.page = ctx, x_page


def opened(ctx: Context):  # a sync generator dependency (teardown after the call)
    calls.append("open")
    yield ctx
    calls.append("close")


def context_tool() -> Tool:
    tool = Tool("ctx")

    @tool.action(readonly=True)
    async def who(ctx: Context, direct: Context = Depends(audit), nested: list = Depends(caller),
                  pager: Annotated[Pager, Depends()] = None, gen: Context = Depends(opened),
                  annotated: Annotated[Context, "doc"] = None) -> dict:
        """Which contexts the dependencies were given."""
        given = [direct, *nested, pager.ctx, gen, annotated]
        return {"same": [c is ctx for c in given], "transport": ctx.transport, "page": pager.page}

    @tool.action(readonly=True)
    async def plain(seen: list = Depends(caller)) -> str:
        """Only plain async dependencies: a plan, no FastAPI solver per call."""
        return seen[0].transport

    return tool


async def test_a_dependency_at_any_depth_takes_the_calls_context_as_the_action_does():
    tool = context_tool()
    app = MCPFusion("c", tools=[tool]).build_app()
    calls.clear()
    result = await ToolTester(app).call("ctx", "who", {}, headers={"x-page": "4"})
    assert not result.is_error, result.text
    assert result.data == {"same": [True] * 6, "transport": "detached", "page": 4}
    assert calls == ["audit", "open", "close"]  # cached once per call, as FastAPI caches any dependency
    assert set(tool.actions["who"].input_schema["properties"]) == set()
    assert plan_of(tool.actions["plain"].dependant) is not None


async def test_the_context_a_dependency_gets_over_mcp_is_the_mcp_calls():
    app = MCPFusion("c", tools=[context_tool()], json_response=True).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        result = await stateless_call(client, "ctx", {"action": "who"}, {"x-page": "2"})
    assert json.loads(result["content"][0]["text"]) == {"same": [True] * 6, "transport": "mcp", "page": 2}


def test_rest_gives_a_dependency_a_detached_context():
    http = TestClient(MCPFusion("c", tools=[context_tool()]).build_app())
    answer = http.post("/api/ctx/who", json={}, headers={"x-page": "3"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"same": [True] * 6, "transport": "detached", "page": 3}


async def test_overrides_apply_to_a_dependency_taking_a_context_and_may_take_one_themselves():
    tool = context_tool()
    app = MCPFusion("c", tools=[tool]).build_app()
    tester = ToolTester(app)
    seen: list[Any] = []

    async def fake(ctx: Context) -> Context:
        seen.append(ctx)
        return ctx

    app.dependency_overrides[audit] = fake
    calls.clear()
    result = await tester.call("ctx", "who", {})
    assert result.data["same"] == [True] * 6 and len(seen) == 1  # one value for both uses, as without overrides
    assert calls == ["open", "close"]
    app.dependency_overrides.clear()
    app.dependency_overrides[opened] = lambda: None  # an override of another dependency: the rest as before
    calls.clear()
    result = await tester.call("ctx", "who", {})
    assert result.data["same"] == [True, True, True, True, False, True] and calls == ["audit"]


def test_a_dependency_taking_a_page_is_refused_naming_it_and_the_way_out():
    async def page_size(page: Page) -> int:
        return page.size

    tool = Tool("t")
    with pytest.raises(TypeError) as info:
        @tool.action(readonly=True, paginate=5)
        async def rows(size: int = Depends(page_size)) -> list:
            """Rows."""
            return []
    said = str(info.value)
    assert "rows: parameter 'size': the dependency" in said and "page_size: parameter 'page' is a Page" in said
    assert "Take the Page on the action itself (page: Page)" in said


def test_a_header_marker_on_a_dependencys_context_is_refused():
    async def odd(ctx: Annotated[Context, Header()]) -> None:
        return None

    tool = Tool("t")
    with pytest.raises(TypeError, match=r"odd: parameter 'ctx' is a Context, which the framework provides by its "
                                        r"type: drop the Header\(\.\.\.\)"):
        @tool.action(readonly=True)
        async def a(x: None = Depends(odd)) -> str:
            """A."""
            return "a"


# -- presenter embed() and callbacks --------------------------------------------------------------------------


class Item(BaseModel):
    id: str
    email: str
    meta: dict[str, Any] = {}


def item() -> Presenter:
    return Presenter("item").schema(Item)


def test_embed_refuses_what_could_never_render_naming_the_presenter():
    child = Presenter("child").schema({"x": int})
    with pytest.raises(TypeError, match=r"presenter 'item': embed\('id'\) takes the Presenter .* not int 42"):
        item().embed("id", 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="presenter 'item': embed\\(\\) takes the key"):
        item().embed(3, child)  # type: ignore[arg-type]
    with pytest.raises(PresenterError, match="presenter 'item': embed\\('email'\\) names the field 'email', which "
                                             "its schema types as str"):
        item().embed("email", child)
    late = Presenter("late").embed("email", child)  # the schema comes later: checked when it is registered
    late.schema(Item)
    tool = Tool("t")
    with pytest.raises(PresenterError, match="presenter 'late': embed\\('email'\\)"):
        @tool.action(returns=late)
        async def get() -> dict:
            """Get."""
            return {}


def test_embed_refuses_a_cycle():
    parent, child = item(), Presenter("child")
    with pytest.raises(ValueError, match="presenter 'item': embed\\('meta', 'item'\\) would make it embed itself"):
        parent.embed("meta", parent)
    parent.embed("meta", child)
    with pytest.raises(ValueError, match="presenter 'child': embed\\('back', 'item'\\) would make it embed itself"):
        child.embed("back", parent)


def test_embed_still_takes_an_object_field_and_a_key_the_schema_leaves_out():
    line = Presenter("line").schema({"sku": str, "card": str}).redact_pii(["card"])
    order = item().embed("meta", line).embed("lines", line)
    data = order.present({"id": "1", "email": "e", "meta": {"sku": "A", "card": "4242"},
                          "lines": [{"sku": "B", "card": "4242"}]}).view.data
    assert data == {"id": "1", "email": "e", "meta": {"sku": "A", "card": "[REDACTED]"},
                    "lines": [{"sku": "B", "card": "[REDACTED]"}]}


@pytest.mark.parametrize("builder", ["ui", "collection_ui", "suggest", "collection_suggest", "attach", "rules",
                                     "directives"])
@pytest.mark.parametrize(("callback", "says"), [
    (lambda a, b, c: [], "takes 3 required arguments (a, b, c)"),
    (lambda: [], "takes no argument"),
    (lambda d, *, flag: [], "takes the required keyword-only argument(s) flag"),
])
def test_a_callback_that_could_never_be_called_is_refused_at_once(builder, callback, says):
    with pytest.raises(TypeError) as info:
        getattr(item(), builder)(callback)
    assert f"presenter 'item': Presenter.{builder}() takes a function of (data) or (data, ctx)" in str(info.value)
    assert says in str(info.value)


@pytest.mark.parametrize("callback", [lambda d: [], lambda d, ctx: [], lambda d, ctx=None, more=1: [],
                                      lambda *args: [], max])  # (max: a builtin without a signature)
def test_callbacks_of_one_or_two_arguments_are_taken(callback):
    assert item().rules(callback).ui(callback).suggest(callback) is not None


@pytest.mark.parametrize("builder", ["rules", "directives"])
def test_rules_and_directives_take_strings_or_a_function(builder):
    with pytest.raises(TypeError, match=f"presenter 'item': Presenter.{builder}\\(\\) takes a string, a list of "
                                        "strings or a function of \\(data\\[, ctx\\]\\), not int 42"):
        getattr(item(), builder)(42)
    with pytest.raises(TypeError, match=f"presenter 'item': Presenter.{builder}\\(\\) takes strings, but was given "
                                        "int 7 among them"):
        getattr(item(), builder)(["fine", 7])
    assert getattr(item(), builder)(["one", None, "two"]) is not None


# -- a header the agent cannot send ---------------------------------------------------------------------------


def header_tool() -> Tool:
    tool = Tool("t")

    async def token(x_token: Annotated[str, Header()]) -> str:
        return x_token

    @tool.action(readonly=True)
    async def headers(q: str, x_token: Annotated[str, Header()], sid: Annotated[str | None, Cookie()] = None,
                      page: Annotated[int, Header(alias="x-page")] = 1, via: str = Depends(token)) -> list:
        """Read headers."""
        return [q, x_token, sid, page, via]

    return tool


async def stateless_call(client: httpx.AsyncClient, name: str, arguments: dict[str, Any],
                         headers: dict[str, str] | None = None) -> dict[str, Any]:
    """One stateless tools/call (MCP 2026-07-28)."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
    response = await client.post("/mcp", headers={
        "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call", "mcp-name": name, **(headers or {})}, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta}})
    assert response.status_code == 200, response.text
    return dict(response.json()["result"])


async def test_a_missing_header_on_mcp_is_no_field_for_the_agent_to_fix():
    app = MCPFusion("h", tools=[header_tool()], json_response=True).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        result = await stateless_call(client, "t", {"action": "headers", "q": "a"})
        text = result["content"][0]["text"]
        assert result["isError"] and '<tool_error code="BAD_REQUEST"' in text
        assert "<message>The request calling t/headers lacks the header x-token.</message>" in text
        assert "No argument of yours can fix this" in text and "Do not call again as is" in text
        assert "validation_error" not in text and "Fix the fields" not in text
        secret = "SECRET-not-a-number"
        result = await stateless_call(client, "t", {"action": "headers", "q": "a"}, {"x-page": secret})
        text = result["content"][0]["text"]
        assert "lacks the header x-token and has an invalid value for the header x-page." in text
        assert secret not in text and secret not in json.dumps(result)
        result = await stateless_call(client, "t", {"action": "headers", "q": "a"},
                                      {"x-token": "tok", "cookie": "sid=s1", "x-page": "2"})
        assert json.loads(result["content"][0]["text"]) == ["a", "tok", "s1", 2, "tok"]


async def test_the_tester_answers_a_missing_header_as_mcp_does():
    result = await ToolTester([header_tool()]).call("t", "headers", {"q": "a"})
    assert result.error_code == "BAD_REQUEST" and "lacks the header x-token" in result.text


async def test_a_missing_argument_is_still_a_validation_error_on_mcp():
    result = await ToolTester([header_tool()]).call("t", "headers", {}, headers={"x-token": "t"})
    assert result.error_code == "VALIDATION_ERROR" and '<field name="q">' in result.text


def test_rest_still_answers_a_missing_header_with_fastapis_422():
    http = TestClient(MCPFusion("h", tools=[header_tool()]).build_app())
    refused = http.post("/api/t/headers", json={"q": "a"})
    assert refused.status_code == 422
    assert {e["field"] for e in refused.json()["errors"]} == {"header.x-token"}
    assert re.search("VALIDATION_ERROR", refused.text)
