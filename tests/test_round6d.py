"""Round 6d: `_select` on a hand-written output schema, an output model's field descriptions (MCP, OpenAPI and
the lockfile), the headers and cookies an action requires pinned by the lockfile, and presenter order that
changes no contract."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Cookie, Depends, Header
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

from mcpfusion import MCPFusion, Presenter, Tool, success_structured
from mcpfusion.dispatch import ToolRegistry
from mcpfusion.docs import lock
from mcpfusion.output import selectable, shape
from mcpfusion.schema import without
from mcpfusion.testing import ToolTester

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "m": {"type": "string"}}, "required": ["n"]}


def stats(select: bool) -> Tool:
    tool = Tool("stats", select=select, exposition="flat")

    @tool.action(readonly=True, output_schema=SCHEMA)
    async def count() -> object:
        """Count."""
        return success_structured({"n": 3, "m": "hello"})

    return tool


async def test_select_on_a_hand_written_output_schema_answers_the_fields_asked_for():
    tool = stats(select=True)
    result = await ToolTester([tool]).call("stats", "count", {"_select": ["m"]})
    assert result.error_code is None and result.structured_content == {"m": "hello"}
    [entry] = ToolRegistry([tool]).mcp_tools()
    assert "required" not in entry["outputSchema"]  # what is advertised is what a selection may answer
    rest = TestClient(MCPFusion("stats", tools=[tool]).build_app()).post("/api/stats/count", json={"_select": ["m"]})
    assert rest.status_code == 200 and rest.json() == {"m": "hello"}
    whole = await ToolTester([tool]).call("stats", "count", {})
    assert whole.structured_content == {"n": 3, "m": "hello"}


def test_without_select_a_hand_written_output_schema_is_advertised_as_given():
    assert stats(select=False).actions["count"].output_schema == SCHEMA


def test_selectable_relaxes_what_select_keeps_as_a_derived_schema_does():
    item = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    for many in (True, False, None):  # a list keeps its `items`, its rows' fields are optional
        assert selectable(shape(item, many)) == shape(item, many, optional=True)
        assert selectable(selectable(shape(item, many))) == shape(item, many, optional=True)
    referenced = {"type": "object", "$ref": "#/$defs/A", "$defs": {"A": item}}
    assert "required" not in selectable(referenced) and selectable(referenced)["$defs"]["A"] == item


class Summary(BaseModel):
    """Totals of the shop."""

    total: int = Field(description="Total in CENTS: divide by 100.")
    count: int


class Row(BaseModel):
    total: int = Field(description="Total in CENTS: divide by 100.")


def shop(text: str = "Total in CENTS: divide by 100.") -> Tool:
    class Described(BaseModel):
        total: int = Field(description=text)

    tool = Tool("shop", exposition="flat")

    @tool.action(readonly=True, output_schema=Summary)
    async def summary() -> dict[str, Any]:
        """Totals."""
        return {"total": 12345, "count": 2}

    @tool.action(readonly=True, returns=Described)
    async def described() -> Any:
        """A described total."""
        return Described(total=1)

    @tool.action(readonly=True, returns=Presenter("row").schema(Row))
    async def row() -> dict[str, Any]:
        """A row."""
        return {"total": 12345}

    return tool


def test_an_output_models_field_descriptions_reach_the_agent_openapi_and_the_lockfile():
    tool = shop()
    entries = {e["name"]: e for e in ToolRegistry([tool]).mcp_tools()}
    summary = entries["shop_summary"]["outputSchema"]
    assert summary["properties"]["total"] == {"type": "integer", "description": "Total in CENTS: divide by 100."}
    assert summary["properties"]["count"] == {"type": "integer"}
    assert "description" not in summary  # the model's docstring repeats the action's description
    # A presenter sends its fields' descriptions as domain rules on every answer: not twice.
    assert "description" not in entries["shop_row"]["outputSchema"]["properties"]["total"]
    openapi = TestClient(MCPFusion("shop", tools=[tool]).build_app()).get("/openapi.json").json()
    body = openapi["paths"]["/api/shop/summary"]["post"]["responses"]["200"]["content"]["application/json"]
    assert body["schema"]["properties"]["total"]["description"] == "Total in CENTS: divide by 100."
    changed = lock.diff(lock.contract(ToolRegistry([tool])), lock.contract(ToolRegistry([shop("Total in euros.")])))
    assert changed == ["shop.described: output schema changed"]


def needs_key(x_api_key: str = Header()) -> str:
    return x_api_key


def optional_key(x_api_key: str | None = Header(default=None)) -> str | None:
    return x_api_key


def maybe_session(session: str | None = Cookie(default=None)) -> str | None:
    return session


def nothing() -> None:
    return None


def keyed(key: str | None, cookie: bool = False) -> ToolRegistry:
    """An action whose dependency requires the header x-api-key (`key` "required"), takes it optionally
    ("optional") or does not read it (None); with `cookie`, another reads the cookie `session` if sent."""
    tool = Tool("shop")
    reader = {"required": needs_key, "optional": optional_key, None: nothing}[key]
    session = maybe_session if cookie else nothing

    @tool.action(readonly=True)
    async def summary(key: Any = Depends(reader), session: Any = Depends(session)) -> dict[str, Any]:
        """Totals."""
        return {"total": 5}

    return ToolRegistry([tool])


def test_the_lockfile_pins_the_headers_and_cookies_an_action_requires():
    plain, required = lock.contract(keyed(None)), lock.contract(keyed("required", cookie=True))
    assert "request_parameters" not in plain["tools"]["shop"]["actions"]["summary"]
    assert required["tools"]["shop"]["actions"]["summary"]["request_parameters"] == [
        {"in": "cookie", "name": "session", "required": False,
         "schema": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        {"in": "header", "name": "x-api-key", "required": True, "schema": {"type": "string"}}]
    assert lock.diff(plain, required) == ['shop.summary: new optional cookie "session"',
                                          'shop.summary: new required header "x-api-key"']
    assert lock.diff(lock.contract(keyed("optional")), lock.contract(keyed("required"))) == [
        'shop.summary: header "x-api-key" is now required',
        'shop.summary: header "x-api-key" changed: {"anyOf": [{"type": "string"}, {"type": "null"}]} -> '
        '{"type": "string"}']
    assert lock.diff(required, plain) == ['shop.summary: cookie "session" is no longer read',
                                          'shop.summary: header "x-api-key" is no longer read']


class Customer(BaseModel):
    id: str
    email: str


def audiences(swapped: bool) -> ToolRegistry:
    admin = Presenter("admin").schema(Customer)
    support = Presenter("support").schema(Customer).redact_pii(["email"])
    tool = Tool("crm", select=True)

    async def chosen() -> Presenter:
        return admin

    views = [support, admin] if swapped else [admin, support]

    @tool.action(readonly=True, returns=chosen, presenters=views)
    async def get(id: str) -> dict[str, Any]:
        """One customer."""
        return {}

    @tool.action("list", readonly=True, returns=chosen, presenters=views)
    async def list_all() -> list[dict[str, Any]]:
        """Customers."""
        return []

    return ToolRegistry([tool])


def test_the_order_presenters_are_listed_in_is_no_change_of_contract():
    before, after = lock.contract(audiences(False)), lock.contract(audiences(True))
    assert audiences(False).mcp_tools() == audiences(True).mcp_tools()  # what a client sees is the same
    assert lock.diff(before, after) == [] and before["digest"] == after["digest"]
    assert lock.dumps(before) == lock.dumps(after)  # the lockfile itself does not churn
    # A lockfile written in another order (by an older mcpfusion) still matches.
    action = before["tools"]["crm"]["actions"]["get"]
    older = json.loads(lock.dumps(before))
    older["tools"]["crm"]["actions"]["get"]["output_schema"]["anyOf"] = action["output_schema"]["anyOf"][::-1]
    assert lock.diff(lock.resealed(older), after) == []


def test_a_lockfile_of_format_3_reads_as_one_format_change():
    """Written before headers and output models' descriptions were pinned: one line, not an "output schema
    changed" per typed action nor a "new required header" per keyed one; a real change is still named."""
    tool = shop()

    @tool.action(readonly=True)
    async def keyed_total(key: str = Depends(needs_key)) -> dict[str, Any]:
        """Keyed."""
        return {}

    served = lock.contract(ToolRegistry([tool]))
    older = json.loads(lock.dumps(served))
    older["mcpfusion_lock"] = 3
    for action in older["tools"]["shop"]["actions"].values():
        action.pop("request_parameters", None)
        action.pop("security", None)
        action["output_schema"] = without(action["output_schema"], {"description"})
    for advertised in older["tools"]["shop"]["advertised"].values():
        if advertised["output_schema"]:  # (the digest of the schema as it was: without the descriptions)
            advertised["output_schema"] = "sha256:0000000000000000"
    older = lock.resealed(older)
    assert lock.diff(older, served) == [
        f"lockfile format 3 -> {lock.FORMAT} (now pinned: "
        + "; ".join(what for number, what in sorted(lock.FORMATS.items()) if number > 3) + ")"]
    older["tools"]["shop"]["actions"]["summary"]["description"] = "Sums."
    assert lock.diff(lock.resealed(older), served)[1:] == ['shop.summary: description "Sums." -> "Totals."']
