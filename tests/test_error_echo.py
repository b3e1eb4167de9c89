"""Errors quote back what was sent, but never grow with it: names and ids are cut short, a flood of bad
fields is counted rather than listed, and each wording fits the mistake it answers."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

import httpx
from pydantic import BaseModel, Field, model_validator
from starlette.requests import Request

from mcpfusion import Flatten, Page, Presenter, Tool, ToolError
from mcpfusion.app import MCPFusion
from mcpfusion.testing import ToolTester

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}


class Line(BaseModel, extra="forbid"):
    description: str
    unit_price_cents: int


class Row(BaseModel):
    name: str


def shop() -> Tool:
    tool = Tool("shop", description="Shop", select=True)

    @tool.action(readonly=True, returns=Presenter("row").schema(Row))
    async def search(text: str = "") -> list:
        """Search"""
        return [{"name": text}]

    @tool.action(destructive=False)
    async def order(lines: list[Line]) -> dict:
        """Order lines"""
        return {"lines": len(lines)}

    @tool.action(readonly=True)
    async def totals() -> dict:
        """Totals"""
        return {"total": 0}

    return tool


async def rest_and_mcp(fusion: MCPFusion, tool: str, action: str) -> tuple[httpx.Response, httpx.Response]:
    """One call of `tool`'s `action` over REST and over the 2026 MCP wire, on the app `fusion` builds."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fusion.build_app()),
                                 base_url="http://127.0.0.1") as http:
        rest = await http.post(f"/api/{tool}/{action}", json={})
        mcp = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": tool, "arguments": {"action": action}, "_meta": META}}, headers={
            "accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
            "mcp-name": tool})
    return rest, mcp


def shop_tester() -> ToolTester:
    return ToolTester(MCPFusion("shop", tools=[shop()]).registry)


async def test_a_flood_of_unknown_fields_is_counted_not_listed():
    result = await shop_tester().call("shop", "search", {f"k{i}": i for i in range(100_000)})
    assert result.error_code == "VALIDATION_ERROR"
    assert len(result.text) < 5_000
    assert result.text.count("<field name=") == 21 and "99980 more fields are not valid either" in result.text


async def test_long_names_and_actions_are_echoed_cut_short():
    long_key = await shop_tester().call("shop", "search", {"k" * 1_000_000: 1})
    long_action = await shop_tester().call("shop", "x" * 1_000_000, {})
    assert long_key.error_code == "VALIDATION_ERROR" and len(long_key.text) < 2_000
    assert long_action.error_code == "UNKNOWN_ACTION" and len(long_action.text) < 2_000
    app = MCPFusion("shop", tools=[shop()], json_response=True).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        for name, arguments in (("t" * 1_000_000, {}), ("shop", {"action": "y" * 1_000_000})):
            reply = await http.post("/mcp", headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                                                     "mcp-name": name, "accept": "application/json"},
                                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                          "params": {"name": name, "arguments": arguments, "_meta": META}})
            assert reply.status_code in (200, 400) and len(reply.content) < 3_000, reply.text[:300]


