"""Black-box probes of the documented API: confirmation templates filled with validated arguments and checked
at declaration, completion results checked against MCP, JSON resources without NaN, raw tools refused twice
and validated by their signature, prompt dicts without a role refused, chart template slots named."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcpfusion import Context, MCPFusion, Tool, ui
from mcpfusion.testing import ToolTester

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"}}


def http_client(fusion: MCPFusion) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=fusion.build_app()), base_url="http://127.0.0.1")


async def rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC request on the sessionless 2026-07-28 wire: its whole reply."""
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
               "mcp-method": method}
    if method == "tools/call":
        headers["mcp-name"] = params["name"]
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    return (await http.post("/mcp", headers=headers, json=body)).json()  # type: ignore[no-any-return]


# -- confirmation templates -------------------------------------------------------------------------------


async def test_a_confirmation_question_is_filled_with_the_validated_arguments():
    payments = Tool("payments")

    @payments.action(destructive=True, confirm="Refund {amount_cents:,} cents?")
    async def refund(amount_cents: int) -> str:
        """Refund."""
        return f"refunded {amount_cents}"

    asked = await ToolTester([payments]).call("payments", "refund", {"amount_cents": "100000"})  # numeric text
    assert asked.error_code == "CONFIRMATION_REQUIRED", asked.text
    assert 'Ask the user: "Refund 100,000 cents?"' in asked.text


async def test_an_optional_argument_not_sent_reads_none_in_the_question():
    billing = Tool("billing")

    @billing.action(destructive=True, confirm="Void invoice {id} (reason: {reason})?")
    async def void_invoice(id: str, reason: str | None = None) -> str:
        """Void an invoice."""
        return f"voided {id}"

    asked = await ToolTester([billing]).call("billing", "void_invoice", {"id": "inv_1"})
    assert asked.error_code == "CONFIRMATION_REQUIRED"
    assert 'Ask the user: "Void invoice "inv_1" (reason: none)?"' in asked.text and "{reason}" not in asked.text


@pytest.mark.parametrize(("template", "refused"), [
    ("Rename to {name:,}?", "{name:,} cannot show a value of name's declared type"),  # ',' of a str
    ("Refund {amount:zz}?", "{amount:zz} cannot show a value of amount's declared type"),
    ("Refund {amount!z}?", "{amount!z} cannot show a value of amount's declared type"),
    ("Refund {amount:d} ({rate:d})?", "{rate:d} cannot show a value of rate's declared type"),  # 'd' of a float
    ("Tag {tags:>10}?", "{tags:>10} cannot show a value of tags's declared type"),  # a list takes no spec
])
def test_a_format_spec_the_argument_cannot_take_is_a_declaration_error(template, refused):
    shop = Tool("shop")
    with pytest.raises(ValueError, match=refused.replace("{", r"\{").replace("}", r"\}").replace("!", r"\!")):
        @shop.action(destructive=True, confirm=template)
        async def change(name: str = "", amount: int = 0, rate: float = 0.0, tags: list[str] | None = None) -> str:
            """Change."""
            return "changed"


def test_format_specs_that_suit_the_declared_type_are_accepted():
    shop = Tool("shop")

    @shop.action(destructive=True, confirm="Pay {amount:,} at {rate:.2%} (note: {note:>5})?")
    async def pay(amount: int, rate: float, note: str | None = None) -> str:
        """Pay."""
        return "paid"

    assert shop.actions["pay"].confirm


# -- completions ------------------------------------------------------------------------------------------


def completing(result: Any) -> MCPFusion:
    fusion = MCPFusion("code")

    @fusion.prompt()
    def review(code: str, language: str = "python") -> str:
        return code

    @fusion.completion(prompt="review", argument="language")
    def languages(value: str) -> Any:
        return result

    return fusion


