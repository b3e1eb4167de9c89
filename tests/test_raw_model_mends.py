"""Raw tools' input schemas matched in linear time, their validation errors bounded, a result dict without
"content" refused; a Model's model validator reading a field an operation does not take refused at declaration."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, model_validator

from mcpfusion import Flatten, MCPFusion, Model, Tool
from mcpfusion.testing import ToolTester
from tests.test_runtime_mends import client, tools_call

EVIL = "^([a-z0-9]+)+$"  # catastrophic backtracking for Python's `re` on "aaa...a-"
# Backtracking would take about 2**64 steps on this: it only returns at all when matched in linear time (a
# regression hangs until pytest-timeout stops it, rather than a timed assertion on a shared machine).
ATTACK = "a" * 64 + "-"


def _raw_app(schema: dict[str, Any]) -> Any:
    fusion = MCPFusion("raw")

    @fusion.raw_tool("lookup", input_schema=schema)
    async def lookup(**arguments: Any) -> str:
        return "found"

    return fusion.build_app()


@pytest.mark.parametrize(("schema", "arguments"), [
    ({"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}}, {"code": ATTACK}),
    ({"type": "object", "patternProperties": {EVIL: {"type": "integer"}}, "additionalProperties": False},
     {ATTACK: 1}),
    ({"type": "object", "propertyNames": {"pattern": EVIL}}, {ATTACK: 1}),
])
async def test_a_raw_tools_patterns_are_matched_in_linear_time(schema, arguments):
    async with client(_raw_app(schema)) as http:
        refused = await tools_call(http, "lookup", arguments)
        good = await tools_call(http, "lookup", {"code": "abc"} if "properties" in schema else {"abc": 1})
    assert refused["isError"] is True and "<validation_error" in refused["content"][0]["text"]
    assert good == {**good, "isError": False, "content": [{"type": "text", "text": "found"}]}


@pytest.mark.parametrize(("schema", "says"), [
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?=x)x+$"}}}, "look-around"),
    ({"type": "object", "patternProperties": {r"(a)\1": {}}}, "backreferences"),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
      "patternProperties": {"(?!a)": {}}}, "look-around"),
    ({"type": "object", "patternProperties": {"^a": {}}, "unevaluatedProperties": False}, "unevaluatedProperties"),
])
def test_a_pattern_the_linear_time_engine_cannot_match_is_refused_at_declaration(schema, says):
    fusion = MCPFusion("raw")
    with pytest.raises(ValueError, match=f"raw_tool 'bad': input_schema.*{says}"):
        fusion.raw_tool("bad", input_schema=schema)(lambda: "x")
    assert fusion.raw_tools == {}


async def test_a_raw_tools_validation_error_never_grows_with_what_was_sent():
    app = _raw_app({"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}},
                    "additionalProperties": False})
    async with client(app) as http:
        long = (await tools_call(http, "lookup", {"name": "A" * 200_000}))["content"][0]["text"]
        flood = (await tools_call(http, "lookup", {f"k{i}": 1 for i in range(20_000)}))["content"][0]["text"]
        short = (await tools_call(http, "lookup", {"name": "A" * 11, "x": 1}))["content"][0]["text"]
    assert len(long) < 1000 and "is too long" in long and "A" * 150 not in long
    assert len(flood) < 3000 and flood.count("<field ") == 21
    assert '<field name="k0">Unknown field. Accepted here: name.</field>' in flood
    assert "19980 more fields are not valid either" in flood
    assert '<field name="x">Unknown field. Accepted here: name.</field>' in short
    assert "'AAAAAAAAAAA' is too long. You sent: \"AAAAAAAAAAA\"." in short


async def test_a_raw_result_dict_without_content_is_an_internal_error_never_a_repr(caplog):
    fusion = MCPFusion("raw")

    @fusion.raw_tool("info")
    async def info() -> dict:
        return {"id": "img_1", "secret": "hunter2"}

    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        async with client(fusion.build_app()) as http:
            result = await tools_call(http, "info", {})
    text = result["content"][0]["text"]
    assert result["isError"] is True and 'code="INTERNAL_ERROR"' in text and "img_1" not in text
    assert "raw tool info returned a result that is not an MCP CallToolResult (at content)" in caplog.text
    assert "hunter2" not in caplog.text


class Account(BaseModel):
    id: str
    plan: str = "free"
    seats: int = 1
    owner_id: str | None = None  # set by the server

    @model_validator(mode="after")
    def gold_needs_owner(self) -> Account:
        if self.plan == "gold" and self.owner_id is None:
            raise ValueError("a gold account needs an owner")
        return self


class Seats(BaseModel):
    id: str
    seats: int = 1
    owner_id: str | None = None

    @model_validator(mode="before")
    @classmethod
    def no_owner(cls, data: Any) -> Any:  # reads the input dict: fine whatever the operation leaves out
        if isinstance(data, dict) and data.get("seats", 1) < 1:
            raise ValueError("at least one seat")
        return data

    @model_validator(mode="after")
    def positive(self) -> Seats:
        self._check()
        return self

    def _check(self) -> None:
        if self.seats > 100:
            raise ValueError("at most 100 seats")


def test_a_model_validator_reading_a_field_an_operation_leaves_out_is_refused():
    with pytest.raises(ValueError, match=r"model validator gold_needs_owner reads \['owner_id'\], which the "
                                         "'create' operation does not take"):
        Model(Account, guarded=["owner_id"], fillable={"create": ["id", "plan"]})
    Model(Account, fillable={"create": ["id", "plan", "owner_id"]})  # it reads only what the operation takes
    with pytest.raises(ValueError, match=r"model validator positive reads \['seats'\]"):  # through self._check()
        Model(Seats, fillable={"rename": ["id"]})


CreateSeats = Model(Seats, guarded=["owner_id"], fillable={"create": ["id", "seats"]}).input_model("create")


async def test_a_model_validator_reading_only_the_operations_fields_still_runs():
    tool = Tool("t")

    @tool.action()
    async def make(data: Annotated[CreateSeats, Flatten]) -> str:  # type: ignore[valid-type]
        """Make an account."""
        return f"made {data.id}"

    tester = ToolTester([tool])
    made = await tester.call("t", "make", {"id": "a1", "seats": 3})
    too_many = await tester.call("t", "make", {"id": "a1", "seats": 300})
    none = await tester.call("t", "make", {"id": "a1", "seats": 0})
    assert not made.is_error and made.text == "made a1"
    assert too_many.error_code == "VALIDATION_ERROR" and "at most 100 seats" in too_many.text
    assert none.error_code == "VALIDATION_ERROR" and "at least one seat" in none.text


async def test_an_actions_input_schema_is_matched_in_linear_time_with_bounded_faults():
    """`input_schema=` on an action goes through the same checks as a raw tool's schema."""
    from mcpfusion import Tool
    from mcpfusion.testing import ToolTester

    codes = Tool("codes", description="Codes")

    @codes.action(readonly=True, input_schema={"type": "object", "properties": {
        "code": {"type": "string", "pattern": EVIL, "maxLength": 80}}, "additionalProperties": False})
    async def check(code: str) -> str:
        """Check a code."""
        return "valid " + code

    tester = ToolTester([codes])
    refused = await tester.call("codes", "check", {"code": ATTACK})
    assert refused.error_code == "VALIDATION_ERROR" and "pattern" in refused.text
    flood = await tester.call("codes", "check", {"code": "A" * 200_000, **{f"k{i}": 1 for i in range(5_000)}})
    assert flood.error_code == "VALIDATION_ERROR" and len(flood.text) < 5_000
    assert (await tester.call("codes", "check", {"code": "abc"})).text == "valid abc"
    with pytest.raises(ValueError, match="look-around"):
        codes.action(name="bad", input_schema={"type": "object", "properties": {
            "x": {"type": "string", "pattern": "^(?=x)x+$"}}})(check)
