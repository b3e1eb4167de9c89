"""Runtime mends: a yield dependency swallowing the handler's error, raw tools checked like actions, the tester
of an `MCPFusion` calling through the app serving it, and REST's OpenAPI (cleaned docstrings, header and
cookie parameters)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

import httpx
import mcp_types
import pytest
from fastapi import Cookie, Depends, FastAPI, Header, Request
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool
from mcpfusion.testing import ToolTester

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}


def client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def tools_call(http: httpx.AsyncClient, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The result of one tools/call on the sessionless 2026-07-28 wire."""
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": name}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": META}}
    reply = (await http.post("/mcp", headers=headers, json=body)).json()
    assert "error" not in reply, reply
    return reply["result"]  # type: ignore[no-any-return]


# -- a yield dependency that swallows the handler's exception -------------------------------------------

rolled_back: list[str] = []


async def session() -> AsyncIterator[str]:
    try:
        yield "session"
    except Exception:
        rolled_back.append("rollback")  # and no `raise`: the slip under test


orders = Tool("orders", description="Orders")


@orders.action()
async def place(sku: str, s: Annotated[str, Depends(session)]) -> str:
    """Place an order."""
    raise RuntimeError("stock table locked")


async def test_a_swallowed_handler_error_is_an_internal_error_with_the_real_cause_logged(caplog):
    rolled_back.clear()
    fusion = MCPFusion("shop", tools=[orders])
    app = fusion.build_app()
    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        async with client(app) as http:
            result = await tools_call(http, "orders", {"action": "place", "sku": "x"})
            rest = await http.post("/api/orders/place", json={"sku": "x"})
        tested = await ToolTester(fusion).call("orders", "place", {"sku": "x"})
    assert result["isError"] is True and 'code="INTERNAL_ERROR"' in result["content"][0]["text"]
    assert "stock table locked" not in result["content"][0]["text"]
    assert rest.status_code == 500 and rest.json()["code"] == "INTERNAL_ERROR"
    assert rest.headers["content-type"].startswith("application/problem+json")
    assert tested.is_error and tested.error_code == "INTERNAL_ERROR"
    assert rolled_back == ["rollback"] * 3
    logged = [r for r in caplog.records if r.exc_info and "swallowed by a dependency with yield" in r.getMessage()]
    assert len(logged) == 3
    assert all(isinstance(r.exc_info[1], RuntimeError) and str(r.exc_info[1]) == "stock table locked"
               for r in logged)
    assert "AttributeError" not in caplog.text


# -- raw tools -----------------------------------------------------------------------------------------

def test_a_raw_tool_name_follows_the_rule_of_tool_names():
    fusion = MCPFusion("weather")
    with pytest.raises(ValueError, match="get weather"):
        fusion.raw_tool("get weather")(lambda: "sunny")
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        fusion.raw_tool("bad", input_schema={"type": "object", "required": "city"})(lambda: "x")
    with pytest.raises(ValueError, match="object schema"):
        fusion.raw_tool("bad", input_schema={"type": "string"})(lambda: "x")
    assert fusion.raw_tools == {}


def weather() -> MCPFusion:
    fusion = MCPFusion("weather")
    city = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"]}

    @fusion.raw_tool("forecast", input_schema=city)
    async def forecast(city: str, days: int = 1) -> str:
        return f"rain in {city} for {days} days"

    @fusion.raw_tool("flat_content")
    async def flat_content() -> dict:
        return {"content": "rain"}  # not a list of blocks

    @fusion.raw_tool("typo_block")
    async def typo_block() -> list:
        return [{"type": "txt", "text": "rain"}]

    return fusion


async def test_raw_tool_arguments_are_validated_against_its_input_schema():
    async with client(weather().build_app()) as http:
        good = await tools_call(http, "forecast", {"city": "Paris", "days": 2})
        missing = await tools_call(http, "forecast", {})
        wrong = await tools_call(http, "forecast", {"city": "Paris", "days": "two"})
    assert good["isError"] is False and good["content"] == [{"type": "text", "text": "rain in Paris for 2 days"}]
    text = missing["content"][0]["text"]  # a VALIDATION_ERROR, rendered as actions render theirs
    assert missing["isError"] is True and text.startswith('<validation_error action="forecast">')
    assert '<field name="city">Field required.</field>' in text
    assert wrong["isError"] is True
    assert '<field name="days">\'two\' is not of type \'integer\'. You sent: "two".</field>' in wrong["content"][0]["text"]


async def test_an_invalid_raw_result_is_an_internal_error_result_and_logged(caplog):
    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        async with client(weather().build_app()) as http:
            results = [await tools_call(http, name, {}) for name in ("flat_content", "typo_block")]
    for result in results:
        mcp_types.CallToolResult.model_validate(result)  # what a client's SDK accepts
        assert result["isError"] is True and 'code="INTERNAL_ERROR"' in result["content"][0]["text"]
    assert "raw tool flat_content returned a result that is not an MCP CallToolResult (at content)" in caplog.text
    assert "raw tool typo_block returned a result that is not an MCP CallToolResult (at content.0)" in caplog.text


# -- ToolTester(fusion) calls through the app serving it --------------------------------------------------

def real_db() -> str:
    return "production"


shop = Tool("shop", description="Shop")


