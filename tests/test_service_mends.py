"""The reference service under a locked database (another process holding SQLite's write lock) and with
invoices that total 0: retryable answers, nothing half-written, no recovery that leads to a refused call."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from app.store import BUSY_RETRY_AFTER
from tests.service_kit import in_process, mcp, rest

ADMIN = {"authorization": "Bearer demo-admin"}
INVOICE = "inv_0013"  # a sent acme invoice with money owed
DUE = (dt.date.today() + dt.timedelta(days=30)).isoformat()


def _database(app: FastAPI) -> Path:
    return Path(app.state.settings.database_url.split("///", 1)[1])


@contextmanager
def write_lock_held(path: Path) -> Iterator[None]:
    """SQLite's write lock held by another connection (as a backup, a migration or another replica would)."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
        holder.execute("ROLLBACK")
    finally:
        holder.close()


def _stored(path: Path) -> tuple[Any, ...]:
    with sqlite3.connect(path) as conn:
        paid, reminders = conn.execute("SELECT paid_cents, reminders_sent FROM invoices WHERE id=?",
                                       (INVOICE,)).fetchone()
        payments = conn.execute("SELECT count(*) FROM payments WHERE invoice_id=?", (INVOICE,)).fetchone()[0]
    return paid, reminders, payments


def _tool_error_code(response: httpx.Response) -> str:
    result = response.json()["result"]
    assert result["isError"], response.text
    return result["content"][0]["text"].split('code="', 1)[1].split('"', 1)[0]


async def test_writes_on_a_locked_database_answer_busy_and_reads_go_on(service_app):
    await service_app.state.db.ready()
    path = _database(service_app)
    before = _stored(path)
    transport = httpx.ASGITransport(app=service_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=90) as client:
        with write_lock_held(path):
            pay = {"id": INVOICE, "amount_cents": 1}
            writes = [
                asyncio.create_task(rest(client, "billing", "record_payment", pay, "demo-admin")),
                asyncio.create_task(mcp(client, "billing", "record_payment", pay, "demo-admin")),
                asyncio.create_task(mcp(client, "billing", "remind", {"id": INVOICE}, "demo-admin")),  # Timeout(10)
            ]
            await asyncio.sleep(0.3)
            # the event loop is free while the writes wait: reads are answered before any write is
            read = await rest(client, "billing", "get_invoice", {"id": INVOICE}, "demo-admin")
            assert read.status_code == 200 and not any(task.done() for task in writes)
            rest_pay, mcp_pay, remind = await asyncio.gather(*writes)
        # REST: a retryable 503 with Retry-After, never a 500; MCP: BUSY, the remind's guard never reached
        assert rest_pay.status_code == 503, rest_pay.text
        assert rest_pay.json()["code"] == "BUSY" and rest_pay.headers["retry-after"] == str(BUSY_RETRY_AFTER)
        assert "Traceback" not in rest_pay.text and "locked" in rest_pay.json()["detail"]
        assert _tool_error_code(mcp_pay) == "BUSY" and _tool_error_code(remind) == "BUSY"
        assert _stored(path) == before  # nothing half-written
        # once the lock is released, the same calls go through
        assert (await rest(client, "billing", "record_payment", pay, "demo-admin")).status_code == 200
        assert (await rest(client, "billing", "remind", {"id": INVOICE}, "demo-admin")).status_code == 200
    paid, reminders, payments = _stored(path)
    assert (paid, reminders, payments) == (before[0] + 1, before[1] + 1, before[2] + 1)


async def test_a_zero_total_invoice_is_refused_at_creation(service_app):
    t = in_process(service_app)
    before = await t.call("billing", "list_invoices", {"customer_id": "cus_0001"}, headers=ADMIN)
    free = {"customer_id": "cus_0001", "due_date": DUE,
            "lines": [{"description": "free trial", "quantity": 3, "unit_price_cents": 0}]}
    result = await t.call("billing", "create_invoice", free, headers=ADMIN)
    assert result.error_code == "VALIDATION_ERROR"
    assert "lines total 0 cents" in result.text and "unit_price_cents above 0" in result.text
    after = await t.call("billing", "list_invoices", {"customer_id": "cus_0001"}, headers=ADMIN)
    assert after.data == before.data  # nothing created
    transport = httpx.ASGITransport(app=service_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        refused = await rest(client, "billing", "create_invoice", free, "demo-admin")
    assert refused.status_code == 422 and refused.json()["details"] == {"field": "lines"}
    # a free line beside a priced one is fine
    mixed = {**free, "lines": [*free["lines"], {"description": "setup", "unit_price_cents": 100}]}
    created = await t.call("billing", "create_invoice", mixed, headers=ADMIN)
    assert not created.is_error and created.data["total_cents"] == 100


async def test_a_sent_invoice_owing_nothing_is_settled_not_stuck(service_app):
    """A zero-total invoice stored before they were refused: each answer's recovery is a call that works."""
    t = in_process(service_app)
    line = {"description": "trial", "unit_price_cents": 500}
    created = await t.call("billing", "create_invoice", {"customer_id": "cus_0001", "due_date": DUE,
                                                         "lines": [line]}, headers=ADMIN)
    invoice_id = created.data["id"]
    assert (await t.call("billing", "update_invoice_status", {"id": invoice_id, "status": "sent"},
                         headers=ADMIN)).data["status"] == "sent"
    with sqlite3.connect(_database(service_app)) as conn:  # as an older version let it be created
        conn.execute("UPDATE invoices SET total_cents=0 WHERE id=?", (invoice_id,))
        conn.execute("UPDATE invoice_lines SET unit_price_cents=0 WHERE invoice_id=?", (invoice_id,))

    for action, args in (("record_payment", {"amount_cents": 1}), ("remind", {})):
        refused = await t.call("billing", action, {"id": invoice_id, **args}, headers=ADMIN)
        assert refused.error_code == "CONFLICT" and "nothing is owed" in refused.text
        assert "update_invoice_status status=paid" in refused.text and "amount_cents=0" not in refused.text
    settled = await t.call("billing", "update_invoice_status", {"id": invoice_id, "status": "paid"}, headers=ADMIN)
    assert not settled.is_error and settled.data["status"] == "paid"
    assert settled.data["reminders_sent"] == 0 and settled.data["payments"] == []


async def test_an_invoice_owing_money_still_becomes_paid_only_by_payments(service_app):
    t = in_process(service_app)
    refused = await t.call("billing", "update_invoice_status", {"id": INVOICE, "status": "paid"}, headers=ADMIN)
    assert refused.error_code == "CONFLICT" and "record_payment (amount_cents=" in refused.text
