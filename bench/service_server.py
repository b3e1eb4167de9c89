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

Every cell's route is the first one its application tries: FastAPI tries routes in order and a route that
does not match costs about 9k instructions (FastAPI 0.165), so a route placed behind others pays for them.
`app` is a dispatcher in front of one service application per plain route (that route inserted first) and
the service application as it is (its MCP endpoint first): one dict lookup on the path, the same for every
cell. Each application is `create_app()` on the same database; the dispatcher starts and stops them all.

One more MCP tool, `bench_data`, splits what an MCP call costs beyond the plain route: its `get_invoice`
makes the same store call through the same dependency (`get_store`) and answers the data through the
schema firewall of the plain route's model (`Presenter.firewall(InvoiceView)`: the same fields, validated,
hidden ones removed), without the service presenters' UI blocks, rules and suggestions; its `list_invoices`
does the same for a page of rows (`Presenter.firewall(InvoiceRowModel)`), paginated as billing's is (the page
size of the service's list presenter, a next cursor). The MCP call of
`billing_read` minus this one is what the service's presentation costs; this one minus the plain route is
the MCP protocol and the framework's per-call path.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Body, Depends, FastAPI
from pydantic import create_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: app/, routers/, ...

from app.deps import get_store  # noqa: E402
from app.main import create_app  # noqa: E402
from app.store import BillingStore, invoice_key  # noqa: E402
from mcpfusion import Page, Presenter, Tool  # noqa: E402
from models import InvoiceModel, InvoiceRowModel, PaymentModel, RevenueSummary  # noqa: E402
from presenters.invoice import LIST_LIMIT  # noqa: E402
from routers.billing import InvoiceId  # noqa: E402

service = create_app()  # the MCP cells: the service as it is, its MCP endpoint the first route

# The admin's view of an invoice, as the presenter shows it: the invoice model with its payments embedded.
InvoiceView = create_model("InvoiceView", __base__=InvoiceModel.schema, payments=(list[PaymentModel.schema], []))


async def plain_get_invoice(id: str = Body(embed=True), store: BillingStore = Depends(get_store)) -> Any:
    return await store.get_invoice(id)


async def plain_list_invoices(store: BillingStore = Depends(get_store)) -> Any:
    return (await store.list_invoices(limit=LIST_LIMIT + 1))[:LIST_LIMIT]


async def plain_revenue_summary(store: BillingStore = Depends(get_store)) -> Any:
    return RevenueSummary.model_validate(await store.summary())


PLAIN: dict[str, tuple[Callable[..., Any], Any]] = {
    "get_invoice": (plain_get_invoice, InvoiceView),
    "list_invoices": (plain_list_invoices, list[InvoiceRowModel.schema]),  # type: ignore[name-defined]
    "revenue_summary": (plain_revenue_summary, RevenueSummary),
}


def plain_app(action: str) -> FastAPI:
    """The service with `POST /plain/{action}` as its first route."""
    endpoint, model = PLAIN[action]
    plain = create_app()
    plain.post(f"/plain/{action}", response_model=model)(endpoint)
    plain.router.routes.insert(0, plain.router.routes.pop())
    return plain


bench_data = Tool("bench_data", description="The reference service's data without its presentation (benchmark)",
                  scopes=["billing:read"])


@bench_data.action(readonly=True, returns=Presenter.firewall(InvoiceView))
async def get_invoice(id: InvoiceId, store: BillingStore = Depends(get_store)) -> dict[str, Any]:
    """Get one invoice with its lines and payments, as the plain route returns it"""
    return await store.get_invoice(id)


@bench_data.action(readonly=True, returns=Presenter.firewall(InvoiceRowModel), paginate=LIST_LIMIT)
async def list_invoices(page: Page, store: BillingStore = Depends(get_store)) -> list[dict[str, Any]]:
    """List invoices one page at a time, as the plain route returns them (the same pagination as billing's)"""
    rows = await store.list_invoices(after=page.after, limit=page.size + 1)
    return page.keyset(rows, key=invoice_key)


service.state.mcpfusion.add_tool(bench_data)


class BenchApp:
    """The ASGI app the benchmarks serve: each request goes to its cell's application, by its path.

    It starts and stops every application for the ASGI lifespan, and has the `router.lifespan_context(app)`
    of a Starlette application, so the drivers (and those of older trees) start it the same way."""

    def __init__(self, default: FastAPI, by_path: dict[str, FastAPI]) -> None:
        self.default = default
        self.by_path = by_path
        self.router = self
        self.state = default.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        await self.by_path.get(scope["path"], self.default)(scope, receive, send)

    @asynccontextmanager
    async def lifespan_context(self, _app: Any = None) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for one in (self.default, *self.by_path.values()):
                await stack.enter_async_context(one.router.lifespan_context(one))
            yield

    async def _lifespan(self, receive: Any, send: Any) -> None:
        await receive()  # lifespan.startup
        async with self.lifespan_context():
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})


app = BenchApp(service, {f"/plain/{action}": plain_app(action) for action in PLAIN})
