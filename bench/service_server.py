"""The reference service (`app.main.create_app`) as `bench/service.py` serves it, plus plain FastAPI routes
that make the same store calls on the same database in the same process: the floor the MCP calls are
compared with.

    DATABASE_URL=sqlite:///... uvicorn service_server:app --app-dir bench

`POST /plain/{action}` with a JSON body: `get_invoice` (`{"id": ...}`), `list_invoices` (`{}`) and
`revenue_summary` (`{}`). Each resolves the caller and the tenant-scoped store with the service's own
dependencies (`app.deps.get_store`) and returns what the store returns, as FastAPI serializes it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from fastapi import Body, Depends

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: app/, routers/, ...

from app.deps import get_store  # noqa: E402
from app.main import create_app  # noqa: E402
from app.store import BillingStore  # noqa: E402

app = create_app()


@app.post("/plain/get_invoice")
async def plain_get_invoice(id: str = Body(embed=True), store: BillingStore = Depends(get_store)) -> Any:
    return await store.get_invoice(id)


@app.post("/plain/list_invoices")
async def plain_list_invoices(store: BillingStore = Depends(get_store)) -> Any:
    return await store.list_invoices()


@app.post("/plain/revenue_summary")
async def plain_revenue_summary(store: BillingStore = Depends(get_store)) -> Any:
    return await store.summary()
