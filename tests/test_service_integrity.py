"""The reference service never writes what its own schemas cannot read, and one bad row never fails a list
(issue #9, point 11): the long note plus a long void reason used to break every read of the tenant."""

from __future__ import annotations

import logging

from sqlalchemy import update

from app.tables import InvoiceRecord
from tests.firewall_kit import PATHS, every_path
from tests.service_kit import build, call_confirmed, in_process

LINES = [{"description": "Audit", "quantity": 1, "unit_price_cents": 1000}]


async def test_long_note_then_long_void_reason_keeps_every_read_working(tmp_path):
    app = build(tmp_path)
    created = await in_process(app).call("billing", "create_invoice", {
        "customer_id": "cus_0001", "due_date": "2030-01-01", "lines": LINES, "internal_note": "n" * 500,
    }, headers={"authorization": "Bearer demo-admin"})
    assert not created.is_error, created.text
    invoice_id = created.data["id"]
    voided = await call_confirmed("inproc", app, "billing", "void_invoice", {"id": invoice_id, "reason": "r" * 200},
                                  "demo-admin")  # void_invoice asks for confirmation: the user agrees
    assert voided.error_code is None, voided
    for action, args in (("list_invoices", {}), ("get_invoice", {"id": invoice_id})):
        answers = await every_path(app, "billing", action, args, token="demo-admin")
        for path in PATHS:
            assert answers[path].error is None, (action, answers[path])
    detail = (await in_process(app).call("billing", "get_invoice", {"id": invoice_id},
                                         headers={"authorization": "Bearer demo-admin"})).data
    assert detail["internal_note"] == "n" * 500 and detail["void_reason"] == "r" * 200


async def test_a_stored_row_that_no_longer_fits_degrades_the_list_not_the_tenant(tmp_path, caplog):
    app = build(tmp_path)
    await in_process(app).call("billing", "list_invoices", {}, headers={"authorization": "Bearer demo-admin"})
    async with app.state.db.sessions() as session:  # a row written before the rules, or by another program
        await session.execute(update(InvoiceRecord).where(InvoiceRecord.id == "inv_0002")
                              .values(internal_note="x" * 711))
        await session.commit()
    with caplog.at_level(logging.WARNING, logger="mcpfusion"):
        answers = await every_path(app, "billing", "list_invoices", {}, token="demo-admin")
    for path in PATHS:
        assert answers[path].error is None, answers[path]
    ids = [r["id"] for r in answers["rest"].data]
    assert "inv_0002" not in ids and len(ids) == 19  # 20 shown by the limit, one left out
    assert "could not be shown" in "\n".join(answers["mcp-2026"].texts)
    assert "internal_note" in caplog.text and "x" * 50 not in caplog.text
    single = await every_path(app, "billing", "get_invoice", {"id": "inv_0002"}, token="demo-admin")
    for path in PATHS:
        assert single[path].error == "INVALID_OUTPUT", single[path]


async def test_writes_are_checked_against_the_read_schema_before_commit(tmp_path, monkeypatch):
    from app import store

    app = build(tmp_path)
    original = store.BillingStore.remind

    async def remind_too_long(self, invoice_id):  # a bug in a write path: it stores an unreadable note
        async with self._writing() as session:
            row = await self._invoice_row(session, invoice_id)
            row.internal_note = "y" * 600
            return await self._commit(session, invoice_id)

    monkeypatch.setattr(store.BillingStore, "remind", remind_too_long)
    result = await in_process(app).call("billing", "remind", {"id": "inv_0001"},
                                        headers={"authorization": "Bearer demo-admin"})
    assert result.error_code == "CONFLICT" and "nothing was saved" in result.text
    monkeypatch.setattr(store.BillingStore, "remind", original)
    again = await in_process(app).call("billing", "get_invoice", {"id": "inv_0001"},
                                       headers={"authorization": "Bearer demo-admin"})
    assert not again.is_error and again.data["internal_note"] != "y" * 600
