"""Round 5y: a required aliased parameter is listed as required under the name the agent sends; a `_confirm`
that is not a string is refused as invalid arguments naming it, nothing run; a Decimal's string form
advertises the pattern of the numbers it takes."""

from __future__ import annotations

import decimal
import re
from typing import Annotated

import pytest
from pydantic import AliasChoices, Field

from mcpfusion import MCPFusion, Tool, ToolRegistry
from mcpfusion.confirm import CONFIRM_PARAM
from tests.governance_kit import Caller


def people(**options: object) -> Tool:
    tool = Tool("people", description="People", **options)  # type: ignore[arg-type]

    @tool.action(readonly=True)
    async def greet(first: Annotated[str, Field(alias="firstName")],
                    last: Annotated[str, Field(validation_alias="lastName")],
                    nick: Annotated[str, Field(validation_alias=AliasChoices("nick", "nickname"))],
                    title: Annotated[str, Field(alias="honorific")] = "") -> str:
        """Greet someone."""
        return f"hi {title} {first} {last} {nick}"

    @tool.action(readonly=True)
    async def wave() -> str:
        """Wave."""
        return "wave"

    return tool


def test_a_required_aliased_parameter_is_listed_required_under_its_alias():
    plain, toon = people(), people(toon_description=True)
    entries = {e["description"].split("\n")[0]: e for e in ToolRegistry([plain]).mcp_tools()}
    description = next(iter(entries.values()))["description"]
    assert "greet(firstName,lastName,nick,honorific?)" in description
    assert plain.actions["greet"].required == ["firstName", "lastName", "nick"]
    (entry,) = ToolRegistry([toon]).mcp_tools()
    assert "greet|Greet someone.|firstName,lastName,nick,honorific?" in entry["description"]
    assert set(plain.actions["greet"].required) <= set(entry["inputSchema"]["properties"])


def ledger(voided: list[str]) -> MCPFusion:
    tool = Tool("ledger", exposition="flat")

    @tool.action(destructive=True, confirm="Void invoice {id}?")
    async def void(id: str) -> str:
        """Void an invoice."""
        voided.append(id)
        return f"voided {id}"

    return MCPFusion("confirming", tools=[tool])


@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026"])
async def test_a_confirm_token_that_is_not_a_string_is_invalid_arguments(transport):
    voided: list[str] = []
    caller = Caller(ledger(voided).build_app(), transport, "ledger")
    try:
        for bad in (5, {}, [], True):
            got = await caller.call("void", {"id": "inv_1", CONFIRM_PARAM: bad})
            assert got.code == "VALIDATION_ERROR" and got.status == (422 if transport == "rest" else 200), got.text
            assert f'name="{CONFIRM_PARAM}"' in got.text or f'"{CONFIRM_PARAM}"' in got.text, got.text
        asked = await caller.call("void", {"id": "inv_1", CONFIRM_PARAM: "not-a-token"})
        assert asked.code == "CONFIRMATION_REQUIRED"  # a string is read as a token (this one does not match)
        assert voided == []
    finally:
        await caller.aclose()


def test_a_decimal_string_advertises_the_pattern_of_the_numbers_it_takes():
    tool = Tool("pay", exposition="flat")

    @tool.action(readonly=True)
    async def charge(amount: Annotated[decimal.Decimal, Field(max_digits=5, decimal_places=2)],
                     tip: decimal.Decimal | None = None) -> str:
        """Charge."""
        return str(amount)

    (entry,) = ToolRegistry([tool]).mcp_tools()
    props = entry["inputSchema"]["properties"]
    amount = next(b for b in props["amount"]["anyOf"] if b.get("type") == "string")["pattern"]
    tip = next(b for b in props["tip"]["anyOf"] if b.get("type") == "string")["pattern"]
    assert all(re.search(amount, s) for s in ("123.45", "-0.5", "1.50"))
    assert not any(re.search(amount, s) for s in ("abc", "123.456", "1234.5", ""))  # digit limits too
    assert re.search(tip, "123456.789") and not re.search(tip, "abc")