@shop.action(readonly=True)
async def where(db: Annotated[str, Depends(real_db)], request: Request) -> dict:
    """Which database and currency."""
    return {"db": db, "currency": getattr(request.app.state, "currency", None)}


@pytest.mark.parametrize("serve", ["build_app", "mount"])
async def test_tool_tester_of_a_fusion_sees_the_overrides_and_state_of_its_app(serve):
    fusion = MCPFusion("shop", tools=[shop])
    early = ToolTester(fusion)  # made before the fusion is served
    assert (await early.call("shop", "where")).data == {"db": "production", "currency": None}
    app = fusion.build_app() if serve == "build_app" else fusion.mount(FastAPI())
    app.state.currency = "EUR"
    app.dependency_overrides[real_db] = lambda: "fake"
    expected = {"db": "fake", "currency": "EUR"}
    assert (await ToolTester(app).call("shop", "where")).data == expected
    assert (await ToolTester(fusion).call("shop", "where")).data == expected
    assert (await early.call("shop", "where")).data == expected
    assert ToolTester(fusion).dependency_overrides is app.dependency_overrides
    other = FastAPI()  # an app given explicitly still wins
    assert (await ToolTester(fusion, app=other).call("shop", "where")).data == {"db": "production", "currency": None}


# -- OpenAPI of the REST routes -------------------------------------------------------------------------

def tenant_of(x_org: Annotated[str, Header(description="The organisation")],
              sid: Annotated[str | None, Cookie()] = None) -> str:
    return x_org


reports = Tool("reports", description="Reports")


@reports.action(readonly=True)
async def revenue(year: int, x_tenant: Annotated[str, Header()], org: Annotated[str, Depends(tenant_of)]) -> dict:
    """Revenue of a year.

    Never mix currencies; call reports.rates first
    to read the exchange rates.
    """
    return {"year": year, "tenant": x_tenant, "org": org}


def openapi_of(*tools: Tool) -> tuple[TestClient, dict[str, Any]]:
    http = TestClient(MCPFusion("r", tools=list(tools)).build_app())
    return http, http.get("/openapi.json").json()


def test_operation_descriptions_are_cleaned_docstrings():
    _, spec = openapi_of(reports)
    operation = spec["paths"]["/api/reports/revenue"]
    expected = ("Revenue of a year.\n\nNever mix currencies; call reports.rates first\n"
                "to read the exchange rates.")
    assert operation["post"]["description"] == operation["get"]["description"] == expected


def test_header_and_cookie_parameters_are_documented_on_post_and_get():
    http, spec = openapi_of(reports)
    operation = spec["paths"]["/api/reports/revenue"]
    documented = {
        "x-tenant": {"name": "x-tenant", "in": "header", "required": True,
                     "schema": {"type": "string", "title": "X-Tenant"}},
        "x-org": {"name": "x-org", "in": "header", "required": True, "description": "The organisation",
                  "schema": {"type": "string", "title": "X-Org", "description": "The organisation"}},
        "sid": {"name": "sid", "in": "cookie", "required": False,
                "schema": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Sid"}},
    }
    post = {p["name"]: p for p in operation["post"]["parameters"]}
    get = {p["name"]: p for p in operation["get"]["parameters"]}
    assert post == documented
    assert get == {**documented, "year": {"name": "year", "in": "query", "required": True,
                                          "schema": {"type": "integer"}}}
    # What the document says is what the route needs: without the headers, a 422 naming them.
    refused = http.get("/api/reports/revenue", params={"year": 2024})
    assert refused.status_code == 422
    assert {e["field"] for e in refused.json()["errors"]} == {"header.x-tenant", "header.x-org"}
    answered = http.get("/api/reports/revenue", params={"year": 2024}, headers={"x-tenant": "a", "x-org": "b"})
    assert answered.json() == {"year": 2024, "tenant": "a", "org": "b"}


def test_actions_reading_no_header_document_no_header_parameter():
    _, spec = openapi_of(shop)
    operation = spec["paths"]["/api/shop/where"]
    assert "parameters" not in operation["post"] and operation["get"]["parameters"] == []


@pytest.mark.parametrize("exposition", ["flat", "profiles"])
def test_an_action_added_after_registration_is_routed_as_it_is_listed(exposition):
    """tools/list lists an action added to a tool after the app was built; tools/call answered "Unknown tool"
    for it under the flat and profiles expositions (grouped tools routed it already)."""
    from fastapi.testclient import TestClient

    from mcpfusion import MCPFusion, Tool

    late = Tool("late", description="Late actions", exposition=exposition)

    @late.action(readonly=True)
    async def first() -> str:
        """The first action."""
        return "first"

    client = TestClient(MCPFusion("p", tools=[late]).build_app())

    @late.action()
    async def second() -> str:
        """Added afterwards."""
        return "second"

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}

    def post(method: str, params: dict) -> dict:
        headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": method}
        if method == "tools/call":
            headers["mcp-name"] = params["name"]
        return client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                          "params": {**params, "_meta": meta}}).json()

    listed = {tool["name"] for tool in post("tools/list", {})["result"]["tools"]}
    assert "late_second" in listed
    answer = post("tools/call", {"name": "late_second", "arguments": {}})
    assert answer["result"]["isError"] is False and answer["result"]["content"][0]["text"] == "second", answer
    assert post("tools/call", {"name": "late_first", "arguments": {}})["result"]["content"][0]["text"] == "first"
