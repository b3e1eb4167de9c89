"""Two replicas of the reference service on one SQLite file, 96 concurrent writers: no write is lost."""

from __future__ import annotations

import asyncio

import httpx

from app.db import SQLITE_BUSY_TIMEOUT_MS
from tests.service_kit import build

CONCURRENCY = 96
WRITES = 192


async def test_two_replicas_on_one_sqlite_file_lose_no_write(tmp_path):
    replicas = [build(tmp_path), build(tmp_path)]  # two apps, two engines and pools, one database file
    for app in replicas:
        await app.state.db.ready()
    clients = [httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=120)
               for app in replicas]
    gate = asyncio.Semaphore(CONCURRENCY)
    headers = {"authorization": "Bearer demo-admin"}

    async def write(n: int) -> httpx.Response:
        body = {"customer_id": "cus_0001", "due_date": "2031-01-01",
                "lines": [{"description": f"write {n}", "unit_price_cents": n + 1}]}
        async with gate:
            return await clients[n % 2].post("/api/billing/create_invoice", json=body, headers=headers)

    try:
        responses = await asyncio.gather(*(write(n) for n in range(WRITES)))
        failed = [r.text for r in responses if r.status_code != 200]
        assert failed == []
        created = [r.json() for r in responses]
        assert len({c["id"] for c in created}) == WRITES and len({c["number"] for c in created}) == WRITES
        async with replicas[0].state.db.engine.connect() as conn:
            mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar()
            timeout = (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar()
            stored = (await conn.exec_driver_sql(
                "SELECT count(*) FROM invoice_lines WHERE description LIKE 'write %'")).scalar()
        assert mode == "wal" and timeout == SQLITE_BUSY_TIMEOUT_MS
        assert stored == WRITES
    finally:
        for client in clients:
            await client.aclose()
        for app in replicas:
            await app.state.db.dispose()
