"""The perception firewall on every path (tester, REST, MCP 2026-07-28, MCP 2025-11-25): the egress guard,
structured output validated against the advertised schema, `_select` on every representation, redaction
wildcards, typed returns and presenter output schemas (issue #9)."""

from __future__ import annotations

import logging

import jsonschema
import pytest
from pydantic import BaseModel, Field

from mcpfusion import Presenter, Tool, success_structured, suggest, ui
from tests.firewall_kit import PATHS, app_for, every_path, tools_list

EMAIL = "ada@example.com"
PHONE = "+33 1 23 45 67 89"
ROW = {"id": "c1", "name": "Ada", "email": EMAIL, "phone": PHONE, "tier": "gold", "secret": "TOP-SECRET"}


class Customer(BaseModel):
    id: str
    name: str
    email: str = Field(description="Contact email (personal data).")
    phone: str | None = None
    tier: str


def leaky_view() -> Presenter:
    """Every callback copies the redacted values into its block."""
    return (
        Presenter("customer")
        .schema(Customer)
        .redact_pii(["email", "phone"])
        .ui(lambda c: [ui.summary(f"{c['name']} <{c['email']}>"), ui.json({"phone": c["phone"]}),
                       ui.table(["Email"], [[c["email"]]])])
        .rules(lambda c: [f"Write to {c['email']} only."])
        .directives(lambda c: [f"Call {c['phone']} if urgent."])
        .suggest(lambda c: [suggest("crm.mail", f"Mail {c['email']}")])
    )


def assert_no_leak(answers, *values):
    for path, answer in answers.items():
        for value in values:
            assert value not in answer.raw, f"{value!r} leaked on {path}"


# -- 8: the egress guard ---------------------------------------------------------------------------------


async def test_redacted_values_never_leave_through_ui_rules_directives_or_suggestions():
    crm = Tool("crm", description="Customers")

    @crm.action(readonly=True, returns=leaky_view())
    async def get(id: str) -> dict:
        """One customer."""
        return {**ROW, "note": f"Primary contact {EMAIL}"}

    answers = await every_path(app_for(crm), "crm", "get", {"id": "c1"})
    assert set(answers) == set(PATHS)
    assert_no_leak(answers, EMAIL, PHONE, "TOP-SECRET")
    for path in ("inproc", "mcp-2026", "mcp-2025"):
        texts = answers[path].texts
        assert '"email":"[REDACTED]"' in texts[0], path
        assert "Ada <[REDACTED]>" in texts[1] and "- Write to [REDACTED] only." in "\n".join(texts)
        assert "crm.mail: Mail [REDACTED]" in texts[-1]
    assert answers["rest"].data["email"] == "[REDACTED]" and answers["rest"].data["name"] == "Ada"


async def test_guard_censors_copies_inside_structured_data_and_short_values_only_exactly():
    view = (Presenter("p").schema({"code": str, "label": str, "note": str, "code_copy": str})
            .redact_pii(["code", "note"]))
    tool = Tool("t", description="T")

    @tool.action(readonly=True, returns=view)
    async def get() -> dict:
        """One."""
        # "EU" is short: censored where a whole string equals it, never inside other text ("EUROPE").
        return {"code": "EU", "label": "EUROPE; see the note NOTE-12345", "note": "NOTE-12345", "code_copy": "EU"}

    answers = await every_path(app_for(tool), "t", "get")
    expected = {"code": "[REDACTED]", "label": "EUROPE; see the note [REDACTED]", "note": "[REDACTED]",
                "code_copy": "[REDACTED]"}
    for path in ("inproc", "rest", "mcp-2026", "mcp-2025"):
        assert answers[path].error is None, answers[path]
        assert answers[path].data == expected, path
    assert_no_leak(answers, "NOTE-12345")


async def test_guard_opt_out_is_explicit_per_presenter():
    view = Presenter("op").schema(Customer).redact_pii(["email"], guard_blocks=False).ui(
        lambda c: ui.summary(c["email"]))
    tool = Tool("t", description="T")

    @tool.action(readonly=True, returns=view)
    async def get() -> dict:
        """One."""
        return ROW

    answers = await every_path(app_for(tool), "t", "get")
    assert answers["mcp-2026"].data["email"] == "[REDACTED]"
    assert EMAIL in answers["mcp-2026"].texts[1]  # the operator's block, by explicit choice


