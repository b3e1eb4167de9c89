"""Presenters of the reference service: one entity, one presenter per audience (admin, support)."""

from .customer import customer_admin, customer_support
from .invoice import invoice_admin, invoice_rows_admin, invoice_rows_support, invoice_support, line_presenter
from .payment import payment_presenter

__all__ = [
    "customer_admin",
    "customer_support",
    "invoice_admin",
    "invoice_rows_admin",
    "invoice_rows_support",
    "invoice_support",
    "line_presenter",
    "payment_presenter",
]