async def test_a_null_action_is_a_missing_one_and_others_are_quoted_as_json():
    registry = MCPFusion("shop", tools=[shop()]).registry
    request = Request({"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""})
    null = await registry.call("shop", {"action": None}, request, raise_http=False)
    listed = await registry.call("shop", {"action": ["search"]}, request, raise_http=False)
    assert null.view.error_code == "MISSING_DISCRIMINATOR"
    assert listed.view.error_code == "UNKNOWN_ACTION" and 'has no action ["search"].' in listed.text
    bad_select = await shop_tester().call("shop", "search", {"_select": ["name", 3]})
    assert bad_select.error_code == "VALIDATION_ERROR" and 'You sent: ["name", 3].' in bad_select.text


async def test_unknown_field_wording_fits_where_it_was_sent():
    nested = await shop_tester().call("shop", "order", {"lines": [{"description": "x", "unit_price_cents": 1,
                                                              "amount_cents": 5}]})
    no_arguments = await shop_tester().call("shop", "totals", {"extra": 1})
    assert nested.error_code == no_arguments.error_code == "VALIDATION_ERROR"
    assert "lines[0].amount_cents" in nested.text and "lines[0] takes description, " in nested.text
    assert "This action accepts" not in nested.text
    # (its tool has _select: the one parameter it takes; a tool without it says it takes no arguments)
    assert "This action accepts: _select." in no_arguments.text and "accepts: ." not in no_arguments.text


async def test_a_boolean_is_never_read_as_a_number():
    calc = Tool("calc", description="Numbers")

    @calc.action(readonly=True)
    async def add(a: int, b: float | None = None, c: list[int] | None = None, flag: bool = False,
                  either: int | str = 0) -> dict:
        """Add"""
        return {"a": a, "b": b, "c": c, "flag": flag, "either": either}

    t = ToolTester(MCPFusion("calc", tools=[calc, shop()]).registry)
    nested = await t.call("shop", "order", {"lines": [{"description": "x", "unit_price_cents": True}]})
    top = await t.call("calc", "add", {"a": False, "b": True, "c": [1, True]})
    fine = await t.call("calc", "add", {"a": "7", "b": 1, "c": [2], "flag": True, "either": "x"})
    assert nested.error_code == top.error_code == "VALIDATION_ERROR"
    assert "lines[0].unit_price_cents" in nested.text and "not true or false" in nested.text
    assert all(p in top.text for p in ('name="a"', 'name="b"', 'name="c[1]"'))
    # Numeric text stays accepted (as FastAPI reads JSON bodies); a declared bool is left alone.
    assert not fine.is_error and fine.data == {"a": 7, "b": 1.0, "c": [2], "flag": True, "either": "x"}


async def test_a_boolean_is_not_a_number_in_a_mapping_a_tuple_or_a_union_with_text_either():
    calc = Tool("calc", description="Numbers")

    @calc.action(readonly=True)
    async def tally(counts: dict[str, int] | None = None, pair: tuple[int, float] | None = None,
                    either: int | str | None = None, amount: Decimal | None = None,
                    flags: dict[str, bool] | None = None, mixed: tuple[bool, int] | None = None) -> dict:
        """Tally"""
        return {"counts": counts, "pair": pair, "either": either, "amount": amount, "flags": flags, "mixed": mixed}

    t = ToolTester(MCPFusion("calc", tools=[calc]).registry)
    wrong = await t.call("calc", "tally", {"counts": {"a": 1, "b": True}, "pair": [True, 2], "either": False,
                                           "amount": True, "mixed": [True, False]})
    assert wrong.error_code == "VALIDATION_ERROR"
    for name in ("counts.b", "pair[0]", "either", "amount", "mixed[1]"):
        assert f'name="{name}"' in wrong.text, wrong.text
    assert 'name="counts.a"' not in wrong.text and 'name="mixed[0]"' not in wrong.text
    fine = await t.call("calc", "tally", {"counts": {"a": 1}, "pair": [1, 2.5], "either": "x", "amount": "1.50",
                                          "flags": {"on": True}, "mixed": [True, 3]})
    assert not fine.is_error, fine.text
    assert fine.data["flags"] == {"on": True} and list(fine.data["mixed"]) == [True, 3] and fine.data["either"] == "x"


class CentsLine(BaseModel):
    cents: int


class Fee(BaseModel):
    kind: Literal["fee"]
    cents: int


class Refund(BaseModel):
    kind: Literal["refund"]
    cents: int
    note: str = ""


async def test_a_boolean_is_not_a_number_in_a_union_mixing_numbers_and_objects_or_arrays():
    calc = Tool("calc", description="Numbers")

    @calc.action(readonly=True)
    async def mixed(a: int | list[int] | None = None, b: int | CentsLine | None = None,
                    c: Annotated[Fee | Refund, Field(discriminator="kind")] | None = None,
                    d: bool | int | None = None, e: Literal[1, True] | None = None) -> dict:
        """Mixed"""
        return {"a": a, "d": d, "e": e}

    t = ToolTester(MCPFusion("calc", tools=[calc]).registry)
    for arguments, name in (({"a": True}, "a"), ({"a": [1, True]}, "a[1]"), ({"b": False}, "b"),
                            ({"b": {"cents": True}}, "b.cents"), ({"c": {"kind": "refund", "cents": True}}, "c.cents")):
        wrong = await t.call("calc", "mixed", arguments)
        assert wrong.error_code == "VALIDATION_ERROR" and f'name="{name}"' in wrong.text, (arguments, wrong.text)
    fine = await t.call("calc", "mixed", {"a": [1, 2], "b": {"cents": 3}, "c": {"kind": "fee", "cents": 4},
                                          "d": True, "e": True})
    assert not fine.is_error and fine.data == {"a": [1, 2], "d": True, "e": True}, fine.text


async def test_an_object_json_cannot_hold_is_an_internal_error_never_its_repr():
    class Conn:
        def __repr__(self) -> str:
            return "Conn(dsn='postgresql://admin:hunter2@db/prod')"

    leaky = Tool("leaky", description="x")

    @leaky.action(readonly=True)
    async def conn() -> dict:
        """Conn"""
        return {"conn": Conn()}

    fusion = MCPFusion("leaky", tools=[leaky], json_response=True)
    tested = await ToolTester(fusion.registry).call("leaky", "conn", {})
    assert tested.error_code == "INTERNAL_ERROR" and "hunter2" not in tested.text
    rest, mcp = await rest_and_mcp(fusion, "leaky", "conn")
    assert rest.status_code == 500 and "hunter2" not in rest.text
    assert mcp.json()["result"]["isError"] and "hunter2" not in mcp.text



class NewTask(BaseModel):
    title: str = Field(alias="taskTitle")
    start: int = 0
    end: int = 10

    @model_validator(mode="after")
    def ordered(self) -> NewTask:
        if self.end < self.start:
            raise ValueError("end must be >= start")
        return self


async def test_a_flattened_model_keeps_its_validators_and_aliases():
    tasks = Tool("tasks", description="Tasks")

    @tasks.action(destructive=False)
    async def create(task: Annotated[NewTask, Flatten]) -> dict:
        """Create a task"""
        return task.model_dump(by_alias=True)

    t = ToolTester(MCPFusion("tasks", tools=[tasks]).registry)
    made = await t.call("tasks", "create", {"taskTitle": "x", "start": 1})
    backwards = await t.call("tasks", "create", {"taskTitle": "x", "start": 5, "end": 1})
    by_name = await t.call("tasks", "create", {"title": "x"})
    assert made.data == {"taskTitle": "x", "start": 1, "end": 10}
    assert backwards.error_code == "VALIDATION_ERROR" and "end must be >= start" in backwards.text
    assert by_name.error_code == "VALIDATION_ERROR" and "accepts: taskTitle, start, end" in by_name.text


async def test_an_http_exception_reads_the_same_on_mcp_and_rest_and_a_5xx_detail_stays_in():
    from fastapi import HTTPException

    raising = Tool("raising", description="x")

    @raising.action(readonly=True)
    async def find(kind: str) -> dict:
        """Find"""
        if kind == "missing":
            raise HTTPException(404, "Order 7 was not found.")
        if kind == "busy":
            raise HTTPException(409, {"field": "state", "expected": "open"})
        raise HTTPException(500, "db at postgresql://admin:hunter2@db failed")

    fusion = MCPFusion("raising", tools=[raising], json_response=True)
    t = ToolTester(fusion.registry)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fusion.build_app()),
                                 base_url="http://127.0.0.1") as http:
        for kind, status, code in (("missing", 404, "NOT_FOUND"), ("busy", 409, "CONFLICT"),
                                   ("boom", 500, "INTERNAL_ERROR")):
            tested = await t.call("raising", "find", {"kind": kind})
            rest = await http.post("/api/raising/find", json={"kind": kind})
            assert tested.error_code == rest.json()["code"] == code and rest.status_code == status, kind
            assert "hunter2" not in tested.text and "hunter2" not in rest.text
            assert "Check the URL" not in rest.text
        busy = await t.call("raising", "find", {"kind": "busy"})
        assert '{"field":"state","expected":"open"}' in busy.text and "{'field'" not in busy.text


