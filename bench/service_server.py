"""The reference service (`app.main.create_app`) as `bench/service.py` serves it, plus plain FastAPI routes
that make the same store calls on the same database in the same process: the floor the MCP calls are
compared with.

    DATABASE_URL=sqlite:///... uvicorn service_server:app --app-dir bench

`POST /plain/{action}` with a JSON body: `get_invoice` (`{"id": ...}`), `list_invoices` (`{}`) and
`revenue_summary` (`{}`). Each does what the MCP call does short of the MCP protocol and the presentation:

- the same caller: the bearer token resolved by the service's own dependency (`app.auth.current_principal`,
  via `app.deps.get_store`), the same tenant-scoped store and database access;
- the same store call with the same arguments (`list_invoices` reads one page of the size the MCP action
  uses, plus the row that tells whether there is a next page);
- the same data out: the result validated and serialized by FastAPI through the models the presenters use
  (hidden fields removed, the caller's audience: the demo admin here), as a REST route would return it.

The routes are matched before the service's own (FastAPI tries routes in order), so they do not pay for
the thirty-odd routes of the service being tried first.

One more MCP tool, `bench_data`, splits what an MCP call costs beyond the plain route: its `get_invoice`
makes the same store call through the same dependency (`get_store`) and answers the data through the
schema firewall of the plain route's model (`Presenter.firewall(InvoiceView)`: the same fields, validated,
hidden ones removed), without the service presenters' UI blocks, rules and suggestions. The MCP call of
`billing_read` minus this one is what the service's presentation costs; this one minus the plain route is
the MCP protocol and the framework's per-call path.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from fastapi import Body, Depends
from pydantic import create_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: app/, routers/, ...

from app.deps import get_store  # noqa: E402
from app.main import create_app  # noqa: E402
from app.store import BillingStore  # noqa: E402
from mcpfusion import Presenter, Tool  # noqa: E402
from models import InvoiceModel, InvoiceRowModel, PaymentModel, RevenueSummary  # noqa: E402
from presenters.invoice import LIST_LIMIT  # noqa: E402
from routers.billing import InvoiceId  # noqa: E402

app = create_app()
before = len(app.router.routes)

# The admin's view of an invoice, as the presenter shows it: the invoice model with its payments embedded.
InvoiceView = create_model("InvoiceView", __base__=InvoiceModel.schema, payments=(list[PaymentModel.schema], []))


@app.post("/plain/get_invoice", response_model=InvoiceView)
async def plain_get_invoice(id: str = Body(embed=True), store: BillingStore = Depends(get_store)) -> Any:
    return await store.get_invoice(id)


@app.post("/plain/list_invoices", response_model=list[InvoiceRowModel.schema])  # type: ignore[name-defined]
async def plain_list_invoices(store: BillingStore = Depends(get_store)) -> Any:
    return (await store.list_invoices(limit=LIST_LIMIT + 1))[:LIST_LIMIT]


@app.post("/plain/revenue_summary", response_model=RevenueSummary)
async def plain_revenue_summary(store: BillingStore = Depends(get_store)) -> Any:
    return RevenueSummary.model_validate(await store.summary())


app.router.routes[:] = app.router.routes[before:] + app.router.routes[:before]  # the plain routes first

bench_data = Tool("bench_data", description="The reference service's data without its presentation (benchmark)",
                  scopes=["billing:read"])


@bench_data.action(readonly=True, returns=Presenter.firewall(InvoiceView))
async def get_invoice(id: InvoiceId, store: BillingStore = Depends(get_store)) -> dict[str, Any]:
    """Get one invoice with its lines and payments, as the plain route returns it"""
    return await store.get_invoice(id)


app.state.mcpfusion.add_tool(bench_data)
