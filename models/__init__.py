"""Models of the reference service: what a customer, an invoice and a payment are, for the agent."""

from .customer import Customer, CustomerModel, CustomerRef
from .invoice import (
    INVOICE_STATUSES,
    ExportRow,
    Invoice,
    InvoiceLine,
    InvoiceModel,
    InvoiceRow,
    InvoiceRowModel,
    InvoiceStatus,
    RevenueSummary,
    SupportInvoiceModel,
    SupportInvoiceRowModel,
)
from .payment import Payment, PaymentMethod, PaymentModel

__all__ = [
    "INVOICE_STATUSES",
    "Customer",
    "CustomerModel",
    "CustomerRef",
    "ExportRow",
    "Invoice",
    "InvoiceLine",
    "InvoiceModel",
    "InvoiceRow",
    "InvoiceRowModel",
    "InvoiceStatus",
    "Payment",
    "PaymentMethod",
    "PaymentModel",
    "RevenueSummary",
    "SupportInvoiceModel",
    "SupportInvoiceRowModel",
]