async def test_the_tester_calls_through_the_served_registry_however_it_is_given():
    from mcpfusion import ToolError as Refused

    counter = Tool("counter", description="x", exposition="flat")

    @counter.action(readonly=True)
    async def a(x: int) -> int:
        """A"""
        return x

    async def no_thirteen(call, call_next):
        if call.arguments.get("x") == 13:
            raise Refused("FORBIDDEN", "13 is refused by the app's middleware.")
        return await call_next(call)

    fusion = MCPFusion("f", tools=[counter], middleware=[no_thirteen])
    app = fusion.build_app()
    for tester in (ToolTester(fusion), ToolTester(app), ToolTester([counter], app=app)):
        refused = await tester.call("counter", "a", {"x": 13})
        assert refused.error_code == "FORBIDDEN", tester
        assert (await tester.call("counter", "a", {"x": 1})).data == 1
        unknown = await tester.call("nope", "a", {})
        assert unknown.error_code == "UNKNOWN_TOOL" and unknown.is_error
    assert (await ToolTester([counter]).call("counter", "a", {"x": 13})).data == 13  # no app: no app middleware


async def test_a_handler_returning_an_iterator_gives_every_transport_its_rows():
    rows = Tool("rows", description="x")

    @rows.action(readonly=True)
    def numbers() -> list[int]:
        """Numbers"""
        return iter([1, 2, 3])  # type: ignore[return-value]

    fusion = MCPFusion("rows", tools=[rows], json_response=True)
    tested = await ToolTester(fusion).call("rows", "numbers", {})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fusion.build_app()),
                                 base_url="http://127.0.0.1") as http:
        rest = await http.post("/api/rows/numbers", json={})
    assert tested.data == [1, 2, 3] and rest.json() == [1, 2, 3]


