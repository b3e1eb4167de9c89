"""Models of the reference service: what a customer, an invoice and a payment are, for the agent."""

from .customer import Customer, CustomerModel, CustomerRef
from .invoice import (
    INVOICE_STATUSES,
    MAX_TOTAL_CENTS,
    ExportRow,
    Invoice,
    InvoiceLine,
    InvoiceLineInput,
    InvoiceModel,
    InvoiceRow,
    InvoiceRowModel,
    InvoiceStatus,
    RevenueSummary,
    SupportInvoiceModel,
    SupportInvoiceRowModel,
)
from .payment import NOT_BLANK_INVOICE_KEY, NOT_BLANK_KEY, Payment, PaymentMethod, PaymentModel
from .text import NO_NUL, NOT_BLANK, OptionalText, Text

__all__ = [
    "INVOICE_STATUSES",
    "MAX_TOTAL_CENTS",
    "Customer",
    "CustomerModel",
    "CustomerRef",
    "ExportRow",
    "Invoice",
    "InvoiceLine",
    "InvoiceLineInput",
    "InvoiceModel",
    "InvoiceRow",
    "InvoiceRowModel",
    "InvoiceStatus",
    "NOT_BLANK",
    "NOT_BLANK_INVOICE_KEY",
    "NOT_BLANK_KEY",
    "NO_NUL",
    "OptionalText",
    "Payment",
    "PaymentMethod",
    "PaymentModel",
    "RevenueSummary",
    "SupportInvoiceModel",
    "SupportInvoiceRowModel",
    "Text",
]
