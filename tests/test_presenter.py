"""Presenter pipeline: schema stripping, limit, UI before redaction, select on data only, embeds, rules."""

from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from mcpfusion import Model, Presenter, Tool, suggest, ui
from mcpfusion.presenter import PresenterError
from mcpfusion.redaction import RedactionError


class Invoice(BaseModel):
    id: str
    customer: dict
    amount_cents: int = Field(description="CENTS, divide by 100")
    status: Literal["draft", "paid", "overdue"]
    internal_notes: str = ""


InvoiceModel = Model(Invoice, hidden=["internal_notes"], casts={"amount_cents": "int"})

INVOICE = {
    "id": "inv_1",
    "customer": {"name": "Ada", "email": "ada@example.com"},
    "amount_cents": 1250,
    "status": "overdue",
    "internal_notes": "cost basis 700",
    "undeclared": "strip me",
}


def invoice_presenter():
    return (
        Presenter("Invoice")
        .schema(InvoiceModel)
        .rules(["CRITICAL: amount_cents is in CENTS. Divide by 100."])
        .redact_pii(["customer.email"])
        .ui(lambda inv: [ui.table(["Field", "Value"], [["Email", inv["customer"]["email"]]])])
        .suggest(lambda inv: [suggest("billing.remind", "Send a payment reminder") if inv["status"] == "overdue" else None])
    )


def test_full_pipeline_exact_wire():
    result = invoice_presenter().present(INVOICE)
    assert result.texts == [
        '{"id":"inv_1","customer":{"name":"Ada","email":"[REDACTED]"},"amount_cents":1250,"status":"overdue"}',
        '<ui_passthrough type="markdown">\n| Field | Value |\n|---|---|\n| Email | [REDACTED] |\n</ui_passthrough>',
        "<domain_rules>\n- amount_cents: CENTS, divide by 100\n- CRITICAL: amount_cents is in CENTS. Divide by 100.\n"
        "</domain_rules>",
        "<action_suggestions>\n- billing.remind: Send a payment reminder\n</action_suggestions>",
    ]
    # the caller's object is untouched (nothing the user stored is lost)
    assert INVOICE["customer"]["email"] == "ada@example.com"


def test_hidden_and_undeclared_fields_never_on_the_wire():
    result = invoice_presenter().present(INVOICE)
    text = "\n".join(result.texts)
    assert "cost basis" not in text and "internal_notes" not in text and "strip me" not in text
    assert "internal_notes" not in str(InvoiceModel.json_schema())


def test_casts_apply_when_reading():
    from decimal import Decimal

    result = invoice_presenter().present({**INVOICE, "amount_cents": Decimal("1250")})
    assert result.view.data["amount_cents"] == 1250


def test_select_filters_only_the_data_block():
    result = invoice_presenter().present(INVOICE, select=["id", "status"])
    assert result.texts[0] == '{"id":"inv_1","status":"overdue"}'
    # UI, rules and suggestions still ran on the full object (the UI block saw the email, the guard censored it)
    assert "| Email | [REDACTED] |" in result.texts[1]
    assert "ada@example.com" not in result.text
    assert result.texts[3] == "<action_suggestions>\n- billing.remind: Send a payment reminder\n</action_suggestions>"
    assert len(result.texts) == 4


def test_limit_truncation_block_exact_text_and_rules_once_for_collections():
    calls = []

    def rules(items):
        calls.append(len(items))
        return [f"{len(items)} items shown"]

    presenter = Presenter("Row").schema({"id": int}).limit(2).rules(rules)
    result = presenter.present([{"id": i} for i in range(5)])
    assert calls == [2]
    assert result.texts == [
        '[{"id":0},{"id":1}]',
        '<ui_passthrough type="markdown">\n📊 **Summary**: ⚠️ Dataset truncated. 2 shown, 3 hidden. '
        "Use filters to narrow results.\n</ui_passthrough>",
        "<domain_rules>\n- 2 items shown\n</domain_rules>",
    ]
    assert len(presenter.present([{"id": 1}]).texts) == 2  # no truncation block under the limit


def test_collection_ui_and_per_item_suggestions_deduplicated():
    presenter = (
        Presenter("Row")
        .schema({"id": int, "status": str})
        .collection_ui(lambda rows: ui.list([r["id"] for r in rows]))
        .suggest(lambda r: [suggest("x.pay", "Pay it") if r["status"] == "due" else None])
    )
    result = presenter.present([{"id": 1, "status": "due"}, {"id": 2, "status": "due"}, {"id": 3, "status": "ok"}])
    assert result.texts[1] == '<ui_passthrough type="markdown">\n- 1\n- 2\n- 3\n</ui_passthrough>'
    assert result.texts[2] == "<action_suggestions>\n- x.pay: Pay it\n</action_suggestions>"


