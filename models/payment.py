"""Payments received against an invoice."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field

from mcpfusion import Model

PaymentMethod = Literal["card", "transfer"]


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
