"""Customers: who gets invoiced. Email and phone are personal data (support never sees them)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from mcpfusion import Model


class CustomerRef(BaseModel):
    """A customer as embedded in an invoice."""

    id: str
    name: str
    email: str = Field(description="Billing contact email (personal data).")
    phone: str | None = None


class Customer(BaseModel):
    """A customer of the tenant."""

    id: str
    tenant: str
    name: str
    email: str = Field(description="Billing contact email (personal data).")
    phone: str | None = None
    country: str = Field(description="ISO 3166-1 alpha-2 country code.")
    created_on: dt.date
    open_balance_cents: int = Field(0, description="Amount still owed, in CENTS (integer). Divide by 100.")


CustomerModel = Model(
    Customer,
    casts={"created_on": "date", "open_balance_cents": "int"},
    hidden=["tenant"],
    guarded=["id", "open_balance_cents", "created_on"],
    fillable={"create": ["name", "email", "phone", "country"]},
)
