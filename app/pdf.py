"""Invoices as PDF documents (fpdf2), for `billing.invoice_pdf` and the `invoice://{id}` resource template.

The document is drawn from the invoice *as presented to the caller*: after the presenter's schema firewall
and redaction, so the support role's PDF carries `[REDACTED]` where its data block does, and hidden or
internal fields never reach the page.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends
from fpdf import FPDF

from app.deps import get_store, invoice_presenter
from app.store import BillingStore
from mcpfusion import Presenter
from mcpfusion.content import EmbeddedResource, document
from presenters.money import money


def _latin1(value: Any) -> str:
    # The core PDF fonts are Latin-1: anything else is shown as '?' rather than failing the call.
    return str(value).encode("latin-1", "replace").decode("latin-1")


def invoice_pdf(invoice: dict[str, Any]) -> bytes:
    """One A4 page: header, customer, line items, totals."""
    currency = invoice.get("currency", "")
    pdf = FPDF(format="A4")
    pdf.set_title(_latin1(f"Invoice {invoice.get('number', invoice.get('id', ''))}"))
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 18)
    pdf.cell(0, 12, _latin1(f"Invoice {invoice.get('number', '')}"), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    facts = [("Invoice id", invoice.get("id")), ("Status", invoice.get("status")),
             ("Issued", invoice.get("issued_on") or invoice.get("created_at")), ("Due", invoice.get("due_date"))]
    customer = invoice.get("customer") or {}
    facts += [("Customer", customer.get("name", invoice.get("customer_id"))), ("Email", customer.get("email")),
              ("Phone", customer.get("phone"))]
    for label, value in facts:
        if value not in (None, ""):
            pdf.cell(35, 7, _latin1(label + ":"))
            pdf.cell(0, 7, _latin1(value), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    widths = (90, 20, 35, 35)
    pdf.set_font("Helvetica", "B", 11)
    for width, head in zip(widths, ("Description", "Qty", "Unit price", "Amount"), strict=True):
        pdf.cell(width, 8, head, border=1)
    pdf.ln()
    pdf.set_font("Helvetica", "", 11)
    for line in invoice.get("lines") or []:
        cells = (line.get("description", ""), line.get("quantity", ""), money(line.get("unit_price_cents")),
                 money(line.get("amount_cents")))
        for width, value in zip(widths, cells, strict=True):
            pdf.cell(width, 8, _latin1(value), border=1)
        pdf.ln()
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 12)
    for label, key in (("Total", "total_cents"), ("Paid", "paid_cents")):
        if key in invoice:
            pdf.cell(145, 8, label, align="R")
            pdf.cell(35, 8, _latin1(money(invoice[key], currency)), align="R", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def invoice_document(invoice: dict[str, Any]) -> EmbeddedResource:
    """The presented invoice as an embedded PDF resource (what `billing.invoice_pdf` attaches)."""
    return document(invoice_pdf(invoice), "application/pdf", uri=f"invoice://{invoice['id']}")


async def invoice_resource(
    id: str, store: BillingStore = Depends(get_store), view: Presenter = Depends(invoice_presenter)
) -> bytes:
    """The `invoice://{id}` resource: the caller's view of an invoice as a PDF (what invoice_pdf attaches)."""
    return invoice_pdf(view.present(await store.get_invoice(id)).view.data)
