"""The service on a real Postgres (asyncpg), as docker-compose runs it: a throw-away cluster per module."""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from app.db import Database
from app.main import create_app
from app.settings import Settings, database_url
from tests.service_kit import ACME_INVOICES, GLOBEX_INVOICES, call, free_socket


def pg_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)),
                                       None)
    assert found, f"{name} not found: install Debian's postgresql package (scripts/system_deps.sh does)"
    return found


def as_owner(argv: list[str]) -> list[str]:
    # Postgres refuses to run as root; the Debian package creates a `postgres` user for that.
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@pytest.fixture(scope="module")
def postgres_url():
    base = Path(tempfile.mkdtemp(prefix="mcpfusion-pg-"))
    data = base / "data"
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    subprocess.run(as_owner([pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "mcpfusion", "--no-sync"]),
                   check=True, capture_output=True, timeout=120)
    subprocess.run(as_owner([pg_bin("pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-o",
                             f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -F", "start"]),
                   check=True, capture_output=True, timeout=120)
    try:
        subprocess.run([pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "mcpfusion", "billing"],
                       check=True, capture_output=True, timeout=60)
        yield f"postgresql://mcpfusion@127.0.0.1:{port}/billing"
    finally:
        subprocess.run(as_owner([pg_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                       capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)


def test_database_url_selects_asyncpg(postgres_url):
    assert database_url(postgres_url, "ignored").startswith("postgresql+asyncpg://")


async def test_replicas_starting_together_seed_once(postgres_url):
    url = database_url(postgres_url, "")
    databases = [Database(url) for _ in range(3)]
    await asyncio.gather(*(db.ready() for db in databases))
    for db in databases:
        await db.dispose()
    app = create_app(Settings(database_url=url))
    summary = (await call("inproc", app, "billing", "revenue_summary", {}, "demo-admin")).data
    assert summary["invoice_count"] == len(ACME_INVOICES)


@pytest.mark.parametrize("transport", ["inproc", "rest"])
async def test_actions_and_tenancy_on_postgres(postgres_url, transport):
    settings = Settings(database_url=database_url(postgres_url, ""), credentials={"PAYMENT_API_KEY": "k"})
    app = create_app(settings)
    globex = (await call(transport, app, "billing", "list_invoices", {}, "demo-globex-admin")).data
    assert {row["id"] for row in globex} >= GLOBEX_INVOICES  # (+ invoices created by earlier tests)
    assert all(row["number"].startswith("GLOBEX-") for row in globex)
    assert (await call(transport, app, "billing", "get_invoice", {"id": "inv_0001"}, "demo-globex-admin")
            ).error_code == "NOT_FOUND"
    created = await call(transport, app, "billing", "create_invoice",
                         {"customer_id": "cus_0101", "due_date": "2031-01-01",
                          "lines": [{"description": "x", "quantity": 2, "unit_price_cents": 500}]},
                         "demo-globex-admin")
    assert created.error_code is None, created
    invoice_id = created.data["id"]
    await call(transport, app, "billing", "update_invoice_status", {"id": invoice_id, "status": "sent"},
               "demo-globex-admin")
    paid = await call(transport, app, "billing", "record_payment", {"id": invoice_id, "amount_cents": 1000},
                      "demo-globex-admin")
    assert paid.error_code is None, paid
    assert paid.data["status"] == "paid" and len(paid.data["payments"]) == 1
    customers = (await call(transport, app, "customers", "list", {}, "demo-support")).data
    assert {c["email"] for c in customers} == {"[REDACTED]"} and len(customers) == 5
    summary = (await call(transport, app, "billing", "revenue_summary", {}, "demo-globex-admin")).data
    assert summary["currency"] == "USD" and summary["count_by_status"]["paid"] >= 3

    restarted = create_app(settings)
    again = await call(transport, restarted, "billing", "get_invoice", {"id": invoice_id}, "demo-globex-admin")
    assert again.data["paid_cents"] == 1000
    assert (await call(transport, restarted, "billing", "get_invoice", {"id": invoice_id}, "demo-admin")
            ).error_code == "NOT_FOUND"
