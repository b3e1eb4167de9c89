"""Payments received against an invoice."""

from __future__ import annotations

import datetime as dt
import unicodedata
from typing import Literal

from pydantic import AfterValidator, BaseModel, Field

from mcpfusion import Model

PaymentMethod = Literal["card", "transfer"]


# Letters drawn as blanks (Hangul fillers, the blank Braille pattern): printable, yet nothing shows.
_DRAWN_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _shows(char: str) -> bool:
    """Whether a character shows on its own: a letter, a digit, a punctuation mark or a symbol (not a space, a
    control, a format character such as a zero-width space or a BOM, a combining mark or variation selector,
    which draw nothing alone), and not a letter drawn blank."""
    return unicodedata.category(char)[0] in "LNPS" and char not in _DRAWN_BLANK


def not_blank_key(value: str | None) -> str | None:
    """`value` unchanged, unless nothing of it shows (a ValueError, the field's validation error): spaces, or
    what copies and pastes as blank (zero-width spaces, a BOM, no-break spaces, controls, letters drawn blank).
    Such a key is no key of this payment's: an agent sending the same blank for every payment would have each
    payment after the first answered as its retry (or refused as another's), not recorded."""
    if value is not None and not any(_shows(char) for char in value):
        raise ValueError("must not be blank: send a key of your own for this payment, 8 to 64 characters of "
                         "which some show (e.g. a UUID), and the same key again only on its retry")
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