def test_collection_suggest_answers_a_list_once_and_one_item_from_suggest():
    """`collection_suggest` sees the validated rows once (hidden fields already gone), answers a list instead
    of `suggest` per row, drops None and repeats; one item is still answered by `suggest`."""
    seen: list[Any] = []
    per_row: list[Any] = []

    def for_page(rows: list[dict[str, Any]], ctx: Any) -> list[Any]:
        seen.append((rows, ctx))
        due = [r["id"] for r in rows if r["status"] == "due"]
        return [suggest("x.pay", f"Pay {len(due)} rows") if due else None, suggest("x.export", "Export"),
                suggest("x.export", "Export")]

    def for_row(row: dict[str, Any]) -> Any:
        per_row.append(row)
        return suggest("x.open", "Open it")

    presenter = (
        Presenter("Row").schema({"id": int, "status": str})
        .suggest(for_row).collection_suggest(for_page)
    )
    rows = [{"id": 1, "status": "due", "secret": "s"}, {"id": 2, "status": "ok"}]
    result = presenter.present(rows, ctx="ctx")
    assert seen == [([{"id": 1, "status": "due"}, {"id": 2, "status": "ok"}], "ctx")] and per_row == []
    assert result.texts[-1] == "<action_suggestions>\n- x.pay: Pay 1 rows\n- x.export: Export\n</action_suggestions>"
    assert [s.action for s in presenter.present({"id": 3, "status": "ok"}).view.suggestions] == ["x.open"]
    assert len(seen) == 1
    with pytest.raises(Exception, match="collection_suggest"):
        Presenter("Bad").collection_suggest("not a function")  # type: ignore[arg-type]


def test_per_item_suggestions_merge_as_merge_unique_does():
    """A list's suggestions are merged per row by identity first: the same suggestions, in the same order,
    as merging each row's list by equality, whatever the callback returns (a list, a tuple, one suggestion,
    None, equal but distinct objects) and whether it takes the context."""
    from mcpfusion.presenter import _as_list, _merge_unique, _suggest_each

    pay, remind = suggest("x.pay", "Pay it"), suggest("x.remind", "Remind")
    by_row = [[pay, None, remind], (remind,), None, pay, [suggest("x.pay", "Pay it"), suggest("x.new", "New")],
              [suggest("x.new", "New"), pay], ()]
    expected: list[Any] = [suggest("x.old", "Old")]
    for value in by_row:
        _merge_unique(expected, _as_list(value))
    for fn in (lambda i: by_row[i], lambda i, ctx: by_row[i] if ctx == "ctx" else None):
        presenter = Presenter("Row").schema({"id": int}).suggest(fn)
        got: list[Any] = [suggest("x.old", "Old")]
        _suggest_each(got, presenter._suggest, range(len(by_row)), "ctx")
        assert got == expected and [s.action for s in got] == ["x.old", "x.pay", "x.remind", "x.new"]
    presenter = Presenter("Row").schema({"id": int}).suggest(lambda r: by_row[r["id"]])
    result = presenter.present([{"id": i} for i in range(len(by_row))])
    assert result.view.suggestions == expected[1:]


def test_per_item_suggestions_skip_an_equal_answer_but_not_the_same_list_changed():
    from mcpfusion.presenter import _suggest_each

    pay, remind, new = suggest("x.pay", "Pay it"), suggest("x.remind", "Remind"), suggest("x.new", "New")
    equal_rows = [[pay, None], [pay, None], [suggest("x.pay", "Pay it"), None], [None, remind], [pay, None]]
    got: list[Any] = []
    _suggest_each(got, Presenter("R").schema({"id": int}).suggest(lambda i: equal_rows[i])._suggest,
                  range(len(equal_rows)), None)
    assert [s.action for s in got] == ["x.pay", "x.remind"]
    shared: list[Any] = []  # one list the callback fills again for each row: every row's answer counts

    def refill(i):
        shared[:] = [[pay], [remind], [new]][i]
        return shared

    got = []
    _suggest_each(got, Presenter("R").schema({"id": int}).suggest(refill)._suggest, range(3), None)
    assert [s.action for s in got] == ["x.pay", "x.remind", "x.new"]


