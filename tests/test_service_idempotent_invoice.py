"""`create_invoice(idempotency_key=...)` (/tmp/probe2 item 1): an agent that retries a create whose answer it
lost sends the same key and gets the same invoice, over MCP, REST and in process, also when the attempts race
(SQLite and Postgres). A key reused for another invoice is a CONFLICT and creates nothing; a blank key is a
validation error; creates without a key make an invoice each time, as before."""

from __future__ import annotations

import asyncio

import pytest

from app.main import create_app
from app.settings import Settings, database_url
from tests.service_kit import build, call
from tests.test_service_idempotent_payment import ADMIN, TRANSPORTS
from tests.test_service_postgres import postgres_url  # noqa: F401  (the fixture: a throw-away cluster)

NEW = {"customer_id": "cus_0001", "due_date": "2031-01-01",
       "lines": [{"description": "Setup", "unit_price_cents": 5000}, {"description": "Hours", "quantity": 3,
                                                                       "unit_price_cents": 1200}]}


async def _create(transport: str, app, key: str | None = None, **changes):
    args = {**NEW, **changes} if key is None else {**NEW, **changes, "idempotency_key": key}
    return await call(transport, app, "billing", "create_invoice", args, ADMIN)


async def _count(app) -> int:
    listed = await call("inproc", app, "billing", "export_invoices", {}, ADMIN)
    return len(listed.data)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_retried_create_returns_the_same_invoice(tmp_path, transport):
    app = build(tmp_path)
    before = await _count(app)
    first = await _create(transport, app, "inv-7f3a-0001")
    again = await _create(transport, app, "inv-7f3a-0001")
    assert first.error_code is None and again.error_code is None, (first, again)
    assert again.data["id"] == first.data["id"] and again.data["number"] == first.data["number"]
    assert await _count(app) == before + 1
    # Another key is another invoice; so is a create without a key, each time.
    assert (await _create(transport, app, "inv-7f3a-0002")).data["id"] != first.data["id"]
    await _create(transport, app)
    await _create(transport, app)
    assert await _count(app) == before + 4


@pytest.mark.parametrize("change", [{"customer_id": "cus_0002"}, {"due_date": "2031-01-02"},
                                    {"internal_note": "other"}, {"lines": [{"description": "Setup",
                                                                            "unit_price_cents": 5001}]}])
async def test_a_key_reused_for_another_invoice_is_a_conflict(tmp_path, change):
    app = build(tmp_path)
    assert (await _create("inproc", app, "inv-key-reuse")).error_code is None
    before = await _count(app)
    other = await _create("rest", app, "inv-key-reuse", **change)
    assert other.error_code == "CONFLICT" and "already used for another invoice" in other.raw, other
    assert await _count(app) == before


@pytest.mark.parametrize("key, said", [(" " * 8, "must not be blank"), ("\u200b" * 8, "must not be blank"),
                                       ("k" * 65, "at most 64")])
async def test_a_malformed_key_is_refused_before_anything_is_created(tmp_path, key, said):
    app = build(tmp_path)
    before = await _count(app)
    refused = await _create("rest", app, key)
    assert refused.error_code == "VALIDATION_ERROR" and "idempotency_key" in refused.raw, refused
    assert said in refused.raw and (said != "must not be blank" or "for this invoice" in refused.raw)
    assert await _count(app) == before


async def test_racing_retries_create_one_invoice_on_sqlite(tmp_path):
    app = build(tmp_path)
    before = await _count(app)
    outcomes = await asyncio.gather(*(_create(t, app, "raced-inv-0001") for t in TRANSPORTS * 7))
    assert all(o.error_code is None for o in outcomes), outcomes
    assert len({o.data["id"] for o in outcomes}) == 1 and await _count(app) == before + 1


async def test_racing_retries_create_one_invoice_on_postgres(postgres_url):  # noqa: F811
    app = create_app(Settings(database_url=database_url(postgres_url, ""), credentials={"PAYMENT_API_KEY": "k"}))
    before = await _count(app)
    outcomes = await asyncio.gather(*(_create(t, app, "pg-raced-inv-1") for t in TRANSPORTS * 7))
    assert all(o.error_code is None for o in outcomes), outcomes
    assert len({o.data["id"] for o in outcomes}) == 1 and await _count(app) == before + 1


async def test_a_short_key_is_a_key_its_schema_says_so_and_its_reuse_is_still_a_conflict(tmp_path):
    # No least length (unlike a payment's key): what the listing says of it holds, and a short key an agent
    # sends again for another invoice is refused, never read as the first one's retry.
    app = build(tmp_path)
    first = await _create("inproc", app, "1")
    again = await _create("rest", app, "1")
    other = await _create("inproc", app, "1", due_date="2031-01-02")
    assert first.error_code is None and again.data["id"] == first.data["id"], (first, again)
    assert other.error_code == "CONFLICT" and "already used for another invoice" in other.raw
