"""Round 7 (censor, 2): the block guard censors a redacted number in the forms Python writes an amount in, and
a redacted value holding a lone surrogate makes no scrubber fail.

1. `redact_pii(["salary"])` with `ui.summary(f"Salary {e['salary']:,} EUR")` or a rule `f"{salary:.2f}"`: the
   UI block, rule and suggestion hold no copy of the number (`85,000`, `85000.00`, `85_000`), on every wire,
   and a match censors the whole number token (never `[REDACTED].00`), as an attached document is censored.
2. A redacted value with a lone surrogate in a row `limit()` cuts, with a document attached: the call answers
   cleanly, the document censored.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from mcpfusion import MCPFusion, Presenter, Tool, attach, document, suggest, ui
from mcpfusion.censor import _data_forms, _document_forms, scrub_blocks, scrub_error, scrubber
from mcpfusion.errors import ToolError
from mcpfusion.mcp.stdio import StdioBridge
from tests.stdio_lines import Lines
from tests.wire_kit import every_wire

CENSOR = "[REDACTED]"
SALARY, BONUS = 85000, 12345.5
SHOWN = ("85000", "85,000", "85_000", "12345.5", "12,345.5", "12345.50", "12,345.50", "12_345.5")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}


def hr_app() -> Any:
    view = (Presenter("emp").schema({"id": str, "salary": int, "bonus": float}).redact_pii(["salary", "bonus"])
            .ui(lambda e: ui.summary(f"Salary {e['salary']:,} EUR, bonus {e['bonus']:,.2f}"))
            .rules(lambda e: [f"Band: above {e['salary']:.2f}", f"Bonus {e['bonus']:_} (ledger {e['bonus']:.3f})"])
            .suggest(lambda e: [suggest("hr.get", f"Review {e['salary']:_.2f} against {e['bonus']!r}")]))
    hr = Tool("hr")

    @hr.action(readonly=True, returns=view)
    async def get(id: str) -> dict[str, Any]:
        """Get an employee."""
        row = {"id": id, "salary": SALARY, "bonus": BONUS}
        return attach(row, document(f"Salary {row['salary']:,} EUR, bonus {row['bonus']:,.2f}", "text/plain",
                                    uri="mem://slip"))

    return MCPFusion("hr", tools=[hr]).build_app()


def texts(content: list[dict[str, Any]]) -> list[str]:
    return [c.get("text") or c.get("resource", {}).get("text", "") for c in content]


def assert_no_number(blocks: list[str]) -> None:
    joined = "\n".join(blocks)
    assert not [form for form in SHOWN if form in joined], joined
    assert CENSOR + "." not in joined and CENSOR + "0" not in joined, joined  # no partial token left


# -- 1. a redacted number in the forms Python writes an amount in ------------------------------------------


async def test_a_redacted_number_formatted_as_money_is_censored_in_every_block_on_every_wire() -> None:
    rest, modern, legacy = await every_wire(hr_app(), "hr", "get", {"id": "e1"})
    assert rest.status_code == 200, rest.text
    for result in (modern, legacy):
        blocks = texts(result["content"])
        assert_no_number(blocks)
        assert "Salary [REDACTED] EUR, bonus [REDACTED]" in blocks[1]
        assert "- Band: above [REDACTED]\n" in blocks[2] and "- Bonus [REDACTED] (ledger [REDACTED])" in blocks[2]
        assert "- hr.get: Review [REDACTED] against [REDACTED]" in blocks[3]  # (the action name kept)
        assert blocks[-1] == "Salary [REDACTED] EUR, bonus [REDACTED]"  # the document, as before
    assert_no_number([rest.text])


async def test_stdio_censors_a_redacted_number_formatted_as_money() -> None:
    lines = Lines()
    bridge = StdioBridge(hr_app(), lines.write, headers={})
    await bridge.startup()
    try:
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "hr", "arguments": {"action": "get", "id": "e1"}, "_meta": META}}))
        answer = await lines.wait_for(lambda m: m.get("id") == 3)
        blocks = texts(answer["result"]["content"])
        assert_no_number(blocks)
        assert "Band: above [REDACTED]\n" in blocks[2]
    finally:
        await bridge.close()


def rule(text: str) -> str:
    return f"<domain_rules>\n- pay {text} now\n</domain_rules>"


NUMBERS = [85000, -85000, 12345.5, 85000.0, Decimal("85000.50"), 1234]
SPECS = ["", ",", "_", ".2f", ",.2f", "_.2f"]
# Each number in each form Python writes it in (a Decimal takes no `_` grouping), a float as its repr too.
CASES = [(value, format(value, spec)) for value in NUMBERS for spec in SPECS
         if not (spec.startswith("_") and isinstance(value, Decimal))] + [(12345.5, repr(12345.5)),
                                                                          (85000.0, repr(85000.0)), (85000.0, "85000")]


@pytest.mark.parametrize(("value", "shown"), CASES, ids=[f"{type(v).__name__}-{s}" for v, s in CASES])
def test_each_common_form_of_a_redacted_number_is_censored_in_a_block(value: Any, shown: str) -> None:
    [censored] = scrub_blocks([rule(shown)], [value])
    assert censored == rule(CENSOR), (shown, censored)


@pytest.mark.parametrize(("shown", "expected"), [
    ("85000.000", "[REDACTED]"),  # a form not listed: the whole token still goes
    ("85000.00.", "[REDACTED]."),  # a sentence's full stop is no part of it
    ("185000", "[REDACTED]"),
    ("85,000,000", "[REDACTED]"),
    ("[85000,12]", "[[REDACTED],12]"),  # an ungrouped number does not swallow its neighbour in a JSON list
    ("85000, 12", "[REDACTED], 12"),
])
def test_a_match_censors_the_whole_number_token(shown: str, expected: str) -> None:
    [censored] = scrub_blocks([rule(shown)], [85000])
    assert censored == rule(expected)


def test_a_short_or_tiny_number_censors_no_common_text() -> None:
    """Forms with fewer than MIN_LENGTH significant digits are words: `0.00`, `0.12`, `123.00` stay."""
    blocks = [rule("0.00 and 0.12 and 123.00 and 1.50")]
    assert scrub_blocks(blocks, [1.5e-7, 0.123, 123, 1.5]) == blocks


def test_the_structured_view_says_what_the_wire_says() -> None:
    view = Presenter("v").schema({"id": str, "salary": int}).redact_pii(["salary"]).rules(
        lambda e: [f"Band: above {e['salary']:,.2f}"])
    response = view.present({"id": "e1", "salary": SALARY})
    assert response.view.system_rules == ["Band: above [REDACTED]"]
    assert "85,000" not in "\n".join(response.texts)


def test_an_error_a_callback_raises_is_censored_of_the_same_forms() -> None:
    error = ToolError("OVER_BUDGET", f"salary {SALARY:,.2f} is over the band", recovery=f"ask about {SALARY:_}")
    scrub_error(error, [SALARY])
    assert (error.message, error.recovery) == ("salary [REDACTED] is over the band", "ask about [REDACTED]")


# -- 2. a redacted value with a lone surrogate -----------------------------------------------------------


def test_the_forms_of_a_value_with_a_lone_surrogate_are_made_without_failing() -> None:
    value = "ab\ud800cd"
    assert "ab\\ud800cd" in _data_forms(value)  # escaped as json.dumps does
    assert _document_forms(value)
    assert scrubber([value])('{"name": "ab\\ud800cd"}') == '{"name": "[REDACTED]"}'


def crm_app() -> Any:
    view = Presenter("p").schema({"id": str, "name": str}).redact_pii(["name"]).limit(1)
    crm = Tool("crm")

    @crm.action(readonly=True, returns=view)
    async def export() -> list[dict[str, str]]:
        """The people, with a document of them."""
        rows = [{"id": "c1", "name": "Ada Lovelace"}, {"id": "c2", "name": "ab\ud800cd"}]
        return attach(rows, document("names: Ada Lovelace, ab\\ud800cd", "text/plain", uri="mem://names"))

    return MCPFusion("crm", tools=[crm]).build_app()


async def test_a_cut_row_with_a_lone_surrogate_and_an_attached_document_answers_cleanly() -> None:
    rest, modern, legacy = await every_wire(crm_app(), "crm", "export", {})
    assert rest.status_code == 200, rest.text
    assert rest.json()["content"][-1]["resource"]["text"] == "names: [REDACTED], [REDACTED]"
    for result in (modern, legacy):
        assert not result["isError"], result
        assert texts(result["content"])[-1] == "names: [REDACTED], [REDACTED]"