def test_redaction_wildcards():
    presenter = Presenter("P").schema(
        {"people": list[dict], "lines": list[dict], "owner": dict}
    ).redact_pii(["people[*].ssn", "lines[*].card", "owner.*"], censor="***")
    data = {
        "people": [{"name": "a", "ssn": "1"}, {"name": "b"}],
        "lines": [{"card": "4111", "sku": "A"}],
        "owner": {"name": "x", "phone": "y"},
    }
    assert presenter.present(data).view.data == {
        "people": [{"name": "a", "ssn": "***"}, {"name": "b"}],
        "lines": [{"card": "***", "sku": "A"}],
        "owner": {"name": "***", "phone": "***"},
    }
    star = Presenter("S").redact_pii(["*.ssn"]).present({"a": {"ssn": "1", "k": 2}, "b": "plain", "c": {"x": 1}})
    assert star.view.data == {"a": {"ssn": "[REDACTED]", "k": 2}, "b": "plain", "c": {"x": 1}}


def test_redaction_fails_closed_when_a_path_cannot_be_applied():
    presenter = Presenter("P").schema({"customer": object}).redact_pii(["customer.email"])
    with pytest.raises(RedactionError):
        presenter.present({"customer": "ada@example.com"})
    lines = Presenter("L").schema({"lines": object}).redact_pii(["lines[*].card"])
    with pytest.raises(RedactionError):
        lines.present({"lines": {"card": "4111"}})


def test_redaction_path_typo_is_caught_at_definition():
    with pytest.raises(ValueError, match="names no field"):
        Presenter("P").schema({"customer": dict}).redact_pii(["custmer.email"])
    with pytest.raises(ValueError):
        Presenter("P").redact_pii(["a..b"])


def test_redaction_runs_after_ui_callbacks_see_real_values_and_blocks_are_guarded():
    seen = []
    presenter = Presenter("P").schema({"email": str}).redact_pii(["email"]).ui(
        lambda d: seen.append(d["email"]) or ui.markdown(f"Mail {d['email']}"))
    result = presenter.present({"email": "ada@example.com"})
    assert seen == ["ada@example.com"]
    assert result.texts == ['{"email":"[REDACTED]"}', '<ui_passthrough type="markdown">\nMail [REDACTED]\n</ui_passthrough>']
    # The explicit opt-out: blocks for a human operator keep the value; the data block is still redacted.
    operator = Presenter("P").schema({"email": str}).redact_pii(["email"], guard_blocks=False).ui(
        lambda d: ui.markdown(d["email"]))
    assert operator.present({"email": "ada@example.com"}).texts == [
        '{"email":"[REDACTED]"}', '<ui_passthrough type="markdown">\nada@example.com\n</ui_passthrough>']


def test_embed_child_blocks_rules_and_suggestions_merge_deduplicated():
    lines = (
        Presenter("Line")
        .schema({"sku": str, "card": str})
        .redact_pii(["card"])
        .rules(["sku is the product code", "Amounts are in CENTS."])
        .collection_ui(lambda rows: ui.table(["SKU"], [[r["sku"]] for r in rows]))
        .suggest(lambda r: suggest("billing.refund", "Refund a line"))
    )
    parent = (
        Presenter("Invoice")
        .schema({"id": str})
        .rules(["Amounts are in CENTS."])
        .ui(lambda d: ui.markdown(f"Invoice {d['id']}"))
        .embed("lines", lines)
    )
    result = parent.present({"id": "inv_1", "lines": [{"sku": "A", "card": "4111"}, {"sku": "B", "card": "5555"}]})
    assert result.texts == [
        '{"id":"inv_1","lines":[{"sku":"A","card":"[REDACTED]"},{"sku":"B","card":"[REDACTED]"}]}',
        '<ui_passthrough type="markdown">\nInvoice inv_1\n</ui_passthrough>',
        '<ui_passthrough type="markdown">\n| SKU |\n|---|\n| A |\n| B |\n</ui_passthrough>',
        "<domain_rules>\n- Amounts are in CENTS.\n- sku is the product code\n</domain_rules>",
        "<action_suggestions>\n- billing.refund: Refund a line\n</action_suggestions>",
    ]
    assert parent.field_names == ["id", "lines"]


def test_rules_as_function_of_data_and_context_drop_none():
    presenter = Presenter("P").schema({"status": str}).rules(
        lambda d, ctx: [f"Role is {ctx}", None, "Paid is final" if d["status"] == "paid" else None]
    )
    assert presenter.present({"status": "paid"}, "admin").view.system_rules == ["Role is admin", "Paid is final"]