async def test_an_error_detail_json_cannot_hold_never_breaks_the_error():
    class Ref:
        def __str__(self) -> str:
            return "ref-42"

    failing = Tool("failing", description="x")

    @failing.action(readonly=True)
    async def a() -> dict:
        """A"""
        raise ToolError("CONFLICT", "Not now.", details={"ref": Ref(), "when": "later"})

    fusion = MCPFusion("failing", tools=[failing], json_response=True)
    tested = await ToolTester(fusion).call("failing", "a", {})
    rest, mcp = await rest_and_mcp(fusion, "failing", "a")
    assert tested.error_code == "CONFLICT" and "ref-42" in tested.text
    assert rest.status_code == 409 and rest.json()["details"] == {"ref": "ref-42", "when": "later"}
    assert mcp.status_code == 200 and mcp.json()["result"]["isError"] and "ref-42" in mcp.text


async def test_an_unknown_field_names_every_parameter_the_action_takes():
    """The framework's own parameters count: a page's cursor and the tool's _select."""


    crm = Tool("crm", description="CRM", select=True)

    @crm.action(readonly=True, returns=Presenter("c").schema({"id": str}), paginate=10)
    async def search(page: Page, q: str = "") -> list[dict]:
        """Search"""
        return []

    refused = await ToolTester([crm]).call("crm", "search", {"bogus": 1})
    assert "Unknown field. This action accepts: q, cursor, _select." in refused.text
