"""Round 7, the reference service as a product (fixes of a black-box probe):

1. Money is 64-bit in the database (a Postgres invoice over 2**31-1 cents was a 500), and an invoice totals at
   most `MAX_TOTAL_CENTS` (what one line can): a larger total is a validation error, never a database error.
2. Text to store holding NUL (PostgreSQL text cannot) is refused at validation, naming the field, before a
   confirmation is asked, and the schemas say so; an id holding NUL is answered as unknown (by the store: the
   invoice://{id} resource too), as a search holding it matches nothing.
3. A void (or draft) invoice's chart shows nothing outstanding, as revenue_summary and open balances count.
4. Every action's example call on /tools is legal on the demo data (2xx, or the designed confirmation).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import BigInteger

from app.auth import Principal
from app.db import Database
from app.main import create_app
from app.settings import Settings, database_url
from app.store import BillingStore
from app.tables import InvoiceRecord, PaymentRecord
from models import MAX_TOTAL_CENTS
from routers.billing import billing
from tests.service_kit import META, asgi_client, build, call, in_process, rest
from tests.test_service_postgres import postgres_url  # noqa: F401  (the fixture: a throw-away cluster)

ADMIN = {"authorization": "Bearer demo-admin"}
DUE = (dt.date.today() + dt.timedelta(days=30)).isoformat()
MAX_LINE = {"description": "Data migration", "quantity": 10_000, "unit_price_cents": 100_000_000}


def invoice(*lines: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"customer_id": "cus_0001", "due_date": DUE, "lines": list(lines), **extra}


# -- 1. money beyond 32 bits, and the cap on a total ---------------------------------------------------------------

def test_money_columns_are_64_bit():
    for column in (InvoiceRecord.total_cents, InvoiceRecord.paid_cents, InvoiceRecord.margin_cents,
                   PaymentRecord.amount_cents):
        assert isinstance(column.type, BigInteger), column
    assert MAX_LINE["quantity"] * MAX_LINE["unit_price_cents"] == MAX_TOTAL_CENTS


async def test_postgres_stores_and_pays_an_invoice_beyond_32_bits(postgres_url):  # noqa: F811
    app = create_app(Settings(database_url=database_url(postgres_url, ""), credentials={"PAYMENT_API_KEY": "k"}))
    big = {"description": "Data migration", "quantity": 100, "unit_price_cents": 21_474_837}  # 2**31 + 52 cents
    async with asgi_client(app) as client:
        before = (await rest(client, "billing", "revenue_summary", {}, "demo-admin")).json()["paid_cents"]
        for lines, total in [([big], 2_147_483_700), ([MAX_LINE], MAX_TOTAL_CENTS)]:
            r = await rest(client, "billing", "create_invoice", invoice(*lines), "demo-admin")
            assert r.status_code == 200, r.text
            assert r.json()["total_cents"] == total
            ident = r.json()["id"]
            r = await rest(client, "billing", "update_invoice_status", {"id": ident, "status": "sent"}, "demo-admin")
            assert r.status_code == 200, r.text
            r = await rest(client, "billing", "record_payment", {"id": ident, "amount_cents": total}, "demo-admin")
            assert r.status_code == 200, r.text
            assert (r.json()["status"], r.json()["paid_cents"], r.json()["payments"][0]["amount_cents"]) == (
                "paid", total, total)
        summary = (await rest(client, "billing", "revenue_summary", {}, "demo-admin")).json()
        assert summary["paid_cents"] == before + 2_147_483_700 + MAX_TOTAL_CENTS


@pytest.mark.parametrize("transport", ["inproc", "rest", "mcp"])
async def test_a_total_over_the_cap_is_a_validation_error_and_nothing_is_stored(tmp_path, transport):
    app = build(tmp_path)
    count = (await call("inproc", app, "billing", "revenue_summary", {}, "demo-admin")).data["invoice_count"]
    over = await call(transport, app, "billing", "create_invoice", invoice(MAX_LINE, MAX_LINE), "demo-admin")
    assert over.error_code == "VALIDATION_ERROR", over
    assert f"at most {MAX_TOTAL_CENTS} cents" in over.raw
    at_cap = await call(transport, app, "billing", "create_invoice", invoice(MAX_LINE), "demo-admin")
    assert at_cap.error_code is None and at_cap.data["total_cents"] == MAX_TOTAL_CENTS, at_cap
    after = (await call("inproc", app, "billing", "revenue_summary", {}, "demo-admin")).data["invoice_count"]
    assert after == count + 1


async def test_a_total_over_the_cap_is_a_422_naming_the_lines(tmp_path):
    async with asgi_client(build(tmp_path)) as client:
        r = await rest(client, "billing", "create_invoice", invoice(MAX_LINE, MAX_LINE), "demo-admin")
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "VALIDATION_ERROR" and r.json()["details"] == {"field": "lines"}
    assert "Split the amount over several invoices" in r.json()["recovery"]


# -- 2. NUL in text inputs ----------------------------------------------------------------------------------------

LINE = {"description": "Audit", "quantity": 1, "unit_price_cents": 500}
# Text to store: (tool, action, arguments, the field a 422 names)
NUL_TEXT = [
    ("billing", "create_invoice", invoice({**LINE, "description": "a\x00b"}), "lines[0].description"),
    ("billing", "create_invoice", invoice(LINE, internal_note="note\x00"), "internal_note"),
    ("billing", "void_invoice", {"id": "inv_0003", "reason": "dup\x00licate"}, "reason"),
    ("billing", "remind", {"id": "inv_0001", "message": "hello\x00"}, "message"),
]
# Ids looked up: (tool, action, arguments), answered as an unknown id (a void before its confirmation)
NUL_IDS = [
    ("billing", "create_invoice", {**invoice(LINE), "customer_id": "cus_0001\x00"}),
    ("billing", "void_invoice", {"id": "inv_0003\x00", "reason": "duplicate"}),
    ("billing", "update_invoice_status", {"id": "inv_0003\x00", "status": "sent"}),
    ("billing", "record_payment", {"id": "inv_0001\x00", "amount_cents": 1}),
    ("billing", "remind", {"id": "inv_0001\x00"}),
    ("billing", "get_invoice", {"id": "inv_0001\x00"}),
    ("billing", "invoice_pdf", {"id": "inv_0001\x00"}),
    ("customers", "get", {"id": "cus_0001\x00"}),
]


def refused_field(r: Any) -> str:
    body = r.json()
    assert r.status_code == 422 and body["code"] == "VALIDATION_ERROR", r.text
    if "errors" in body:
        [error] = body["errors"]
        assert "NUL character" in error["detail"], body
        return str(error["field"])
    assert "NUL character" in body["detail"], body
    return str(body["details"]["field"])


def unknown(r: Any) -> bool:
    return r.status_code == 404 and r.json()["code"] == "NOT_FOUND"


async def unchanged(app: Any) -> None:
    """The demo's invoices as they were: nothing created, voided, sent, paid or reminded."""
    async with asgi_client(app) as client:
        rows = (await rest(client, "billing", "list_invoices", {"status": "void"}, "demo-admin")).json()
        assert {r["id"] for r in rows} == {"inv_0007", "inv_0014", "inv_0021"}
        summary = (await rest(client, "billing", "revenue_summary", {}, "demo-admin")).json()
        assert summary["invoice_count"] == 24 and summary["count_by_status"]["draft"] == 4
        assert (await rest(client, "billing", "get_invoice", {"id": "inv_0001"}, "demo-admin")).json()[
            "reminders_sent"] == 0