def test_presenter_schema_mismatch_is_a_presenter_error_without_values():
    presenter = Presenter("P").schema({"amount": int})
    with pytest.raises(PresenterError) as info:
        presenter.present({"amount": "secret-value"})
    assert "secret-value" not in str(info.value) and "amount" in str(info.value)


def test_schema_from_pydantic_model_strips_extra():
    class Out(BaseModel):
        a: int

    assert Presenter("O").schema(Out).present({"a": 1, "b": 2}).texts == ['{"a":1}']


def test_directives_block():
    result = Presenter("D").schema({"due": str}).directives(lambda d: [f"Mention the due date {d['due']}."]).present(
        {"due": "2026-12-01"}
    )
    assert result.texts[1] == "<llm_directives>\n- Mention the due date 2026-12-01.\n</llm_directives>"


def test_collection_degrades_per_item_naming_the_field_not_the_value(caplog):
    presenter = Presenter("P").schema({"amount": int})
    with caplog.at_level("WARNING", logger="mcpfusion"):
        result = presenter.present([{"amount": 1}, {"amount": "secret-value"}, {"amount": 3}])
    assert result.view.data == [{"amount": 1}, {"amount": 3}]
    assert "1 of 3 item(s) could not be shown" in result.texts[1] and "secret-value" not in result.text
    assert "#1 (amount)" in caplog.text and "secret-value" not in caplog.text


def test_plain_and_rich_embedded_children_render_the_same_data_and_rules():
    plain = Presenter("Line").schema({"sku": str, "card": str}).redact_pii(["card"]).rules(["Line rule."])
    rich = (
        Presenter("Line").schema({"sku": str, "card": str}).redact_pii(["card"]).rules(["Line rule."])
        .suggest(lambda line: None)  # a callback: the full render path
    )
    data = {"id": "i", "lines": [{"sku": "A", "card": "4111", "junk": 1}], "line": {"sku": "B", "card": "5"}}
    outputs = []
    for child in (plain, rich):
        parent = Presenter("Invoice").schema({"id": str}).rules(["Parent rule."]).embed("lines", child).embed("line", child)
        outputs.append(parent.present(data).texts)
    assert outputs[0] == outputs[1] == [
        '{"id":"i","lines":[{"sku":"A","card":"[REDACTED]"}],"line":{"sku":"B","card":"[REDACTED]"}}',
        "<domain_rules>\n- Parent rule.\n- Line rule.\n</domain_rules>",
    ]


def test_registration_freezes_a_presenter_and_its_embeds():
    from mcpfusion import Tool

    child = Presenter("Line").schema({"amount": int}).rules(["amounts in CENTS"])
    parent = invoice_presenter().embed("lines", child)
    tool = Tool("billing")

    @tool.action(returns=parent)
    async def get(id: str) -> dict:
        """Get."""
        return {**INVOICE, "lines": [{"amount": 1}]}

    assert parent.frozen and child.frozen
    for change in (lambda: parent.rules(["other"]), lambda: parent.limit(3), lambda: child.redact_pii(["amount"]),
                   lambda: setattr(parent, "max_items", 3)):
        with pytest.raises(PresenterError, match="'(Invoice|Line)' is frozen.*copy\\(\\)"):
            change()
    with pytest.raises(TypeError):
        parent.embeds["other"] = child  # type: ignore[index]
    assert "CRITICAL: amount_cents is in CENTS. Divide by 100." in parent.present(INVOICE).view.system_rules


def test_a_copy_is_a_variant_that_never_changes_the_registered_original():
    from mcpfusion import Tool

    shared = invoice_presenter().limit(5)
    one, two = Tool("one"), Tool("two")
    for tool in (one, two):
        tool.action(name="get", description="Get.", returns=shared)(lambda: [INVOICE] * 8)
    before = shared.present([INVOICE] * 8).view
    variant = shared.copy("Brief").limit(1).rules(["brief"])
    assert not variant.frozen and variant.name == "Brief"
    assert len(variant.present([INVOICE] * 8).view.data) == 1
    after = shared.present([INVOICE] * 8).view
    assert (len(after.data), after.system_rules) == (len(before.data), before.system_rules) == (5, before.system_rules)
    assert variant._cache is not shared._cache  # hot-path caches belong to one presenter, never its configuration


def test_presenting_freezes_a_presenter_chosen_at_run_time():
    presenter = invoice_presenter()
    assert not presenter.frozen
    presenter.present(INVOICE)
    assert presenter.frozen


