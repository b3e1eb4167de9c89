"""`record_payment(idempotency_key=...)`: an agent that retries a payment whose answer it lost (a timeout, a
dropped connection after the commit) sends the same key and the payment is recorded once, over MCP, REST and
in process, on SQLite and Postgres, also when the two attempts race. A key reused for another payment is a
CONFLICT and records nothing; payments without a key are recorded each time, as before. A database made
before the column existed gets it, its payments kept."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from app.db import Database
from app.main import create_app
from app.settings import Settings, database_url
from tests.service_kit import META, asgi_client, build, call
from tests.test_service_postgres import postgres_url  # noqa: F401  (the fixture: a throw-away cluster)

ADMIN = "demo-admin"
TRANSPORTS = ["mcp", "rest", "inproc"]


async def _sent_invoice(transport: str, app, total_cents: int = 5000) -> str:
    created = await call(transport, app, "billing", "create_invoice",
                         {"customer_id": "cus_0001", "due_date": "2031-01-01",
                          "lines": [{"description": "Retry", "unit_price_cents": total_cents}]}, ADMIN)
    assert created.error_code is None, created
    invoice_id: str = created.data["id"]
    sent = await call(transport, app, "billing", "update_invoice_status", {"id": invoice_id, "status": "sent"}, ADMIN)
    assert sent.error_code is None, sent
    return invoice_id


async def _pay(transport: str, app, invoice_id: str, cents: int, key: str | None = None, method: str = "card"):
    args = {"id": invoice_id, "amount_cents": cents, "method": method}
    if key is not None:
        args["idempotency_key"] = key
    return await call(transport, app, "billing", "record_payment", args, ADMIN)


async def _stored(app, invoice_id: str) -> dict:
    got = await call("inproc", app, "billing", "get_invoice", {"id": invoice_id}, ADMIN)
    assert got.error_code is None, got
    return got.data


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_retried_payment_is_recorded_once(tmp_path, transport):
    app = build(tmp_path)
    invoice_id = await _sent_invoice(transport, app)
    first = await _pay(transport, app, invoice_id, 1000, "pay-7f3a-0001")
    again = await _pay(transport, app, invoice_id, 1000, "pay-7f3a-0001")
    assert first.error_code is None and again.error_code is None, (first, again)
    assert again.data["paid_cents"] == first.data["paid_cents"] == 1000
    assert [p["id"] for p in again.data["payments"]] == [p["id"] for p in first.data["payments"]]
    stored = await _stored(app, invoice_id)
    assert stored["paid_cents"] == 1000 and len(stored["payments"]) == 1
    # Another key is another payment; so is a payment without a key, each time.
    await _pay(transport, app, invoice_id, 500, "pay-7f3a-0002")
    await _pay(transport, app, invoice_id, 500)
    await _pay(transport, app, invoice_id, 500)
    stored = await _stored(app, invoice_id)
    assert stored["paid_cents"] == 2500 and len(stored["payments"]) == 4


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_retry_of_the_payment_that_paid_the_invoice_is_not_refused(tmp_path, transport):
    # The first attempt paid the invoice in full: its retry answers the paid invoice, not "invoice is paid".
    app = build(tmp_path)
    invoice_id = await _sent_invoice(transport, app, 2000)
    assert (await _pay(transport, app, invoice_id, 2000, "settle-inv-2000")).error_code is None
    again = await _pay(transport, app, invoice_id, 2000, "settle-inv-2000")
    assert again.error_code is None, again
    assert again.data["status"] == "paid" and len(again.data["payments"]) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_key_reused_for_another_payment_is_a_conflict(tmp_path, transport):
    app = build(tmp_path)
    invoice_id = await _sent_invoice(transport, app)
    other_id = await _sent_invoice(transport, app)
    assert (await _pay(transport, app, invoice_id, 1000, "reused-key-01")).error_code is None
    for outcome in (await _pay(transport, app, invoice_id, 1200, "reused-key-01"),        # another amount
                    await _pay(transport, app, invoice_id, 1000, "reused-key-01", "transfer"),  # another method
                    await _pay(transport, app, other_id, 1000, "reused-key-01")):          # another invoice
        assert outcome.error_code == "CONFLICT", outcome
        assert "idempotency_key" in outcome.raw
    assert (await _stored(app, invoice_id))["paid_cents"] == 1000
    assert (await _stored(app, other_id))["paid_cents"] == 0


@pytest.mark.parametrize("key", ["short", "x" * 65, "nul\x00in-the-key"])
async def test_a_malformed_key_is_refused_before_anything_is_recorded(tmp_path, key):
    app = build(tmp_path)
    invoice_id = await _sent_invoice("inproc", app)
    for transport in TRANSPORTS:
        outcome = await _pay(transport, app, invoice_id, 1000, key)
        assert outcome.error_code is not None and "idempotency_key" in outcome.raw, (transport, outcome)
    assert (await _stored(app, invoice_id))["paid_cents"] == 0


def _properties_named(schema, name: str) -> list[dict]:
    """Every property `name` anywhere in a JSON schema (a grouped tool nests its actions' arguments)."""
    found = []
    if isinstance(schema, dict):
        props = schema.get("properties")
        if isinstance(props, dict) and isinstance(props.get(name), dict):
            found.append(props[name])
        for value in schema.values():
            found += _properties_named(value, name)
    elif isinstance(schema, list):
        for value in schema:
            found += _properties_named(value, name)
    return found


async def test_the_key_is_advertised_in_the_tools_input_schema(tmp_path):
    app = build(tmp_path)
    async with asgi_client(app) as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
        headers = {"accept": "application/json", "content-type": "application/json", "authorization": "Bearer demo-admin",
                   "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
        tools = (await client.post("/mcp", json=body, headers=headers)).json()["result"]["tools"]
    keys = [p for t in tools for p in _properties_named(t["inputSchema"], "idempotency_key")]
    assert keys and all(p["maxLength"] == 64 and "retry" in p["description"] for p in keys), tools


async def test_racing_retries_record_one_payment_on_sqlite(tmp_path):
    app = build(tmp_path)
    invoice_id = await _sent_invoice("inproc", app)
    outcomes = await asyncio.gather(*(_pay(t, app, invoice_id, 1000, "raced-key-0001") for t in TRANSPORTS * 3))
    assert all(o.error_code is None for o in outcomes), outcomes
    stored = await _stored(app, invoice_id)
    assert stored["paid_cents"] == 1000 and len(stored["payments"]) == 1


async def test_racing_retries_record_one_payment_on_postgres(postgres_url):  # noqa: F811
    app = create_app(Settings(database_url=database_url(postgres_url, ""), credentials={"PAYMENT_API_KEY": "k"}))
    invoice_id = await _sent_invoice("inproc", app)
    other_id = await _sent_invoice("inproc", app)
    outcomes = await asyncio.gather(*(_pay(t, app, invoice_id, 1000, "pg-raced-key-1") for t in TRANSPORTS * 3))
    assert all(o.error_code is None for o in outcomes), outcomes
    stored = await _stored(app, invoice_id)
    assert stored["paid_cents"] == 1000 and len(stored["payments"]) == 1
    # The same key for two invoices at once: one is recorded, the other is a conflict (the unique index).
    a, b = await asyncio.gather(_pay("inproc", app, other_id, 700, "pg-two-invoices"),
                                _pay("rest", app, invoice_id, 700, "pg-two-invoices"))
    assert sorted([a.error_code or "", b.error_code or ""]) == ["", "CONFLICT"], (a, b)
    assert (await _stored(app, other_id))["paid_cents"] + (await _stored(app, invoice_id))["paid_cents"] == 1700


async def test_a_database_made_before_the_key_gets_the_column_and_keeps_its_payments(tmp_path):
    path = tmp_path / "billing.sqlite3"
    db = Database(database_url(None, path))
    await db.ready()  # today's schema and the demo data
    await db.dispose()
    with sqlite3.connect(path) as conn:  # as an older version left it: no key column, no index
        before = conn.execute("SELECT id, amount_cents FROM payments ORDER BY id").fetchall()
        assert before  # (the demo data has payments: the test means something)
        conn.execute("DROP INDEX ux_payments_idempotency_key")
        conn.execute("ALTER TABLE payments DROP COLUMN idempotency_key")
    db = Database(database_url(None, path))
    await db.ready()
    await db.dispose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT id, amount_cents FROM payments ORDER BY id").fetchall() == before
        columns = {row[1] for row in conn.execute("PRAGMA table_info(payments)")}
        indexes = {row[1] for row in conn.execute("PRAGMA index_list(payments)")}
    assert "idempotency_key" in columns and "ux_payments_idempotency_key" in indexes
    app = build(tmp_path)
    invoice_id = await _sent_invoice("inproc", app)
    assert (await _pay("inproc", app, invoice_id, 100, "after-upgrade")).error_code is None
    assert (await _pay("inproc", app, invoice_id, 100, "after-upgrade")).error_code is None
    assert (await _stored(app, invoice_id))["paid_cents"] == 100