@pytest.mark.parametrize(("tool", "action", "args", "field"), NUL_TEXT,
                         ids=[f"{action}-{field}" for _, action, _, field in NUL_TEXT])
async def test_nul_in_text_to_store_is_a_422_naming_the_field(tmp_path, tool, action, args, field):
    app = build(tmp_path)
    async with asgi_client(app) as client:
        assert refused_field(await rest(client, tool, action, args, "demo-admin")) == field  # never a 428 first
    await unchanged(app)


@pytest.mark.parametrize(("tool", "action", "args"), NUL_IDS, ids=[f"{a[1]}-{i}" for i, a in enumerate(NUL_IDS)])
async def test_an_id_holding_nul_is_an_unknown_id(tmp_path, tool, action, args):
    app = build(tmp_path)
    async with asgi_client(app) as client:
        r = await rest(client, tool, action, args, "demo-admin")
        assert unknown(r), r.text
        r = await rest(client, "billing", "list_invoices", {"customer_id": "cus_0002\x00"}, "demo-admin")
        assert (r.status_code, r.json()) == (200, [])
    await unchanged(app)


async def test_mcp_refuses_nul_text_before_the_confirmation(tmp_path):
    app = build(tmp_path)
    assert "pattern" not in billing.actions["void_invoice"].input_schema["properties"]["reason"]  # (no tokens)
    result = await in_process(app).call("billing", "void_invoice", {"id": "inv_0003", "reason": "dup\x00licate"},
                                        headers=ADMIN)
    assert result.error_code == "VALIDATION_ERROR", result.text
    assert 'name="reason"' in result.text and "NUL character" in result.text


async def test_postgres_answers_nul_text_and_ids_without_a_database_error(postgres_url):  # noqa: F811
    url = database_url(postgres_url, "")
    app = create_app(Settings(database_url=url, credentials={"PAYMENT_API_KEY": "k"}))
    async with asgi_client(app) as client:
        for tool, action, args, field in NUL_TEXT:
            assert refused_field(await rest(client, tool, action, args, "demo-admin")) == field, (action, args)
        for tool, action, args in NUL_IDS:
            r = await rest(client, tool, action, args, "demo-admin")
            assert unknown(r), (action, r.text)
        for tool, action, args in [("billing", "list_invoices", {"customer_id": "cus_0001\x00"}),
                                   ("customers", "list", {"search": "Contoso\x00"})]:
            r = await rest(client, tool, action, args, "demo-admin")
            assert (r.status_code, r.json()) == (200, [])
        # The invoice://{id} resource reaches the store without a tool's validation: an unknown id.
        uri = "invoice://inv_0001\x00"
        name = "=?base64?" + base64.b64encode(uri.encode()).decode() + "?="
        r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                                            "params": {"uri": uri, "_meta": META}},
                              headers={**ADMIN, "accept": "application/json", "mcp-protocol-version": "2026-07-28",
                                       "mcp-method": "resources/read", "mcp-name": name})
        assert r.json()["error"]["data"]["code"] == "NOT_FOUND", r.text
    db = Database(url)
    store = BillingStore(db, Principal("demo-admin", "acme", "admin"))
    try:
        assert await store.reminders("inv_0001\x00") == []
    finally:
        await db.dispose()


