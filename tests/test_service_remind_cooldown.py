"""`remind` is safe to retry (/tmp/probe2 item 1): an invoice is reminded at most once per
`app.store.REMIND_COOLDOWN` (an hour). A second reminder within it sends nothing and is a CONFLICT saying when
the last one went out and when the next may, over MCP, REST and in process; twenty identical calls at once
remind once, as the database decides it (one conditional UPDATE), on SQLite and Postgres. After the cool-down
the invoice is reminded again. A database made before the column existed gets it."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3

import pytest

from app import store
from app.db import Database
from app.main import create_app
from app.settings import Settings, database_url
from tests.service_kit import build, call
from tests.test_service_idempotent_payment import ADMIN, TRANSPORTS, _sent_invoice, _stored
from tests.test_service_postgres import postgres_url  # noqa: F401  (the fixture: a throw-away cluster)


def _clock(monkeypatch: pytest.MonkeyPatch, at: dt.datetime) -> None:
    monkeypatch.setattr(store.BillingStore, "now", staticmethod(lambda: at))


def test_the_cool_down_is_an_hour():
    assert dt.timedelta(hours=1) == store.REMIND_COOLDOWN


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_second_reminder_within_the_cool_down_says_when_the_last_went_out(tmp_path, transport, monkeypatch):
    app = build(tmp_path)
    invoice_id = await _sent_invoice(transport, app)
    _clock(monkeypatch, dt.datetime(2031, 1, 1, 9, 30, 15, 123456))
    first = await call(transport, app, "billing", "remind", {"id": invoice_id}, ADMIN)
    assert first.error_code is None and first.data["reminders_sent"] == 1, first
    _clock(monkeypatch, dt.datetime(2031, 1, 1, 10, 30, 14))  # a second short of the hour
    again = await call(transport, app, "billing", "remind", {"id": invoice_id, "message": "Retry"}, ADMIN)
    assert again.error_code == "CONFLICT", again
    assert "was already sent at 2031-01-01T09:30:15Z (reminder #1)" in again.raw
    assert "that reminder went out: do not send it again" in again.raw and "after 2031-01-01T10:30:15Z" in again.raw
    stored = await _stored(app, invoice_id)
    assert stored["reminders_sent"] == 1
    sent = await store.BillingStore(app.state.db, _admin()).reminders(invoice_id)
    assert [r["message"] for r in sent] == [None]  # the refused one recorded nothing
    _clock(monkeypatch, dt.datetime(2031, 1, 1, 10, 30, 15, 123456))  # the hour has passed
    later = await call(transport, app, "billing", "remind", {"id": invoice_id}, ADMIN)
    assert later.error_code is None and later.data["reminders_sent"] == 2, later


def _admin():
    from app.auth import Principal

    return Principal("demo-admin", "acme", "admin")


async def test_the_cool_down_is_per_invoice(tmp_path):
    app = build(tmp_path)
    one, other = await _sent_invoice("inproc", app), await _sent_invoice("inproc", app)
    for invoice_id in (one, other):
        reminded = await call("inproc", app, "billing", "remind", {"id": invoice_id}, ADMIN)
        assert reminded.error_code is None, reminded


async def test_twenty_identical_reminders_at_once_remind_once_on_sqlite(tmp_path):
    app = build(tmp_path)
    invoice_id = await _sent_invoice("inproc", app)
    outcomes = await asyncio.gather(*(call(t, app, "billing", "remind", {"id": invoice_id, "message": "please pay"},
                                           ADMIN) for t in TRANSPORTS * 7))
    codes = [o.error_code for o in outcomes]
    assert codes.count(None) == 1 and codes.count("CONFLICT") == len(codes) - 1, outcomes
    assert (await _stored(app, invoice_id))["reminders_sent"] == 1
    assert len(await store.BillingStore(app.state.db, _admin()).reminders(invoice_id)) == 1


async def test_twenty_identical_reminders_at_once_remind_once_on_postgres(postgres_url):  # noqa: F811
    app = create_app(Settings(database_url=database_url(postgres_url, ""), credentials={"PAYMENT_API_KEY": "k"}))
    invoice_id = await _sent_invoice("inproc", app)
    outcomes = await asyncio.gather(*(call(t, app, "billing", "remind", {"id": invoice_id}, ADMIN)
                                      for t in TRANSPORTS * 7))
    codes = [o.error_code for o in outcomes]
    assert codes.count(None) == 1 and codes.count("CONFLICT") == len(codes) - 1, outcomes
    assert (await _stored(app, invoice_id))["reminders_sent"] == 1


async def test_a_database_made_before_the_stamp_gets_the_column_and_keeps_its_counts(tmp_path):
    path = tmp_path / "billing.sqlite3"
    db = Database(database_url(None, path))
    await db.ready()
    await db.dispose()
    with sqlite3.connect(path) as conn:  # as an older version left it: no stamp, no invoice key
        before = conn.execute("SELECT id, reminders_sent FROM invoices ORDER BY id").fetchall()
        conn.execute("DROP INDEX ux_invoices_idempotency_key")
        conn.execute("ALTER TABLE invoices DROP COLUMN last_reminded_at")
        conn.execute("ALTER TABLE invoices DROP COLUMN idempotency_key")
    db = Database(database_url(None, path))
    await db.ready()
    await db.dispose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT id, reminders_sent FROM invoices ORDER BY id").fetchall() == before
        columns = {row[1] for row in conn.execute("PRAGMA table_info(invoices)")}
        indexes = {row[1] for row in conn.execute("PRAGMA index_list(invoices)")}
    assert {"last_reminded_at", "idempotency_key"} <= columns and "ux_invoices_idempotency_key" in indexes
    app = build(tmp_path)
    assert (await call("inproc", app, "billing", "remind", {"id": "inv_0001"}, ADMIN)).error_code is None
    assert (await call("inproc", app, "billing", "remind", {"id": "inv_0001"}, ADMIN)).error_code == "CONFLICT"
