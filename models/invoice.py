"""Invoices and their line items. One entity, several views: the full one for admins, a support view
without internal fields, and a light row for lists."""

from __future__ import annotations

import datetime as dt
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, computed_field

from mcpfusion import Model

from .customer import CustomerRef
from .text import Text

InvoiceStatus = Literal["draft", "sent", "paid", "void"]
INVOICE_STATUSES: tuple[str, ...] = get_args(InvoiceStatus)

# Fields only staff with the admin role may see (support gets views without them).
INTERNAL_FIELDS = ("internal_note", "margin_cents", "void_reason")
# Fields that never leave the server, whatever the role.
HIDDEN_FIELDS = ("tenant", "processor_token")
# A line's maxima, and so an invoice's: it totals at most what one line can (10,000 x 1,000,000.00 =
# 10,000,000,000.00), however many lines it has (create_invoice refuses more). Every amount the service stores
# (a total, a payment, a margin) is then far inside the database's 64-bit integers (app/tables.py `Money`), and
# of what a JSON number holds exactly (2**53).
MAX_QUANTITY = 10_000
MAX_UNIT_PRICE_CENTS = 100_000_000
MAX_TOTAL_CENTS = MAX_QUANTITY * MAX_UNIT_PRICE_CENTS


class InvoiceLine(BaseModel):
    """One line item. `amount_cents` is computed, never sent by the agent."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field(min_length=1, max_length=200)
    quantity: int = Field(1, ge=1, le=MAX_QUANTITY)
    unit_price_cents: int = Field(ge=0, le=MAX_UNIT_PRICE_CENTS, description="Unit price in CENTS (integer).")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def amount_cents(self) -> int:
        return self.quantity * self.unit_price_cents


class InvoiceLineInput(InvoiceLine):
    """One line item. `amount_cents` is computed, never sent by the agent."""

    # (an input's own class: the check runs on what the agent sends, not on every line read back)
    description: Text = Field(min_length=1, max_length=200)


class InvoiceRow(BaseModel):
    """An invoice without its line items (what lists show)."""

    id: str
    tenant: str
    number: str = Field(description="Human invoice number, unique per tenant.")
    customer_id: str
    customer: CustomerRef | None = None
    status: InvoiceStatus = Field(description="One of draft, sent, paid, void.")
    currency: str = Field(description="ISO 4217 code; every amount of the invoice is in this currency.")
    total_cents: int = Field(0, description="Invoice total in CENTS (integer). Divide by 100 for display.")
    paid_cents: int = Field(0, description="Amount already paid, in CENTS.")
    issued_on: dt.date
    due_date: dt.date = Field(description="Payment due date (ISO 8601).")
    overdue: bool = Field(False, description="True when a sent invoice is past its due date.")
    reminders_sent: int = 0
    internal_note: str | None = Field(None, max_length=500)
    void_reason: str | None = Field(None, max_length=200)
    margin_cents: int | None = None
    processor_token: str | None = None


class Invoice(InvoiceRow):
    """An invoice with its line items."""

    lines: list[InvoiceLine] = Field(min_length=1, max_length=100, description="Line items; amounts in CENTS.")


_CASTS = {"total_cents": "int", "paid_cents": "int", "issued_on": "date", "due_date": "date"}
_GUARDED = ["id", "number", "total_cents", "paid_cents", "issued_on", "overdue", "reminders_sent", "margin_cents",
            "void_reason"]

InvoiceModel = Model(
    Invoice,
    casts=_CASTS,
    hidden=HIDDEN_FIELDS,
    guarded=_GUARDED,
    fillable={"create": ["customer_id", "due_date", "lines", "internal_note"], "update": ["status"]},
    partial_operations=(),  # updating the status means sending one
)
SupportInvoiceModel = Model(Invoice, name="SupportInvoice", casts=_CASTS, hidden=HIDDEN_FIELDS + INTERNAL_FIELDS)
InvoiceRowModel = Model(InvoiceRow, casts=_CASTS, hidden=HIDDEN_FIELDS)
SupportInvoiceRowModel = Model(
    InvoiceRow, name="SupportInvoiceRow", casts=_CASTS, hidden=HIDDEN_FIELDS + INTERNAL_FIELDS
)


class RevenueSummary(BaseModel):
    """The tenant's receivables at a glance (answered as structured content)."""

    currency: str
    invoice_count: int
    count_by_status: dict[str, int] = Field(description="Number of invoices per status.")
    outstanding_cents: int = Field(description="Sent but unpaid amount, in CENTS.")
    overdue_cents: int = Field(description="Part of the outstanding amount past its due date, in CENTS.")
    overdue_count: int
    paid_cents: int = Field(description="Amount received, in CENTS.")


class ExportRow(BaseModel):
    """One invoice as `export_invoices` lists it (TOON text, and the same rows as structured content)."""

    id: str
    number: str
    customer: str = Field(description="The customer's name.")
    status: InvoiceStatus
    total_cents: int = Field(description="Invoice total in CENTS.")
    due_date: dt.date
    overdue: bool