def test_flat_render_of_one_object_is_the_general_render_and_fits_the_output_schema():
    """A frozen presenter with static rules and plain children renders one object without the children's
    bookkeeping: the same response, byte for byte, as the general path, and a result valid against the
    schema the action advertises (why the output check trusts it)."""
    import asyncio

    import jsonschema

    from mcpfusion.app import MCPFusion
    from tests.firewall_kit import PATHS, every_path

    class Customer(BaseModel):
        name: str
        email: str

    class Bill(BaseModel):
        id: str
        customer: Customer
        amount_cents: int = Field(description="CENTS")
        lines: list[dict[str, Any]] = []
        notes: str = ""

    lines = Presenter("Line").schema({"sku": str, "card": str | None}).redact_pii(["card"]).rules(["Line rule."])
    bill = (Presenter("Bill").schema(Model(Bill, hidden=["notes"])).rules(["Own rule.", "Line rule."])
            .redact_pii(["customer.email"]).ui(lambda b: ui.table(["Id"], [[b["id"]]]))
            .suggest(lambda b: [suggest("bill.pay", f"Pay {b['customer']['email']}")]).embed("lines", lines))
    raw = {"id": "b1", "customer": {"name": "Ada", "email": "ada@example.com"}, "amount_cents": 5,
           "lines": [{"sku": "A", "card": "4111 1111"}, {"sku": "B", "card": None}], "notes": "secret"}
    tool = Tool("bill")

    @tool.action(readonly=True, returns=bill)
    async def get(id: str) -> dict[str, Any]:
        """One bill."""
        return raw

    @tool.action()
    async def pay(id: str) -> str:
        """Pay a bill (what the suggestion names: suggestions name registered actions only)."""
        return "paid"

    app = MCPFusion("flat", tools=[tool]).build_app()
    flat = bill.present(raw)
    assert bill._cache.plan is not None
    general = bill.copy()
    general.freeze()
    general._cache.plan = None
    assert general.present(raw).texts == flat.texts
    assert "ada@example.com" not in "".join(flat.texts) and "4111 1111" not in "".join(flat.texts)
    assert flat.texts[-2].count("Line rule.") == 1  # a child's rule already among the parent's: once
    schema = tool.actions["get"].output.schema
    jsonschema.validate(flat.view.data, schema)
    answers = asyncio.run(every_path(app, "bill", "get", {"id": "b1"}))
    for path in PATHS:
        assert answers[path].error is None and "ada@example.com" not in answers[path].raw
        jsonschema.validate(answers[path].data, schema)
    assert answers["mcp-2026"].texts == flat.texts


async def test_a_callback_returning_the_wrong_kind_names_the_presenter(caplog):
    from mcpfusion import Presenter, Tool
    from mcpfusion.testing import ToolTester

    tool = Tool("t", description="x")

    @tool.action(readonly=True, returns=Presenter("chatty").schema({"id": str}).ui(lambda d: "just text"))
    async def ui_text() -> dict:
        """Ui"""
        return {"id": "1"}

    @tool.action(readonly=True, returns=Presenter("pushy").schema({"id": str}).suggest(lambda d: ["billing.remind"]))
    async def suggest_text() -> dict:
        """Suggest"""
        return {"id": "1"}

    tester = ToolTester([tool])
    with caplog.at_level("ERROR"):
        ui_result = await tester.call("t", "ui_text", {})
        suggest_result = await tester.call("t", "suggest_text", {})
    assert ui_result.error_code == suggest_result.error_code == "INVALID_OUTPUT"
    assert "presenter 'chatty': its ui callback returned a str" in caplog.text
    assert "presenter 'pushy': its suggest callback returned a str" in caplog.text


def test_a_single_string_is_one_rule_one_directive_and_one_path():
    """`.rules("text")` is one rule, not a rule per character; the same for directives and redaction paths."""
    from pydantic import BaseModel

    class Contact(BaseModel):
        email: str
        name: str

    presenter = (Presenter("contact").schema(Contact).rules("Amounts are in cents.").directives("Be brief.")
                 .redact_pii("email"))
    texts = presenter.present({"email": "ada@example.com", "name": "Ada"}).texts
    assert texts == ['{"email":"[REDACTED]","name":"Ada"}', "<llm_directives>\n- Be brief.\n</llm_directives>",
                     "<domain_rules>\n- Amounts are in cents.\n</domain_rules>"]
