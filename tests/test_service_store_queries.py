"""The reference store's reads: one SQL statement each, one trip to the SQLite thread, tenant-scoped.

Speed figures live in bench/service.py and BENCHMARKS.md; these check the shape that makes them."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from app.auth import DEMO_TOKENS
from app.db import Database
from app.settings import database_url
from app.sqlite import OneTripConnection
from app.store import BillingStore


@pytest.fixture
async def db(tmp_path):
    database = Database(database_url(None, tmp_path / "billing.sqlite3"))
    await database.ready()
    yield database
    await database.dispose()


async def _run(db: Database, token: str, read):
    statements: list[str] = []
    trips = 0
    original = OneTripConnection._execute

    async def counting(self, fn, *args, **kwargs):
        nonlocal trips
        trips += 1
        return await original(self, fn, *args, **kwargs)

    def record(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    event.listen(db.engine.sync_engine, "before_cursor_execute", record)
    OneTripConnection._execute = counting  # type: ignore[method-assign]
    try:
        async for session in db.session():
            result = await read(BillingStore(session, DEMO_TOKENS[token]))
    finally:
        OneTripConnection._execute = original  # type: ignore[method-assign]
        event.remove(db.engine.sync_engine, "before_cursor_execute", record)
    return result, statements, trips


@pytest.mark.parametrize("read", [
    lambda s: s.get_invoice("inv_0002"), lambda s: s.list_invoices(), lambda s: s.summary(),
    lambda s: s.list_invoices(status="overdue"),
])
async def test_each_read_is_one_statement_and_one_trip(db, read):
    await _run(db, "demo-admin", read)  # the pool's connection exists from here on
    _, statements, trips = await _run(db, "demo-admin", read)
    assert len(statements) == 1
    assert "tenant" in statements[0]
    assert trips == 1  # no trip for the cursor, the fetch or the rollback of a read-only session


async def test_reads_are_tenant_scoped_and_complete(db):
    invoice, _, _ = await _run(db, "demo-admin", lambda s: s.get_invoice("inv_0002"))
    assert invoice["id"] == "inv_0002" and invoice["tenant"] == "acme"
    assert invoice["customer"]["id"] == invoice["customer_id"]
    assert [li["description"] for li in invoice["lines"]] and all(
        set(li) == {"description", "quantity", "unit_price_cents"} for li in invoice["lines"])
    paid, _, _ = await _run(db, "demo-admin", lambda s: s.list_invoices(status="paid"))
    with_payment, _, _ = await _run(db, "demo-admin", lambda s: s.get_invoice(paid[0]["id"]))
    assert sum(p["amount_cents"] for p in with_payment["payments"]) == with_payment["paid_cents"] > 0
    with pytest.raises(Exception, match="was not found"):
        await _run(db, "demo-globex-admin", lambda s: s.get_invoice("inv_0002"))
    globex, _, _ = await _run(db, "demo-globex-admin", lambda s: s.list_invoices())
    assert {row["tenant"] for row in globex} == {"globex"}
    summary, _, _ = await _run(db, "demo-globex-admin", lambda s: s.summary())
    assert summary["invoice_count"] == len(globex)


async def test_writes_still_commit_through_the_one_trip_connection(db):
    paid, _, _ = await _run(db, "demo-admin", lambda s: s.list_invoices(status="draft"))
    changed, _, _ = await _run(db, "demo-admin", lambda s: s.set_status(paid[0]["id"], "sent"))
    assert changed["status"] == "sent"
    again, _, _ = await _run(db, "demo-admin", lambda s: s.get_invoice(paid[0]["id"]))
    assert again["status"] == "sent"