async def complete(fusion: MCPFusion) -> dict[str, Any]:
    async with http_client(fusion) as http:
        return await rpc(http, "completion/complete", {"ref": {"type": "ref/prompt", "name": "review"},
                                                       "argument": {"name": "language", "value": "p"}})


@pytest.mark.parametrize("result", [{"values": ["python", "perl"], "total": "many"}, {"values": "python"},
                                    {"total": 2}, "python", 42])
async def test_a_completion_result_mcp_cannot_carry_is_an_internal_error_and_logged(result, caplog):
    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        reply = await complete(completing(result))
    assert "result" not in reply and reply["error"]["code"] == -32603, reply
    assert "completion of 'review' argument 'language' returned a result MCP cannot carry" in caplog.text


@pytest.mark.parametrize(("result", "sent"), [
    (["python", "perl"], {"values": ["python", "perl"], "total": 2, "hasMore": False}),
    ({"values": ["python"], "total": "5", "hasMore": True}, {"values": ["python"], "total": 5, "hasMore": True}),
    ({"values": [f"v{i}" for i in range(150)]}, {"values": [f"v{i}" for i in range(100)], "hasMore": True}),
])
async def test_a_valid_completion_is_sent_as_mcp_writes_it(result, sent):
    reply = await complete(completing(result))
    assert reply["result"]["completion"] == sent


# -- resources --------------------------------------------------------------------------------------------


async def test_a_json_resource_writes_nan_and_infinities_as_null():
    fusion = MCPFusion("metrics")

    @fusion.resource("metrics://latest", mime_type="application/json")
    def latest() -> dict:
        return {"ratio": float("nan"), "peak": float("inf"), "floor": float("-inf"), "count": 3}

    async with http_client(fusion) as http, Client(streamable_http_client("http://127.0.0.1/mcp",
                                                                          http_client=http)) as client:
        contents = (await client.read_resource("metrics://latest")).contents[0]

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    assert contents.mime_type == "application/json"
    assert json.loads(contents.text, parse_constant=refuse) == {"ratio": None, "peak": None, "floor": None,
                                                                "count": 3}


# -- raw tools --------------------------------------------------------------------------------------------


def test_a_second_raw_tool_of_one_name_is_refused_at_declaration():
    fusion = MCPFusion("media")

    @fusion.raw_tool("thumbnail", description="A thumbnail of an image")
    def thumbnail() -> str:
        return "thumbnail"

    with pytest.raises(ValueError, match="duplicate raw_tool name 'thumbnail'"):
        @fusion.raw_tool("thumbnail", description="Delete every image")
        def purge() -> str:
            return "purged everything"

    assert fusion.raw_tools["thumbnail"].fn is thumbnail
    fusion.remove_raw_tool("thumbnail")  # the documented way to replace one

    @fusion.raw_tool("thumbnail")
    def replacement() -> str:
        return "new"

    assert fusion.raw_tools["thumbnail"].fn is replacement


def weather() -> MCPFusion:
    fusion = MCPFusion("weather")

    @fusion.raw_tool("forecast", description="The forecast of a city")
    def forecast(city: str, ctx: Context, days: int = 3) -> str:
        return f"{days!r} days of sun in {city} ({type(ctx).__name__})"

    @fusion.raw_tool("open")
    def open_ended(city: str, **more: Any) -> str:
        return f"{city} {sorted(more)}"

    return fusion


async def test_a_raw_tool_without_input_schema_advertises_its_signature():
    async with http_client(weather()) as http:
        tools = {t["name"]: t for t in (await rpc(http, "tools/list", {}))["result"]["tools"]}
    assert tools["forecast"]["inputSchema"] == {
        "type": "object", "additionalProperties": False, "required": ["city"],
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}},
    }  # the Context parameter is the framework's, not an argument
    assert tools["open"]["inputSchema"]["required"] == ["city"]
    assert tools["open"]["inputSchema"].get("additionalProperties", True) is True  # **more takes other arguments


