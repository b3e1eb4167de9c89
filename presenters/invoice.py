"""Invoice presenters. Admins see the whole invoice; support sees it without internal fields and with the
customer's email and phone redacted. Lists use a light row without line items.

UI blocks compute on real values (redaction is late), and the egress guard censors any redacted value they
quote; they still show only what every audience may see (numbers, names, statuses and amounts), so the
support view's blocks read the same as the admin's rather than with censored holes.
"""

from __future__ import annotations

from typing import Any

from mcpfusion import Presenter, suggest, ui
from models import (
    INVOICE_STATUSES,
    InvoiceLine,
    InvoiceModel,
    InvoiceRowModel,
    SupportInvoiceModel,
    SupportInvoiceRowModel,
)

from .money import money
from .payment import payment_presenter

LIST_LIMIT = 20
PII_PATHS = ["customer.email", "customer.phone"]

RULES = [
    "Every *_cents amount is an integer in CENTS of the invoice currency: divide by 100 before showing it.",
    f"status is one of {', '.join(INVOICE_STATUSES)}: draft -> sent -> paid; void only through void_invoice.",
    "Only sent invoices can be reminded or paid; paid and void invoices are final.",
]
SUPPORT_RULES = [
    *RULES,
    "Customer email and phone are redacted for the support role: do not ask the user for them.",
]


def _line_table(lines: list[dict[str, Any]]) -> ui.UIBlock:
    # Every cell a string (the quantity as `ui.table` would write it): the table's cheaper path for strings.
    return ui.table(
        ["Description", "Qty", "Unit price", "Amount"],
        [[li["description"], str(li["quantity"]), money(li["unit_price_cents"]), money(li["amount_cents"])]
         for li in lines],
        title="Line items",
    )


# Embedded lines: schema and rules only, so the framework validates them without a render pass of their own;
# the invoice's UI draws their table (the same block, in the same place of the answer).
line_presenter = (
    Presenter("invoice_line")
    .schema(InvoiceLine)
    .rules(["A line's amount_cents is quantity x unit_price_cents, in CENTS."])
)


def _customer_name(invoice: dict[str, Any]) -> str:
    name: str = (invoice.get("customer") or {}).get("name", invoice["customer_id"])
    return name


# The invoice's chart: the same config for every invoice but three values, serialized once.
_PAID_CHART = ui.echarts_template(
    {
        "title": {"text": ui.slot("title")},
        "tooltip": {"trigger": "item"},
        "series": [{
            "type": "pie",
            "radius": ["40%", "70%"],
            "data": [
                {"name": "Paid", "value": ui.slot("paid")},
                {"name": "Outstanding", "value": ui.slot("outstanding")},
            ],
        }],
    },
    title="Paid vs outstanding",
    width="half",
)


def _detail_ui(invoice: dict[str, Any]) -> list[ui.UIBlock]:
    # Outstanding is what revenue_summary and open balances count: a sent invoice's unpaid part. A draft is
    # not owed until it is sent, a void one never is (nothing can be paid on either).
    outstanding = max(invoice["total_cents"] - invoice["paid_cents"], 0) if invoice["status"] == "sent" else 0
    state = "OVERDUE" if invoice["overdue"] else invoice["status"]
    total = money(invoice["total_cents"], invoice["currency"])
    return [
        ui.summary(f"{invoice['number']} for {_customer_name(invoice)}: {total}, {state}, due {invoice['due_date']}."),
        _PAID_CHART(title=f"Invoice {invoice['number']}", paid=invoice["paid_cents"] / 100,
                    outstanding=outstanding / 100),
        _line_table(invoice["lines"]),
    ]


# A page's chart: the same config for every page but its statuses and their totals.
_TOTALS_CHART = ui.echarts_template(
    {
        "title": {"text": "Totals by status"},
        "xAxis": {"type": "category", "data": ui.slot("states")},
        "yAxis": {"type": "value"},
        "series": [{"type": "bar", "data": ui.slot("totals")}],
    },
    title="Totals by status",
    width="half",
    priority=2,
)


def _list_ui(rows: list[dict[str, Any]]) -> list[ui.UIBlock]:
    # One pass over the page: each row's state is worked out once, for its table line and its status total.
    lines = []
    totals: dict[str, int] = {}  # cents by state: exact sums, divided once per state
    for r in rows:
        state = "overdue" if r["overdue"] else r["status"]
        cents = r["total_cents"]
        customer = r["customer"]
        lines.append([r["number"], customer["name"] if customer else r["customer_id"], state,
                      money(cents, r["currency"]), r["due_date"]])
        totals[state] = totals.get(state, 0) + cents
    table = ui.table(["Number", "Customer", "Status", "Total", "Due"], lines, title="Invoices")
    return [table, _TOTALS_CHART(states=list(totals), totals=[cents / 100 for cents in totals.values()])]


# Suggestions are immutable: made once, not per invoice and call. Only a sent invoice can be overdue.
REMIND = suggest("billing.remind", "An invoice is overdue: send a payment reminder")
SEND = suggest("billing.update_invoice_status", "A draft is ready: send it (status=sent)")
RECORD_PAYMENT = suggest("billing.record_payment", "Record a payment when the customer pays")
_OVERDUE = (REMIND, RECORD_PAYMENT)
_BY_STATUS = {"draft": (SEND,), "sent": (RECORD_PAYMENT,)}


def _suggest(invoice: dict[str, Any]) -> tuple[Any, ...]:
    return _OVERDUE if invoice["overdue"] else _BY_STATUS.get(invoice["status"], ())


def _suggest_rows(rows: list[dict[str, Any]]) -> list[Any]:
    # A page's suggestions follow from the states on it, in the order they first appear: one pass over the
    # page, each state's suggestions looked up once.
    states = dict.fromkeys("overdue" if r["overdue"] else r["status"] for r in rows)
    found: list[Any] = []
    for state in states:
        for s in _OVERDUE if state == "overdue" else _BY_STATUS.get(state, ()):
            if s not in found:
                found.append(s)
    return found


def _build(name: str, model: Any, *, detail: bool, support: bool) -> Presenter:
    presenter = (
        Presenter(name)
        .schema(model)
        .rules(SUPPORT_RULES if support else RULES)
        .suggest(_suggest)
    )
    if detail:
        presenter.ui(_detail_ui).embed("lines", line_presenter).embed("payments", payment_presenter)
    else:
        presenter.collection_ui(_list_ui).collection_suggest(_suggest_rows).limit(LIST_LIMIT)
    if support:
        presenter.redact_pii(PII_PATHS)
    return presenter


invoice_admin = _build("invoice", InvoiceModel, detail=True, support=False)
invoice_support = _build("invoice_support", SupportInvoiceModel, detail=True, support=True)
invoice_rows_admin = _build("invoice_rows", InvoiceRowModel, detail=False, support=False)
invoice_rows_support = _build("invoice_rows_support", SupportInvoiceRowModel, detail=False, support=True)
