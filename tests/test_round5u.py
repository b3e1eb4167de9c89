"""Round 5u: a `RequestValidationError` raised by a dependency or a handler is the same self-healing error on MCP
and the tester (not an internal error), a 3xx `HTTPException` is the same outcome on MCP as in the tester (an
internal error), and a circular dependency is a declaration error naming the cycle (not a `RecursionError`)."""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Header, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient
from pydantic import BaseModel

from mcpfusion import MCPFusion, Presenter, Tool
from mcpfusion.context import Context
from mcpfusion.testing import ToolTester

SECRET = "SECRET-region-value"


async def region(x_region: str | None = Header(None)) -> str:
    if x_region != "eu":
        raise RequestValidationError([{"type": "value_error", "loc": ("header", "x-region"),
                                       "msg": "unknown region", "input": x_region}])
    return x_region


class Point(BaseModel):
    n: int


def geo_tool() -> Tool:
    tool = Tool("geo")

    @tool.action(readonly=True)
    async def where(name: str, at: str = Depends(region)) -> str:
        """Where."""
        return f"{name}@{at}"

    @tool.action(readonly=True)
    async def body_error() -> str:
        """Refuses an argument the FastAPI way."""
        raise RequestValidationError([{"type": "missing", "loc": ("body", "n"), "msg": "Field required",
                                       "input": None}])

    @tool.action(readonly=True)
    async def odd_errors() -> str:
        """Raises a RequestValidationError whose errors are not FastAPI's dicts."""
        raise RequestValidationError(["not a dict", 42])

    @tool.action(readonly=True)
    async def model_bug() -> Point:
        """Builds a model from bad data of its own."""
        return Point(n="not-a-number")  # type: ignore[arg-type]

    return tool


async def stateless_call(app: Any, name: str, arguments: dict[str, Any],
                         headers: dict[str, str] | None = None) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        response = await client.post("/mcp", headers={
            "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call", "mcp-name": name, **(headers or {})}, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": meta}})
    assert response.status_code == 200, response.text
    return dict(response.json())


def mcpfusion_errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("mcpfusion") and r.levelno >= logging.ERROR]


# -- 1. RequestValidationError ------------------------------------------------------------------------------

async def test_a_dependencys_request_validation_error_is_a_bad_request_on_mcp(caplog):
    app = MCPFusion("g", tools=[geo_tool()], json_response=True).build_app()
    with caplog.at_level(logging.ERROR):
        reply = await stateless_call(app, "geo", {"action": "where", "name": "ada"}, {"x-region": SECRET})
    result = reply["result"]
    text = result["content"][0]["text"]
    assert result["isError"] and '<tool_error code="BAD_REQUEST"' in text
    assert "has an invalid value for the header x-region (unknown region)" in text
    assert "No argument of yours can fix this" in text
    assert "INTERNAL_ERROR" not in text and SECRET not in str(reply)
    assert mcpfusion_errors(caplog) == []  # no traceback: the caller's error, not the server's


async def test_the_tester_answers_a_request_validation_error_as_mcp_does(caplog):
    with caplog.at_level(logging.ERROR):
        result = await ToolTester([geo_tool()]).call("geo", "where", {"name": "ada"}, headers={"x-region": SECRET})
    assert result.error_code == "BAD_REQUEST" and "the header x-region (unknown region)" in result.text
    assert SECRET not in result.text and mcpfusion_errors(caplog) == []
    ok = await ToolTester([geo_tool()]).call("geo", "where", {"name": "ada"}, headers={"x-region": "eu"})
    assert ok.data == "ada@eu"


async def test_a_handlers_body_error_names_the_argument_to_fix(caplog):
    app = MCPFusion("g", tools=[geo_tool()], json_response=True).build_app()
    with caplog.at_level(logging.ERROR):
        reply = await stateless_call(app, "geo", {"action": "body_error"})
        tested = await ToolTester([geo_tool()]).call("geo", "body_error")
    text = reply["result"]["content"][0]["text"]
    assert '<validation_error action="geo/body_error">' in text and '<field name="n">Field required.</field>' in text
    assert tested.error_code == "VALIDATION_ERROR" and '<field name="n">Field required.</field>' in tested.text
    assert mcpfusion_errors(caplog) == []


async def test_request_validation_errors_that_are_not_dicts_do_not_crash():
    result = await ToolTester([geo_tool()]).call("geo", "odd_errors")
    assert result.error_code == "VALIDATION_ERROR" and "not a dict" not in result.text


def test_rest_still_answers_a_dependencys_request_validation_error_with_422():
    http = TestClient(MCPFusion("g", tools=[geo_tool()]).build_app())
    refused = http.post("/api/geo/where", json={"name": "ada"}, headers={"x-region": SECRET})
    assert refused.status_code == 422 and refused.json()["code"] == "VALIDATION_ERROR"
    assert refused.json()["errors"] == [{"field": "header.x-region", "detail": "unknown region."}]
    assert SECRET not in refused.text
    assert "geo/where" in refused.json()["detail"] and "/api/geo" not in refused.json()["detail"]  # as MCP names it


