"""Payments as embedded in an invoice."""

from mcpfusion import Presenter
from models import PaymentModel

payment_presenter = (
    Presenter("payment")
    .schema(PaymentModel)
    .rules(["A payment's method is card or transfer; payments are never edited, only recorded."])
)
