"""Payments received against an invoice."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import AfterValidator, BaseModel, Field

from mcpfusion import Model

PaymentMethod = Literal["card", "transfer"]


# Letters drawn as blanks (Hangul fillers, the blank Braille pattern): printable, yet nothing shows.
_DRAWN_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def not_blank_key(value: str | None) -> str | None:
    """`value` unchanged, unless nothing of it shows (a ValueError, the field's validation error): spaces only,
    or a character that is not printable (a zero-width space, a BOM, a control, a no-break space: what copies
    and pastes as a blank) or one drawn blank. Such a key is no key of this payment's: an agent sending the same
    blank for every payment would have each payment after the first answered as its retry (or refused as
    another's), not recorded."""
    if value is not None and (not value.isprintable() or all(c.isspace() or c in _DRAWN_BLANK for c in value)):
        raise ValueError("must be a key you can read: 8 to 64 printable characters, not all blanks, no invisible "
                         "or control characters (e.g. a UUID); send a key of your own for this payment, and the "
                         "same key again only on its retry")
    return value


NOT_BLANK_KEY = AfterValidator(not_blank_key)
"""The idempotency key's rule, after its length limits (as `NO_NUL`: those stay a string's)."""


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
