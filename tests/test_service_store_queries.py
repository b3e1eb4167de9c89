"""The reference store's reads: one SQL statement each, tenant-scoped; outside a transaction on the calling
thread (the SQLite reader: no trip to the aiosqlite thread), inside one through the session.

Speed figures live in bench/service.py and BENCHMARKS.md; these check the shape that makes them."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, event, make_url, select, text
from sqlalchemy.exc import OperationalError

from app.auth import DEMO_TOKENS
from app.db import Database
from app.settings import database_url
from app.sqlite import OneTripConnection, Prepared, Reader
from app.store import BillingStore


@pytest.fixture
async def db(tmp_path):
    database = Database(database_url(None, tmp_path / "billing.sqlite3"))
    await database.ready()
    yield database
    await database.dispose()


class BusyReader:
    """A reader that always finds SQLite busy."""

    def __init__(self, engine):
        self.engine = engine

    def __call__(self, query, params):
        return None

    fetch = __call__


async def _run(db: Database, token: str, read):
    """`read(store)`'s result, the statements it ran (through the async engine's sessions, or SQLite's own
    trace of the reader's connection on this thread: the reader runs its prepared reads on sqlite3 itself)
    and its trips to the SQLite thread."""
    statements: list[str] = []
    trips = 0
    original = OneTripConnection._execute

    async def counting(self, fn, *args, **kwargs):
        nonlocal trips
        trips += 1
        return await original(self, fn, *args, **kwargs)

    def record(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    traced = None
    if isinstance(db.reader, Reader):
        db.reader._connection()  # this thread's, opened before tracing it
        traced = db.reader._local.raw
        traced.set_trace_callback(statements.append)
    event.listen(db.engine.sync_engine, "before_cursor_execute", record)
    OneTripConnection._execute = counting  # type: ignore[method-assign]
    try:
        result = await read(BillingStore(db, DEMO_TOKENS[token]))
    finally:
        OneTripConnection._execute = original  # type: ignore[method-assign]
        event.remove(db.engine.sync_engine, "before_cursor_execute", record)
        if traced is not None:
            traced.set_trace_callback(None)
    return result, statements, trips


@pytest.mark.parametrize("read", [
    lambda s: s.get_invoice("inv_0002"), lambda s: s.list_invoices(), lambda s: s.summary(),
    lambda s: s.list_invoices(status="overdue"),
])
async def test_each_read_is_one_statement_and_no_trip(db, read):
    await _run(db, "demo-admin", read)  # the pool's connection exists from here on
    _, statements, trips = await _run(db, "demo-admin", read)
    assert len(statements) == 1
    assert "tenant" in statements[0]
    assert trips == 0  # read on the calling thread; no rollback for a session that never opened a transaction


async def test_a_busy_reader_hands_the_read_to_the_session(db, tmp_path):
    """SQLite answering busy to the reader (here: another connection holds a file exclusively) makes the
    reader step aside at once; the store then reads through the session, which waits for the lock in its
    thread instead of on the event loop."""
    path = tmp_path / "locked.sqlite3"
    holder = sqlite3.connect(path)
    holder.execute("CREATE TABLE t (x INTEGER)")
    holder.commit()
    holder.execute("BEGIN EXCLUSIVE")
    reader = Reader(make_url(f"sqlite+aiosqlite:///{path}"))
    prepared = select(Table("t", MetaData(), Column("x", Integer)).c.x)  # `fetch`: compiled, run on sqlite3
    try:
        assert reader(text("SELECT x FROM t"), {}) is None
        assert reader.fetch(prepared, {}) is None
        holder.rollback()
        assert reader(text("SELECT x FROM t"), {}) == []
        assert reader.fetch(prepared, {}) == []
    finally:
        holder.close()
        reader.dispose()
    busy = db.reader
    db.reader = BusyReader(busy.engine)  # busy, every time
    try:
        invoice, statements, trips = await _run(db, "demo-admin", lambda s: s.get_invoice("inv_0002"))
    finally:
        db.reader = busy
    assert invoice["id"] == "inv_0002" and len(statements) == 1 and trips == 1  # through a session


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


@pytest.mark.parametrize("args", [
    {"status": "paid", "customer_id": "cus_0003", "after": ["2027-01-01", "ACME-0001"], "limit": 5},
    {"status": "overdue", "limit": 3}, {"after": ["2026-11-01", "ACME-0002"], "limit": 4}, {"customer_id": "cus_0002"},
])
async def test_list_filters_are_bound_parameters_of_one_statement_per_shape(db, args):
    """The list query of each shape (filters, keyset position, page size) is built once: no value is written
    into its SQL, and it finds what filtering every row of the tenant finds."""
    executed = []
    fetch = db.reader.fetch

    def record(query, params):
        executed.append(query)
        return fetch(query, params)

    db.reader.fetch = record
    try:
        rows, statements, _ = await _run(db, "demo-admin", lambda s: s.list_invoices(**args))
        _, again, _ = await _run(db, "demo-admin", lambda s: s.list_invoices(**{**args, "customer_id": args.get(
            "customer_id") and "cus_0001"}))
    finally:
        del db.reader.fetch
    assert len(executed) == 2 and executed[0] is executed[1]  # other values, the same statement object
    assert len(statements) == len(again) == 1
    prepared = db.reader._prepared[id(executed[0])][1]  # compiled once, values bound
    assert "'" not in prepared.sql and "?" in prepared.sql
    everything = await BillingStore(db, DEMO_TOKENS["demo-admin"]).list_invoices()
    expected = [
        r for r in everything
        if (args.get("status") is None or r["status"] == args["status"] or (args["status"] == "overdue" and r["overdue"]))
        and (args.get("customer_id") is None or r["customer_id"] == args["customer_id"])
        and (args.get("after") is None or r["due_date"].isoformat() < args["after"][0]
             or (r["due_date"].isoformat() == args["after"][0] and r["number"] > args["after"][1]))
    ][:args.get("limit")]
    assert [r["id"] for r in rows] == [r["id"] for r in expected] and rows


async def test_reader_never_writes(tmp_path):
    reader = Reader(make_url(database_url(None, tmp_path / "empty.sqlite3")))
    try:
        with pytest.raises(OperationalError, match="readonly|read-only|query_only"):
            reader(text("CREATE TABLE t (x INTEGER)"), {})
    finally:
        reader.dispose()


async def test_writes_still_commit_through_the_one_trip_connection(db):
    paid, _, _ = await _run(db, "demo-admin", lambda s: s.list_invoices(status="draft"))
    changed, _, _ = await _run(db, "demo-admin", lambda s: s.set_status(paid[0]["id"], "sent"))
    assert changed["status"] == "sent"
    assert db.engine.pool.checkedout() == 0  # the write's session was closed
    again, _, _ = await _run(db, "demo-admin", lambda s: s.get_invoice(paid[0]["id"]))
    assert again["status"] == "sent"


async def test_each_thread_reads_on_a_connection_of_its_own(db):
    query, params = text("SELECT id FROM invoices WHERE tenant = :tenant ORDER BY id"), {"tenant": "acme"}
    here = db.reader(query, params)
    assert db.reader(query, params) == here and len(db.reader._opened) == 1  # kept open between reads
    there = await asyncio.to_thread(db.reader, query, params)  # e.g. a test client's portal thread
    assert there == here and len(db.reader._opened) == 2
    db.reader.dispose()
    assert db.reader._opened == [] and db.reader(query, params) == here  # reopened on the next read


async def test_prepared_reads_give_what_sqlalchemy_gives(db):
    """`Reader.fetch` (SQLAlchemy's SQL run on sqlite3 itself) answers the rows SQLAlchemy's execution of
    the same query answers: literal and bound parameters in place, dates converted."""
    import datetime as dt

    from app import store

    queries = [
        (store._INVOICE_DETAIL, {"tenant": "acme", "invoice_id": "inv_0002"}),
        (store._list_query(True, True, "overdue", False),
         {"tenant": "acme", "today": dt.date(2027, 1, 1), "after_due": dt.date(2027, 6, 1), "after_number": "",
          "limit": 5}),
        (store._SUMMARY, {"tenant": "acme", "today": dt.date(2026, 12, 1)}),
    ]
    for query, params in queries:
        fetched = db.reader.fetch(query, params)
        assert fetched and [list(r) for r in fetched] == [list(r) for r in db.reader(query, params)]
    assert isinstance(db.reader.fetch(*queries[0])[0][store._INVOICE_READ.index(store._INV.c.due_date)], dt.date)
    assert len(db.reader._prepared) == 3
    db.reader.fetch(*queries[0])
    assert len(db.reader._prepared) == 3  # compiled once per query


async def test_a_prepared_read_fails_as_sqlalchemy_does(tmp_path):
    reader = Reader(make_url(database_url(None, tmp_path / "empty.sqlite3")))
    missing = Table("missing", MetaData(), Column("x", Integer))
    try:
        with pytest.raises(OperationalError, match="no such table"):
            reader.fetch(select(missing.c.x), {})
        assert reader._opened == []  # the failed connection was closed; the next read opens another
    finally:
        reader.dispose()


async def test_an_invoice_holds_every_column_of_its_table(db):
    """The read columns are listed by name (the tenant and the customer's id filled in, not read): an invoice
    still carries every column of the table, in the table's order."""
    from app.tables import InvoiceRecord

    invoice, _, _ = await _run(db, "demo-admin", lambda s: s.get_invoice("inv_0002"))
    unread = {"last_reminded_at", "idempotency_key"}  # a write's own bookkeeping (remind's cool-down, a create's key)
    columns = [c.name for c in InvoiceRecord.__table__.c if c.name not in unread]
    assert list(invoice)[:len(columns)] == columns
    assert list(invoice)[len(columns):] == ["customer", "overdue", "lines", "payments"]
    assert invoice["customer"]["id"] == invoice["customer_id"] and invoice["tenant"] == "acme"


async def test_a_list_page_is_read_in_index_order(db, tmp_path):
    """The list's order has an index (a page stops at its limit, nothing sorted), also in a database file
    created before the index existed."""
    from app import store

    query = store._list_query(False, True, False, False)
    sql = Prepared(query, db.reader.engine.dialect).sql
    raw = sqlite3.connect(tmp_path / "billing.sqlite3")
    try:
        plan = raw.execute(f"EXPLAIN QUERY PLAN {sql}", ["acme", "acme", 20, 0]).fetchall()
        assert "ix_invoices_list_order" in str(plan) and "TEMP B-TREE" not in str(plan)
        raw.execute("DROP INDEX ix_invoices_list_order")
        raw.commit()
    finally:
        raw.close()
    again = Database(database_url(None, tmp_path / "billing.sqlite3"))
    try:
        await again.ready()
        indexes = again.reader(text("SELECT name FROM sqlite_master WHERE type = 'index'"), {})
        assert ("ix_invoices_list_order",) in [tuple(r) for r in indexes]
        rows = await BillingStore(again, DEMO_TOKENS["demo-admin"]).list_invoices(limit=5)
        assert [r["due_date"] for r in rows] == sorted((r["due_date"] for r in rows), reverse=True)
    finally:
        await again.dispose()


async def test_an_invoice_orders_its_lines_and_payments_itself(db, tmp_path):
    """The detail query has no ORDER BY: lines come in position order and payments by date then id, whatever
    order SQLite reads them in, each once however many rows the join makes."""
    rows, _, _ = await _run(db, "demo-admin", lambda s: s.list_invoices(status="sent"))
    invoice = next(r for r in rows if r["total_cents"] - r["paid_cents"] >= 3)
    store = BillingStore(db, DEMO_TOKENS["demo-admin"])
    await store.record_payment(invoice["id"], 1, "card", "ch_a")
    await store.record_payment(invoice["id"], 2, "transfer", "ch_b")
    before = await store.get_invoice(invoice["id"])
    raw = sqlite3.connect(tmp_path / "billing.sqlite3")
    try:  # positions reversed: the line read first by SQLite (lowest id) is the last one now
        ids = [r[0] for r in raw.execute("SELECT id FROM invoice_lines WHERE invoice_id = ? ORDER BY id",
                                         [invoice["id"]])]
        for position, ident in enumerate(reversed(ids)):
            raw.execute("UPDATE invoice_lines SET position = ? WHERE id = ?", [position, ident])
        raw.commit()
    finally:
        raw.close()
    after = await store.get_invoice(invoice["id"])
    assert len(ids) > 1 and after["lines"] == before["lines"][::-1]
    assert len(after["payments"]) >= 2 and after["payments"] == sorted(
        after["payments"], key=lambda p: (p["received_on"], p["id"]))
    assert len({p["id"] for p in after["payments"]}) == len(after["payments"])
