"""Concurrent writes to one invoice on SQLite, over REST and MCP: each write's check and change is one
step, so parallel payments never pay more than the total, a void and a payment never both succeed, and
parallel reminders remind once."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest

from tests.service_kit import asgi_client, confirm_token, mcp, rest

ADMIN = "demo-admin"
PARALLEL = 10


async def write(client: httpx.AsyncClient, transport: str, action: str, args: dict[str, Any]) -> str | None:
    """One billing call: None when it succeeded, else its error code."""
    if transport == "rest":
        r = await rest(client, "billing", action, args, ADMIN)
        return None if r.status_code == 200 else f"{r.status_code} {r.json()['code']}"
    r = await mcp(client, "billing", action, args, ADMIN)
    result = r.json()["result"]
    if not result["isError"]:
        return None
    found = re.search(r'code="([A-Z_]+)"', result["content"][0]["text"])
    return found.group(1) if found else result["content"][0]["text"]


async def sent_invoice(client: httpx.AsyncClient, total_cents: int) -> str:
    body = {"customer_id": "cus_0001", "due_date": "2031-01-01",
            "lines": [{"description": "Race", "unit_price_cents": total_cents}]}
    created = await rest(client, "billing", "create_invoice", body, ADMIN)
    assert created.status_code == 200, created.text
    invoice_id: str = created.json()["id"]
    sent = await rest(client, "billing", "update_invoice_status", {"id": invoice_id, "status": "sent"}, ADMIN)
    assert sent.status_code == 200, sent.text
    return invoice_id


async def stored(client: httpx.AsyncClient, invoice_id: str) -> dict[str, Any]:
    r = await rest(client, "billing", "get_invoice", {"id": invoice_id}, ADMIN)
    assert r.status_code == 200, r.text
    invoice: dict[str, Any] = r.json()
    return invoice


def conflict(transport: str) -> str:
    return "409 CONFLICT" if transport == "rest" else "CONFLICT"


@pytest.mark.parametrize("transport", ["rest", "mcp"])
async def test_parallel_payments_never_pay_more_than_the_total(service_app, transport):
    async with asgi_client(service_app) as client:
        invoice_id = await sent_invoice(client, 5000)
        pay = {"id": invoice_id, "amount_cents": 1000}
        outcomes = await asyncio.gather(*(write(client, transport, "record_payment", pay) for _ in range(PARALLEL)))
        assert outcomes.count(None) == 5
        assert sorted(o for o in outcomes if o is not None) == [conflict(transport)] * 5
        invoice = await stored(client, invoice_id)
    assert invoice["status"] == "paid" and invoice["paid_cents"] == 5000
    assert sum(p["amount_cents"] for p in invoice["payments"]) == 5000 and len(invoice["payments"]) == 5


@pytest.mark.parametrize("transport", ["rest", "mcp"])
async def test_a_void_and_a_payment_never_both_succeed(service_app, transport):
    async with asgi_client(service_app) as client:
        for _ in range(4):
            invoice_id = await sent_invoice(client, 5000)
            void = {"id": invoice_id, "reason": "raced"}
            asked = await rest(client, "billing", "void_invoice", void, ADMIN)
            assert asked.json()["code"] == "CONFIRMATION_REQUIRED", asked.text
            void["_confirm"] = confirm_token(asked.text)
            voided, paid = await asyncio.gather(
                write(client, transport, "void_invoice", void),
                write(client, transport, "record_payment", {"id": invoice_id, "amount_cents": 1000}),
            )
            assert [voided, paid].count(None) == 1 and conflict(transport) in (voided, paid)
            invoice = await stored(client, invoice_id)
            if voided is None:
                assert invoice["status"] == "void" and invoice["paid_cents"] == 0 and invoice["payments"] == []
            else:
                assert invoice["status"] == "sent" and invoice["paid_cents"] == 1000
                assert [p["amount_cents"] for p in invoice["payments"]] == [1000]


@pytest.mark.parametrize("transport", ["rest", "mcp"])
async def test_parallel_reminders_remind_once(service_app, transport):
    # An invoice is reminded at most once per cool-down (app.store.REMIND_COOLDOWN): of identical calls at once,
    # one reminds and the others are told it went out, none lost and none sent twice.
    async with asgi_client(service_app) as client:
        invoice_id = await sent_invoice(client, 5000)
        outcomes = await asyncio.gather(*(write(client, transport, "remind", {"id": invoice_id})
                                          for _ in range(PARALLEL)))
        assert outcomes.count(None) == 1 and outcomes.count(conflict(transport)) == PARALLEL - 1, outcomes
        assert (await stored(client, invoice_id))["reminders_sent"] == 1
