"""mcpfusion's side of `bench/mcp_throughput.py`: the invoice tool behind a full presenter (model with a
hidden field, rules, a UI table, a suggestion, PII redaction and one embedded child presenter).

Serve: `uvicorn mcpfusion_server:app --app-dir bench` (MCP at /mcp, JSON responses).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from mcpfusion import Model, Presenter, Tool, ToolError, suggest, ui
from mcpfusion.app import MCPFusion

try:  # run as a script/module from bench/ or imported as bench.mcpfusion_server
    from peers.invoice import INVOICE_ID, RAW
except ImportError:  # pragma: no cover
    from bench.peers.invoice import INVOICE_ID, RAW


class Invoice(BaseModel):
    id: str
    customer: dict[str, Any]
    amount_cents: int = Field(description="CENTS, divide by 100")
    status: Literal["draft", "paid", "overdue"]
    due_date: str
    internal_notes: str = ""


InvoiceModel = Model(Invoice, hidden=["internal_notes"])

line_presenter = (
    Presenter("InvoiceLine")
    .schema({"sku": str, "qty": int, "amount_cents": int, "card": str | None})
    .redact_pii(["card"])
    .rules(["Line amounts are in CENTS."])
)


def _invoice_ui(inv: dict[str, Any]) -> list[Any]:
    rows = [["Invoice", inv["id"]], ["Amount", inv["amount_cents"] / 100], ["Status", inv["status"]]]
    return [ui.table(["Field", "Value"], rows)]


def _invoice_suggestions(inv: dict[str, Any]) -> list[Any]:
    return [suggest("billing.remind", "Send a payment reminder") if inv["status"] == "overdue" else None]


invoice_presenter = (
    Presenter("Invoice")
    .schema(InvoiceModel)
    .rules(["CRITICAL: amount_cents is in CENTS. Divide by 100.", "Status is one of draft, paid, overdue."])
    .redact_pii(["customer.email", "customer.phone"])
    .ui(_invoice_ui)
    .suggest(_invoice_suggestions)
    .embed("lines", line_presenter)
)

billing = Tool("billing", description="Invoices", exposition="flat")


@billing.action(readonly=True, returns=invoice_presenter)
async def get_invoice(id: Annotated[str, Field(description="Invoice id, e.g. inv_1042")]) -> dict[str, Any]:
    """Fetch one invoice."""
    if id != INVOICE_ID:
        raise ToolError("NOT_FOUND", f'Invoice "{id}" was not found.')
    return RAW


fusion = MCPFusion(name="bench-mcpfusion", version="1.0.0", tools=[billing], json_response=True)
app = fusion.build_app()
