"""Tool `customers`: who the organisation invoices. `select=True` lets the agent ask for only the fields it
needs (`_select: ["name", "open_balance_cents"]`)."""

from typing import Annotated, Any

from fastapi import Depends
from pydantic import Field

from app.deps import PresentedBy, customer_presenter, get_store
from app.store import BillingStore, customer_key
from mcpfusion import Page, Tool
from presenters import customer_admin, customer_support

customers = Tool("customers", description="Customers of your organisation", tags=["crm"], select=True,
                 scopes=["customers:read"])
AUDIENCES: PresentedBy = {"returns": customer_presenter, "presenters": [customer_admin, customer_support]}


@customers.action("list", readonly=True, paginate=True, open_world=False, **AUDIENCES)
async def list_customers(
    page: Page,
    search: Annotated[str | None, Field(description="Part of the name, or a country code.", max_length=100)]
    = None,
    store: BillingStore = Depends(get_store),
) -> list[dict[str, Any]]:
    """List customers with their open balance (one page at a time: follow next_cursor)"""
    rows = await store.list_customers(search, after=page.after, limit=page.size + 1)
    return page.keyset(rows, key=customer_key)


@customers.action("get", readonly=True, open_world=False, **AUDIENCES)
async def get_customer(
    id: Annotated[str, Field(description="Customer id, e.g. cus_0001.", max_length=40)],
    store: BillingStore = Depends(get_store),
) -> dict[str, Any]:
    """Get one customer"""
    return await store.get_customer(id)
