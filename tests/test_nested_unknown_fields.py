"""An unknown key inside an argument's object is refused, as one at the root is, naming what that object takes
(docs/tools.md: the advertised schema leaves `additionalProperties: false` out below the root because the server
refuses unknown fields): a misspelt optional field (`qty` for `quantity`) no longer vanishes while the call
succeeds without it. A model that allows extra keys, or reshapes its input itself, still decides."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcpfusion import MCPFusion, Tool
from mcpfusion.testing import ToolTester
from tests.service_kit import build, call


class Address(BaseModel):
    city: str
    zip_code: str = Field("", alias="zipCode")


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    city: str


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str
    zip: str = ""


class Reshaped(BaseModel):
    city: str

    @model_validator(mode="before")
    @classmethod
    def from_town(cls, data: Any) -> Any:
        return {"city": data.pop("town")} if isinstance(data, dict) and "town" in data else data


places = Tool("places", exposition="flat")


@places.action(readonly=True)
async def save(addr: Address, more: list[Address] | None = None, by_name: dict[str, Address] | None = None
               ) -> dict[str, Any]:
    """Save addresses."""
    return {"addr": addr.city, "more": len(more or []), "by_name": sorted(by_name or {})}


@places.action(readonly=True)
async def loose(addr: Loose) -> dict[str, Any]:
    """Keep extra keys."""
    return addr.model_dump()


@places.action(readonly=True)
async def strict(addr: Strict) -> str:
    """Forbid extra keys."""
    return addr.city


@places.action(readonly=True)
async def reshaped(addr: Reshaped) -> str:
    """Reshape its input."""
    return addr.city


tester = ToolTester(MCPFusion("places", tools=[places]).registry)


@pytest.mark.parametrize(("arguments", "where"), [
    ({"addr": {"city": "P", "cty": "x"}}, "addr.cty"),
    ({"addr": {"city": "P"}, "more": [{"city": "Q"}, {"city": "R", "zip": "1"}]}, "more[1].zip"),
    ({"addr": {"city": "P"}, "by_name": {"home": {"city": "Q", "street": "x"}}}, "by_name.home.street"),
])
async def test_an_unknown_nested_key_is_refused_naming_what_the_object_takes(arguments, where):
    result = await tester.call("places", "save", arguments)
    assert result.error_code == "VALIDATION_ERROR", result.text
    assert f'name="{where}"' in result.text and "takes city, zipCode. Remove it." in result.text, result.text


async def test_known_keys_by_alias_and_by_name_pass():
    for addr in ({"city": "P", "zipCode": "75001"}, {"city": "P", "zip_code": "75001"}, {"city": "P"}):
        result = await tester.call("places", "save", {"addr": addr, "more": [addr], "by_name": {"a": addr}})
        assert result.error_code is None, result.text


async def test_a_model_that_allows_extra_keys_or_reshapes_its_input_decides():
    assert (await tester.call("places", "loose", {"addr": {"city": "P", "note": "x"}})).data == {"city": "P",
                                                                                                  "note": "x"}
    assert (await tester.call("places", "reshaped", {"addr": {"town": "P"}})).data == "P"


async def test_a_forbidding_models_refusal_names_what_it_takes_too():
    result = await tester.call("places", "strict", {"addr": {"city": "P", "cty": "x"}})
    assert result.error_code == "VALIDATION_ERROR" and "addr takes city, zip. Remove it." in result.text, result.text


@pytest.mark.parametrize("transport", ["inproc", "rest", "mcp"])
async def test_the_reference_service_refuses_a_misspelt_line_field(tmp_path, transport):
    # `qty` for `quantity`: the invoice would have been created with one of each item.
    app = build(tmp_path)
    created = await call(transport, app, "billing", "create_invoice",
                         {"customer_id": "cus_0001", "due_date": "2031-01-01",
                          "lines": [{"description": "Seats", "unit_price_cents": 500, "qty": 12}]}, "demo-admin")
    assert created.error_code is not None and "lines[0].qty" in created.raw, created
