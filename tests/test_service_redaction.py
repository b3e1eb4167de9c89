"""Support never receives a redacted value (customer email and phone) nor an internal field, through any
transport: the in-process view and text, REST bodies, MCP text blocks and structured content. Hidden
fields never leave the server, whatever the role."""

from __future__ import annotations

import re

import pytest

from tests.service_kit import ACME_PII, HIDDEN_CODES, WRITES, build, call, call_confirmed

TRANSPORTS = ["inproc", "rest", "mcp"]
INTERNAL = ["internal_note", "margin_cents", "Account manager"]
HIDDEN = ["processor_token", "processor_ref", '"tenant"']
HIDDEN_VALUES = re.compile(r"tok_\d{6}|ch_\d{6}|ch_[0-9a-f]{16}")
NEW_LINE = [{"description": "Audit", "quantity": 2, "unit_price_cents": 1500}]


async def every_action(app, transport, token):
    """Every billing and customers action, reads and writes, with valid arguments: (label, outcome). Support's
    scopes allow no write: those are refused (hidden on MCP, 403 on REST), and leak nothing either."""
    out = []

    async def run(tool, action, args=None):
        outcome = await call_confirmed(transport, app, tool, action, args or {}, token)
        if token == "demo-support" and action in WRITES:
            assert outcome.error_code in HIDDEN_CODES, (tool, action, outcome)
            out.append((f"{tool}.{action}", outcome))
            return {"id": "inv_0001"}
        assert outcome.error_code is None, (tool, action, outcome)
        out.append((f"{tool}.{action}", outcome))
        return outcome.data

    await run("billing", "list_invoices")
    await run("billing", "list_invoices", {"status": "overdue"})
    await run("billing", "list_invoices", {"customer_id": "cus_0001"})
    await run("billing", "get_invoice", {"id": "inv_0002"})  # a paid invoice, with a payment
    await run("billing", "revenue_summary")
    await run("billing", "export_invoices")
    await run("customers", "list")
    await run("customers", "list", {"_select": ["name", "email", "phone"]})
    await run("customers", "get", {"id": "cus_0001"})
    created = await run("billing", "create_invoice",
                        {"customer_id": "cus_0001", "due_date": "2030-01-31", "lines": NEW_LINE,
                         "internal_note": "Account manager: Zoe"})
    await run("billing", "update_invoice_status", {"id": created["id"], "status": "sent"})
    await run("billing", "remind", {"id": created["id"], "message": "Friendly nudge"})
    await run("billing", "record_payment", {"id": created["id"], "amount_cents": 1000, "method": "transfer"})
    await run("billing", "void_invoice", {"id": "inv_0003", "reason": "duplicate"})
    return out


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_support_never_receives_pii_or_internal_fields(tmp_path, transport):
    app = build(tmp_path)
    for label, outcome in await every_action(app, transport, "demo-support"):
        for value in ACME_PII:
            assert value not in outcome.raw, (label, value)
        for name in INTERNAL + HIDDEN:
            assert name not in outcome.raw, (label, name)
        assert not HIDDEN_VALUES.search(outcome.raw), label
    invoice = (await call(transport, app, "billing", "get_invoice", {"id": "inv_0001"}, "demo-support")).data
    assert invoice["customer"]["email"] == "[REDACTED]" and invoice["customer"]["phone"] == "[REDACTED]"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_admin_sees_contact_details_but_never_hidden_fields(tmp_path, transport):
    app = build(tmp_path)
    outcomes = await every_action(app, transport, "demo-admin")
    seen = "".join(outcome.raw for _, outcome in outcomes)
    assert "ana.lima@northwind.example" in seen and "Account manager" in seen  # the support test means something
    for label, outcome in outcomes:
        for name in HIDDEN:
            assert name not in outcome.raw, (label, name)
        assert not HIDDEN_VALUES.search(outcome.raw), label


async def test_support_ui_blocks_and_structured_view_carry_no_pii(tmp_path):
    """UI blocks bypass redaction by design, so the support presenters' blocks must not show contact data."""
    from tests.service_kit import in_process

    app = build(tmp_path)
    result = await in_process(app).call("billing", "get_invoice", {"id": "inv_0001"},
                                    headers={"authorization": "Bearer demo-support"})
    assert result.ui_blocks and {b.type for b in result.ui_blocks} == {"markdown", "echarts"}
    rendered = "".join(b.render() for b in result.ui_blocks) + repr(result.data) + "".join(result.system_rules)
    for value in ACME_PII:
        assert value not in rendered
    assert any("redacted for the support role" in rule for rule in result.system_rules)