# -- 6: wildcards beside lists -----------------------------------------------------------------------------


@pytest.mark.parametrize("sibling", [[], ["a"], [{"x": 1}], [{"ssn": "123-45-6789"}]])
async def test_wildcard_redaction_beside_lists(sibling):
    view = Presenter("people").redact_pii(["*.ssn"])
    tool = Tool("t", description="T")

    @tool.action(readonly=True, returns=view)
    async def get() -> dict:
        """One."""
        return {"owner": {"name": "A", "ssn": "987-65-4321"}, "tags": sibling, "plain": "x"}

    answers = await every_path(app_for(tool), "t", "get")
    for path in PATHS:
        assert answers[path].error is None, answers[path]
        assert answers[path].data["owner"] == {"name": "A", "ssn": "[REDACTED]"}
    assert_no_leak(answers, "987-65-4321", "123-45-6789")


# -- 4: structured results are validated -------------------------------------------------------------------


class Totals(BaseModel):
    total: int
    currency: str


def totals_tool() -> Tool:
    tool = Tool("stats", description="Stats")

    @tool.action(readonly=True, output_schema=Totals)
    async def structured():
        """A hand-made structured answer that breaks its schema."""
        return success_structured({"total": "lots", "currency": "EUR"})

    @tool.action(readonly=True, output_schema=Totals)
    async def plain() -> dict:
        """A plain dict that breaks its schema."""
        return {"total": "lots", "currency": "EUR"}

    @tool.action(readonly=True, output_schema={"type": "object", "properties": {"n": {"type": "integer"}},
                                               "required": ["n"]})
    async def hand_schema():
        """A hand-written JSON schema, broken."""
        return {"n": "many"}

    @tool.action(readonly=True, output_schema=Totals)
    async def good():
        """Fits."""
        return success_structured({"total": 3, "currency": "EUR", "extra": "dropped?"})

    return tool


@pytest.mark.parametrize("action", ["structured", "plain", "hand_schema"])
async def test_structured_output_mismatch_is_a_self_healing_error_never_invalid_output(action, caplog):
    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        answers = await every_path(app_for(totals_tool()), "stats", action)
    for path in PATHS:
        assert answers[path].error == "INVALID_OUTPUT", answers[path]
        assert "lots" not in answers[path].raw and "many" not in answers[path].raw
    assert "schema" in caplog.text and "lots" not in caplog.text and "many" not in caplog.text


async def test_valid_structured_output_matches_the_advertised_schema_everywhere():
    app = app_for(totals_tool())
    [entry] = await tools_list(app)
    answers = await every_path(app, "stats", "good")
    for path in ("mcp-2026", "mcp-2025", "rest"):
        jsonschema.validate(answers[path].data, entry["outputSchema"])
        assert answers[path].data["total"] == 3


# -- 7: `_select` shapes every representation --------------------------------------------------------------


async def test_select_shapes_text_structured_content_and_rest_alike():
    tool = Tool("stats", description="Stats", select=True)

    @tool.action(readonly=True, output_schema=Totals)
    async def totals():
        """Totals."""
        return success_structured(Totals(total=3, currency="EUR"))

    @tool.action(readonly=True, returns=Presenter("c").schema(Customer))
    async def customer() -> dict:
        """A customer."""
        return ROW

    app = app_for(tool)
    [entry] = await tools_list(app)
    for action, keys in (("totals", ["total"]), ("customer", ["name"])):
        answers = await every_path(app, "stats", action, {"_select": keys})
        for path in PATHS:
            assert answers[path].error is None, answers[path]
            assert list(answers[path].data) == keys, (path, answers[path].data)
        for path in ("mcp-2026", "mcp-2025"):
            assert list(__import__("json").loads(answers[path].texts[0])) == keys
            jsonschema.validate(answers[path].data, entry["outputSchema"])  # `_select` makes fields optional
