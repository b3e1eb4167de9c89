"""Payments received against an invoice."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import AfterValidator, BaseModel, Field

from mcpfusion import Model

from .text import shows

PaymentMethod = Literal["card", "transfer"]


def not_blank_key(value: str | None) -> str | None:
    """`value` unchanged, unless nothing of it shows (a ValueError, the field's validation error): spaces, or
    what copies and pastes as blank (zero-width spaces, a BOM, no-break spaces, controls, letters drawn blank).
    Such a key is no key of this payment's: an agent sending the same blank for every payment would have each
    payment after the first answered as its retry (or refused as another's), not recorded."""
    return blank_key_refused(value, "payment")


def blank_key_refused(value: str | None, what: str, length: str = "8 to 64") -> str | None:
    """`value` unchanged, unless it is an idempotency key of which nothing shows (`models.text.shows`): refused
    as the field's validation error, naming `what` the key is for (a payment, an invoice)."""
    if value is not None and not any(map(shows, value)):
        raise ValueError(f"must not be blank: send a key of your own for this {what}, {length} characters of "
                         "which some show (e.g. a UUID), and the same key again only on its retry")
    return value


NOT_BLANK_KEY = AfterValidator(not_blank_key)
"""The idempotency key's rule, after its length limits (as `NO_NUL`: those stay a string's)."""


def not_blank_invoice_key(value: str | None) -> str | None:
    """`not_blank_key` of `create_invoice`'s key: the same rule, its error naming an invoice (no least length:
    see `routers.billing.InvoiceKey`)."""
    return blank_key_refused(value, "invoice", "up to 64")


NOT_BLANK_INVOICE_KEY = AfterValidator(not_blank_invoice_key)
"""`NOT_BLANK_KEY` of `create_invoice`'s key: the same rule, its error naming an invoice."""


class Payment(BaseModel):
    id: str
    invoice_id: str
    amount_cents: int = Field(ge=1, description="Amount received, in CENTS (integer).")
    method: PaymentMethod = "card"
    received_on: dt.date
    processor_ref: str | None = None  # the payment processor's reference: hidden, never leaves the server


PaymentModel = Model(
    Payment,
    casts={"received_on": "date", "amount_cents": "int"},
    hidden=["processor_ref"],
    guarded=["id", "invoice_id", "received_on"],
    fillable={"create": ["amount_cents", "method"]},
    partial_operations=(),
)
