"""Writes survive a restart: the SQLite file is created and seeded once, then only written by actions."""

from __future__ import annotations

import httpx

from tests.service_kit import build, call, confirm_token, rest, serve

LINES = [{"description": "Hosting (month)", "quantity": 3, "unit_price_cents": 2500}]


async def test_writes_survive_a_real_server_restart(tmp_path):
    with serve(build(tmp_path)) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            r = await rest(client, "billing", "create_invoice",
                           {"customer_id": "cus_0002", "due_date": "2030-06-30", "lines": LINES}, "demo-admin")
            assert r.status_code == 200, r.text
            invoice_id = r.json()["id"]
            assert (await rest(client, "billing", "update_invoice_status", {"id": invoice_id, "status": "sent"},
                               "demo-admin")).status_code == 200
            paid = await rest(client, "billing", "record_payment", {"id": invoice_id, "amount_cents": 2500},
                              "demo-admin")
            assert paid.json()["paid_cents"] == 2500
            assert (await rest(client, "billing", "remind", {"id": invoice_id}, "demo-admin")).status_code == 200
            void = {"id": "inv_0003", "reason": "duplicate"}
            asked = await rest(client, "billing", "void_invoice", void, "demo-admin")
            assert asked.status_code == 428  # confirmation required: nothing voided yet
            assert (await rest(client, "billing", "void_invoice", {**void, "_confirm": confirm_token(asked.text)},
                               "demo-admin")).status_code == 200

    assert (tmp_path / "billing.sqlite3").is_file()
    with serve(build(tmp_path)) as base:  # a new process-like start on the same file
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            again = (await rest(client, "billing", "get_invoice", {"id": invoice_id}, "demo-admin")).json()
            voided = (await rest(client, "billing", "get_invoice", {"id": "inv_0003"}, "demo-admin")).json()
            summary = (await rest(client, "billing", "revenue_summary", {}, "demo-admin")).json()
    assert again["status"] == "sent" and again["paid_cents"] == 2500 and again["reminders_sent"] == 1
    assert again["lines"] == [{"description": "Hosting (month)", "quantity": 3, "unit_price_cents": 2500,
                               "amount_cents": 7500}]
    assert [p["amount_cents"] for p in again["payments"]] == [2500]
    assert voided["status"] == "void" and voided["void_reason"] == "duplicate"
    assert voided["internal_note"].startswith("Account manager")  # the note stays as written
    assert summary["invoice_count"] == 25  # seeded once, not re-seeded on restart


async def test_invoice_numbers_continue_after_restart(tmp_path):
    args = {"customer_id": "cus_0001", "due_date": "2030-01-01", "lines": LINES}
    first = await call("inproc", build(tmp_path), "billing", "create_invoice", args, "demo-admin")
    second = await call("inproc", build(tmp_path), "billing", "create_invoice", args, "demo-admin")
    assert (first.data["number"], second.data["number"]) == ("ACME-0025", "ACME-0026")


async def test_database_path_is_configurable(tmp_path):
    from app.main import create_app
    from app.settings import Settings

    path = tmp_path / "nested" / "custom.sqlite3"
    app = create_app(Settings.from_env({"MCPFUSION_DB_PATH": str(path)}))
    outcome = await call("inproc", app, "customers", "list", {}, "demo-admin")
    assert len(outcome.data) == 5 and path.is_file()
