"""A tenant never reads or writes another tenant's rows: every action, in-process, over REST and MCP."""

from __future__ import annotations

import pytest

from tests.service_kit import ACME_INVOICES, GLOBEX_INVOICES, call, call_confirmed

TRANSPORTS = ["inproc", "rest", "mcp"]
NEW_LINE = [{"description": "Audit", "quantity": 1, "unit_price_cents": 1000}]



async def snapshot(service_app, transport):
    """What acme's admin sees of the invoices the other tenant tries to touch."""
    seen = {}
    for invoice_id in ("inv_0001", "inv_0003"):
        outcome = await call(transport, service_app, "billing", "get_invoice", {"id": invoice_id}, "demo-admin")
        seen[invoice_id] = outcome.data
    seen["summary"] = (await call(transport, service_app, "billing", "revenue_summary", {}, "demo-admin")).data
    return seen


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_reads_only_see_own_tenant(service_app, transport):
    token = "demo-globex-admin"
    rows = (await call(transport, service_app, "billing", "list_invoices", {}, token)).data
    assert {r["id"] for r in rows} == GLOBEX_INVOICES
    assert all(r["number"].startswith("GLOBEX-") for r in rows)
    by_acme_customer = await call(transport, service_app, "billing", "list_invoices", {"customer_id": "cus_0001"}, token)
    assert by_acme_customer.data == []
    for invoice_id in sorted(ACME_INVOICES)[:3]:
        assert (await call(transport, service_app, "billing", "get_invoice", {"id": invoice_id}, token)).error_code == "NOT_FOUND"
    summary = (await call(transport, service_app, "billing", "revenue_summary", {}, token)).data
    assert summary["invoice_count"] == len(GLOBEX_INVOICES) and summary["currency"] == "USD"
    exported = (await call(transport, service_app, "billing", "export_invoices", {}, token)).data
    assert {r["id"] for r in exported} == GLOBEX_INVOICES
    customers = (await call(transport, service_app, "customers", "list", {}, token)).data
    assert {c["id"] for c in customers} == {"cus_0101", "cus_0102", "cus_0103"}
    assert (await call(transport, service_app, "customers", "get", {"id": "cus_0001"}, token)).error_code == "NOT_FOUND"
    # and the other way round
    assert (await call(transport, service_app, "billing", "get_invoice", {"id": "inv_0025"}, "demo-admin")).error_code \
        == "NOT_FOUND"
    assert (await call(transport, service_app, "customers", "get", {"id": "cus_0101"}, "demo-support")).error_code \
        == "NOT_FOUND"


WRITES = [
    ("create_invoice", {"customer_id": "cus_0001", "due_date": "2030-01-31", "lines": NEW_LINE}),
    ("update_invoice_status", {"id": "inv_0003", "status": "sent"}),  # an acme draft
    ("remind", {"id": "inv_0001"}),  # an acme overdue invoice
    ("void_invoice", {"id": "inv_0003", "reason": "not yours"}),
    ("record_payment", {"id": "inv_0001", "amount_cents": 100}),
]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("action", "args"), WRITES, ids=[w[0] for w in WRITES])
async def test_writes_cannot_touch_other_tenant(service_app, transport, action, args):
    before = await snapshot(service_app, transport)
    outcome = await call_confirmed(transport, service_app, "billing", action, args, "demo-globex-admin")
    assert outcome.error_code == "NOT_FOUND", outcome
    assert "acme" not in outcome.raw.lower()
    assert await snapshot(service_app, transport) == before
    # the invoice list of acme is unchanged too (no row was created for it)
    rows = (await call(transport, service_app, "billing", "list_invoices", {}, "demo-admin")).data
    assert len(rows) == 20  # the presenter's limit; nothing new appeared
    summary = (await call(transport, service_app, "billing", "revenue_summary", {}, "demo-admin")).data
    assert summary["invoice_count"] == len(ACME_INVOICES)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_own_writes_stay_in_own_tenant(service_app, transport):
    created = await call(transport, service_app, "billing", "create_invoice",
                         {"customer_id": "cus_0101", "due_date": "2030-01-31", "lines": NEW_LINE},
                         "demo-globex-admin")
    assert created.error_code is None, created
    new_id = created.data["id"]
    assert created.data["number"] == "GLOBEX-0007" and created.data["currency"] == "USD"
    for token in ("demo-admin", "demo-support"):
        assert (await call(transport, service_app, "billing", "get_invoice", {"id": new_id}, token)).error_code == "NOT_FOUND"
        outcome = await call(transport, service_app, "billing", "update_invoice_status", {"id": new_id, "status": "sent"},
                             token)
        # support may not write at all (its scopes hide the action: on MCP the tool billing_write, in process
        # the action of billing); an admin of another tenant finds nothing
        hidden = {"rest": "FORBIDDEN", "inproc": "UNKNOWN_ACTION"}.get(transport, "UNKNOWN_TOOL")
        assert outcome.error_code == ("NOT_FOUND" if token == "demo-admin" else hidden)
    still = await call(transport, service_app, "billing", "get_invoice", {"id": new_id}, "demo-globex-admin")
    assert still.data["status"] == "draft"