@pytest.mark.parametrize(("name", "arguments", "fields"), [
    ("forecast", {}, [("city", "Field required.")]),
    ("forecast", {"city": "Paris", "days": "many"}, [("days", "Input should be a valid integer")]),
    ("forecast", {"city": "Paris", "weeks": 2}, [("weeks", "Unknown field. Accepted here: city, days.")]),
    ("open", {"more": 1}, [("city", "Field required.")]),
])
async def test_a_raw_tool_without_input_schema_validates_by_its_signature(name, arguments, fields):
    async with http_client(weather()) as http:
        result = (await rpc(http, "tools/call", {"name": name, "arguments": arguments}))["result"]
    text = result["content"][0]["text"]
    assert result["isError"] is True and text.startswith(f'<validation_error action="{name}">'), text
    for field, message in fields:
        assert f'<field name="{field}">{message}' in text
    assert "INTERNAL_ERROR" not in text


async def test_a_raw_tool_gets_its_arguments_validated_and_its_context():
    async with http_client(weather()) as http:
        forecast = (await rpc(http, "tools/call", {"name": "forecast", "arguments": {"city": "Paris", "days": "5"}}))
        more = (await rpc(http, "tools/call", {"name": "open", "arguments": {"city": "Oslo", "b": 1, "a": 2}}))
    assert forecast["result"]["content"] == [{"type": "text", "text": "5 days of sun in Paris (Context)"}]
    assert more["result"]["content"] == [{"type": "text", "text": "Oslo ['a', 'b']"}]


class Opaque:
    """A plain class: pydantic has no validator of it."""


def test_a_raw_tool_parameter_pydantic_cannot_validate_is_a_declaration_error():
    fusion = MCPFusion("raw")
    with pytest.raises(TypeError, match="raw_tool 'bad': parameter 'thing' has the type Opaque"):
        @fusion.raw_tool("bad")
        def bad(thing: Opaque) -> str:
            return "x"


# -- prompts ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("returned", [
    {"rol": "user", "content": "Review x=1", "urgent": True, "owner": None},  # a typo of "role"
    {"code": "x=1"},  # plain data
    ["Review this", {"content": "no role"}],
])
async def test_a_prompt_dict_without_a_role_is_refused_never_sent_as_a_repr(returned, caplog):
    fusion = MCPFusion("reviews")

    @fusion.prompt()
    def review(code: str) -> Any:
        return returned

    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        async with http_client(fusion) as http, Client(streamable_http_client("http://127.0.0.1/mcp",
                                                                              http_client=http)) as client:
            with pytest.raises(MCPError) as refused:
                await client.get_prompt("review", {"code": "x=1"})
    assert refused.value.error.code == -32603 and "Prompt 'review' returned messages MCP cannot carry" in str(
        refused.value)
    assert "prompt 'review' returned a result MCP cannot carry" in caplog.text and "role" in caplog.text


# -- chart templates --------------------------------------------------------------------------------------


def test_a_chart_template_names_its_title_and_slots_for_a_missing_or_unknown_slot():
    pie = ui.echarts_template({"series": [{"type": "pie", "data": [{"value": ui.slot("paid")},
                                                                    {"value": ui.slot("due")}]}]}, title="Invoices")
    with pytest.raises(TypeError, match=r"echarts template 'Invoices' takes the slots due, paid: missing paid; "
                                        r"unknown payd"):
        pie(payd=12.5, due=1)
    with pytest.raises(TypeError, match=r"takes the slots due, paid: unknown unpaid"):
        pie(paid=1, due=2, unpaid=3)
    untitled = ui.echarts_template({"value": ui.slot("v")})
    with pytest.raises(TypeError, match=r"an echarts template \(no title\) takes the slots v: missing v"):
        untitled()
    assert pie(paid=1, due=2) == ui.echarts({"series": [{"type": "pie", "data": [{"value": 1}, {"value": 2}]}]},
                                            title="Invoices")
