"""The invoice every benchmarked server serves, raw (what a handler loads) and public (what the agent sees).

`PUBLIC` is what mcpfusion's presenter puts in its data block for `RAW` (hidden field stripped, PII paths
redacted); the peers return it directly, so every server sends the same invoice JSON.
"""

from __future__ import annotations

import copy
from typing import Any

TOOL_NAME = "billing_get_invoice"
INVOICE_ID = "inv_1042"

RAW: dict[str, Any] = {
    "id": INVOICE_ID,
    "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "phone": "+44 20 7946 0000"},
    "amount_cents": 129900,
    "status": "overdue",
    "due_date": "2026-11-01",
    "internal_notes": "cost basis 80000",
    "lines": [
        {"sku": "PLAN-PRO", "qty": 1, "amount_cents": 99900, "card": "4111 1111 1111 1111"},
        {"sku": "SEATS", "qty": 3, "amount_cents": 30000, "card": None},
    ],
}

PUBLIC: dict[str, Any] = copy.deepcopy(RAW)
del PUBLIC["internal_notes"]
PUBLIC["customer"]["email"] = PUBLIC["customer"]["phone"] = "[REDACTED]"
for _line in PUBLIC["lines"]:
    _line["card"] = "[REDACTED]"


def public_invoice(invoice_id: str) -> dict[str, Any]:
    """The public invoice, or KeyError (each peer turns that into its own tool error)."""
    if invoice_id != INVOICE_ID:
        raise KeyError(invoice_id)
    return PUBLIC