async def test_a_pydantic_validation_error_in_a_handler_is_an_internal_error_everywhere(caplog):
    fusion = MCPFusion("g", tools=[geo_tool()], json_response=True)
    app = fusion.build_app()
    with caplog.at_level(logging.ERROR):
        reply = await stateless_call(app, "geo", {"action": "model_bug"})
        tested = await ToolTester(fusion).call("geo", "model_bug")
    assert '<tool_error code="INTERNAL_ERROR"' in reply["result"]["content"][0]["text"]
    assert tested.error_code == "INTERNAL_ERROR" and "not-a-number" not in tested.text
    assert TestClient(app).post("/api/geo/model_bug", json={}).status_code == 500
    assert mcpfusion_errors(caplog)  # a server bug: logged


# -- 2. A 3xx HTTPException ---------------------------------------------------------------------------------

async def moved() -> str:
    raise HTTPException(307, "tenant moved", headers={"Location": "https://eu.example.com/api/t/get"})


def moved_app() -> FastAPI:
    tool = Tool("t")

    @tool.action(readonly=True)
    async def get(x: str = Depends(moved)) -> str:
        """Get."""
        return x

    app = FastAPI()
    MCPFusion("t", tools=[tool], json_response=True).mount(app)
    return app


async def test_mcp_answers_a_redirect_as_the_tester_does(caplog):
    """MCP (both wires) and the tester agree: a redirect is no answer to a tool call (logged); REST follows HTTP."""
    app = moved_app()
    with caplog.at_level(logging.ERROR):
        reply = await stateless_call(app, "t", {"action": "get"})
        result = await ToolTester(app).call("t", "get")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            first = await session_call(client, "t", {"action": "get"})
    for text in (reply["result"]["content"][0]["text"], first["result"]["content"][0]["text"], result.text):
        assert '<tool_error code="INTERNAL_ERROR"' in text and "tenant moved" not in text
    assert "error" not in reply and "error" not in first and result.error_code == "INTERNAL_ERROR"
    assert sum("status 307" in r.getMessage() for r in mcpfusion_errors(caplog)) == 3
    rest = TestClient(app, follow_redirects=False).post("/api/t/get", json={})
    assert rest.status_code == 307 and rest.headers["location"] == "https://eu.example.com/api/t/get"


async def session_call(client: httpx.AsyncClient, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tools/call on the 2025-11-25 wire (a session), answered as JSON."""
    accept = {"accept": "application/json, text/event-stream"}
    init = await client.post("/mcp", headers=accept, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    headers = {**accept, "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    response = await client.post("/mcp", headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_the_tester_still_names_an_error_status_as_rest_does():
    async def gone() -> str:
        raise HTTPException(404, "no such tenant")

    tool = Tool("t")

    @tool.action(readonly=True)
    async def get(x: str = Depends(gone)) -> str:
        """Get."""
        return x

    result = await ToolTester([tool]).call("t", "get")
    assert result.error_code == "NOT_FOUND" and "no such tenant" in result.text


# -- 3. Circular dependencies -------------------------------------------------------------------------------

def test_a_self_recursive_dependency_is_refused_at_declaration_naming_it():
    def node(parent: object = None) -> object:
        return parent

    node.__defaults__ = (Depends(node),)
    tool = Tool("c")
    with pytest.raises(TypeError) as refused:
        @tool.action(readonly=True)
        async def walk(n: object = Depends(node)) -> str:
            """Walk."""
            return "x"
    said = str(refused.value)
    assert re.search(r"\.walk: parameter 'n': its dependencies are circular \(\S*\.node -> \S*\.node\)", said), said
    assert "walk" not in tool.actions


def test_a_cycle_through_other_dependencies_is_named_from_where_it_starts():
    def tenant(db: object = None) -> str:
        return "acme"

    def database(t: str = Depends(tenant)) -> object:
        return object()

    async def user(t: str = Depends(tenant)) -> str:
        return t

    tenant.__defaults__ = (Depends(database),)
    tool = Tool("c")
    with pytest.raises(TypeError) as refused:
        @tool.action(readonly=True)
        async def whoami(u: str = Depends(user)) -> str:
            """Who."""
            return u
    said = str(refused.value)
    assert re.search(r"\.whoami: parameter 'u': its dependencies are circular "
                     r"\(\S*\.tenant -> \S*\.database -> \S*\.tenant\)", said), said
    assert not isinstance(refused.value, RecursionError)

    async def plain() -> str:  # declarations go on as before once one was refused
        return "p"

    @tool.action(readonly=True)
    async def fine(p: str = Depends(plain)) -> str:
        """Fine."""
        return p

    assert "fine" in tool.actions


def test_a_circular_returns_dependency_is_refused_naming_it():
    view = Presenter("v").schema({"a": int})

    def pick(other: object = None) -> Presenter:
        return view

    pick.__defaults__ = (Depends(pick),)
    tool = Tool("c")
    with pytest.raises(TypeError) as refused:
        @tool.action(readonly=True, returns=pick, presenters=[view])
        async def show() -> dict:
            """Show."""
            return {"a": 1}
    said = str(refused.value)
    assert re.search(r"^returns=\S*\.pick: its dependencies are circular \(\S*\.pick -> \S*\.pick\)", said), said


async def test_a_returns_dependency_may_take_a_context():
    view = Presenter("v").schema({"a": int})
    seen: list[bool] = []

    async def pick(ctx: Context) -> Presenter:
        seen.append(isinstance(ctx, Context))
        return view

    tool = Tool("c")

    @tool.action(readonly=True, returns=pick, presenters=[view])
    async def show() -> dict:
        """Show."""
        return {"a": 1, "b": 2}

    result = await ToolTester([tool]).call("c", "show")
    assert result.data == {"a": 1} and seen == [True]
