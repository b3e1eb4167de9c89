"""Customer presenters: admins see contact details; support sees them redacted."""

from __future__ import annotations

from typing import Any

from mcpfusion import Presenter, suggest, ui
from models import CustomerModel

from .money import money

RULES = ["open_balance_cents is in CENTS of the tenant's currency: divide by 100 before showing it."]


def _table(customers: list[dict[str, Any]]) -> ui.UIBlock:
    return ui.table(
        ["Customer", "Country", "Open balance"],
        [[c["name"], c["country"], money(c["open_balance_cents"])] for c in customers],
        title="Customers",
    )


def _suggest(customer: dict[str, Any]) -> list[Any]:
    if customer["open_balance_cents"] > 0:
        return [suggest("billing.list_invoices", "A customer owes money: list their invoices (customer_id)")]
    return [suggest("billing.create_invoice", "Invoice a customer")]


def _build(name: str, *, support: bool) -> Presenter:
    presenter = (
        Presenter(name)
        .schema(CustomerModel)
        .rules(RULES + (["email and phone are redacted for the support role."] if support else []))
        .collection_ui(_table)
        .ui(lambda c: ui.summary(f"{c['name']} ({c['country']}) owes {money(c['open_balance_cents'])}."))
        .suggest(_suggest)
        .limit(50)
    )
    if support:
        presenter.redact_pii(["email", "phone"])
    return presenter


customer_admin = _build("customer", support=False)
customer_support = _build("customer_support", support=True)