# -- 3. the detail chart's outstanding amount ---------------------------------------------------------------------

def chart_data(result: Any) -> dict[str, float]:
    [chart] = [b for b in result.ui_blocks if b.type == "echarts"]
    config = json.loads(chart.content.split("\n", 1)[1].rsplit("\n", 1)[0])
    return {d["name"]: d["value"] for d in config["series"][0]["data"]}


@pytest.mark.parametrize("token", ["demo-admin", "demo-support"])
async def test_only_a_sent_invoice_charts_an_outstanding_amount(tmp_path, token):
    t = in_process(build(tmp_path))
    headers = {"authorization": f"Bearer {token}"}
    seen = set()
    for n in range(1, 8):  # the demo's statuses: sent, paid, draft, sent, paid, sent, void
        result = await t.call("billing", "get_invoice", {"id": f"inv_{n:04d}"}, headers=headers)
        status, total, paid = (result.data[k] for k in ("status", "total_cents", "paid_cents"))
        owed = total - paid if status == "sent" else 0  # what revenue_summary and open balances count
        assert chart_data(result) == {"Paid": paid / 100, "Outstanding": owed / 100}, (n, status)
        seen.add(status)
    assert seen == {"draft", "sent", "paid", "void"}
    void = await t.call("billing", "get_invoice", {"id": "inv_0007"}, headers=headers)
    assert void.data["status"] == "void" and void.data["total_cents"] > 0
    assert chart_data(void)["Outstanding"] == 0


# -- 4. the docs' example calls -----------------------------------------------------------------------------------

CURL = re.compile(r"curl -X POST \S+/api/(\w+)/(\w+)((?: \\\n\s*-H [^\n]*)*) \\\n\s*-d '(\{.*?\})'")


async def docs_examples(tmp_path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    app = build(tmp_path / "docs")
    async with asgi_client(app) as client:
        page = html.unescape((await client.get("/tools", headers=ADMIN)).text)
    found = [(tool, action, json.loads(body)) for tool, action, _, body in CURL.findall(page)]
    assert {(tool, action) for tool, action, _ in found} == {
        (a.tool.name, a.name) for a in app.state.mcpfusion.registry.actions()}
    return found


def legal(r: Any) -> bool:
    return r.status_code < 300 or (r.status_code == 428 and r.json()["code"] == "CONFIRMATION_REQUIRED")


async def test_every_docs_example_call_is_legal_on_the_demo_data(tmp_path):
    examples = await docs_examples(tmp_path)
    assert ("billing", "update_invoice_status", {"id": "inv_0003", "status": "sent"}) in examples
    for n, (tool, action, body) in enumerate(examples):  # each on demo data of its own
        async with asgi_client(build(tmp_path / str(n))) as client:
            r = await rest(client, tool, action, body, "demo-admin")
            assert legal(r), (tool, action, body, r.text)
    async with asgi_client(build(tmp_path / "all")) as client:  # and one after the other, as the page lists them
        for tool, action, body in examples:
            r = await rest(client, tool, action, body, "demo-admin")
            assert legal(r), (tool, action, body, r.text)


async def test_a_database_made_with_32_bit_money_columns_is_widened_at_start(postgres_url):  # noqa: F811
    import subprocess
    from urllib.parse import urlsplit

    from sqlalchemy import inspect as inspect_db
    from sqlalchemy import text as sql

    from app.db import MONEY_COLUMNS, Database
    from tests.test_service_postgres import pg_bin

    where = urlsplit(postgres_url)
    subprocess.run([pg_bin("createdb"), "-h", where.hostname, "-p", str(where.port), "-U", "mcpfusion", "older"],
                   check=True, capture_output=True, timeout=60)
    url = database_url(postgres_url.rsplit("/", 1)[0] + "/older", "")
    db = Database(url)
    await db.ready()  # as an earlier version made it, then its money columns as they were (32-bit)
    async with db.engine.begin() as conn:
        for table, names in MONEY_COLUMNS.items():
            for name in names:
                await conn.execute(sql(f"ALTER TABLE {table} ALTER COLUMN {name} TYPE INTEGER"))
    await db.dispose()
    db = Database(url)
    await db.ready()
    async with db.engine.connect() as conn:
        kinds = await conn.run_sync(lambda c: {(t, col["name"]): str(col["type"]) for t in MONEY_COLUMNS
                                               for col in inspect_db(c).get_columns(t)})
    await db.dispose()
    assert all(kinds[(table, name)] == "BIGINT" for table, names in MONEY_COLUMNS.items() for name in names)
